"""The embedded Python API: talk to a ``skueued`` from trio or asyncio code.

    async with skueue.connect("127.0.0.1:7400") as q:
        await q.enqueue(b"job-1")
        item = await q.dequeue()          # bytes, or None when the queue was empty

One connection carries any number of concurrent requests (each has a request id); a
reader task hands every reply to the task waiting for it.  It is written against anyio,
so the same code runs under trio and asyncio.  :mod:`skueue.client.blocking` derives the
same API for plain scripts, and :func:`skueue.cluster.inprocess.local_cluster` runs a
whole cluster in-process.

Every request has a deadline (``request_timeout_s``, 15 s by default).  The daemon is
told the same timeout in the hello and answers a request it could not finish in time with
an error that says why; the client waits a little longer (``REPLY_GRACE_S``) so that this
more informative answer normally arrives first, and raises :class:`RequestTimeout` itself
otherwise.  A timed-out request may still take effect: its outcome is unknown.

Values are checked against the daemon's limits (sent in its welcome) before anything is
sent, so an oversized value fails alone and never costs the connection; large
``enqueue_many``/``dequeue_many`` calls are split into requests that each fit the frame
and per-request limits, sent one after another so their order is kept.

This module is the API; the requests in flight are :mod:`skueue.client.multiplex`'s, the
connection's life (reconnects, fail-over) :mod:`skueue.client.lifecycle`'s, and the
results the typed records of :mod:`skueue.host.results`.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar, overload

import anyio
import anyio.abc

from skueue.client import arguments as check
from skueue.client.calls import Calls
from skueue.client.consumer import Consumer, Leased
from skueue.client.errors import NodeUnreachable
from skueue.client.lifecycle import (
    CONNECT_TIMEOUT_S,
    DEFAULT_NODE,
    Link,
    limits_from_welcome,
    open_first,
    open_link,
    resolve_address,
    seed_list,
)
from skueue.client.multiplex import REPLY_GRACE_S
from skueue.client.tls import resolve as resolve_tls
from skueue.core.ops import PRIORITIES_MAX
from skueue.host.requests import (
    MAX_DELIVERIES_MAX,
    ConfigureRequest,
    CreateRequest,
    DeleteRequest,
    JoinClusterRequest,
    LeaveRequest,
    PeekRequest,
    RemoveMemberRequest,
)
from skueue.host.results import (
    Configured,
    Created,
    Deleted,
    Inserted,
    MembersRemoved,
    Removed,
    Result,
)
from skueue.runtime.limits import Limits

# Names this module has always offered (tests, the CLI and the benchmarks import them).
__all__ = [
    "CONNECT_TIMEOUT_S", "DEFAULT_NODE", "DEFAULT_REQUEST_TIMEOUT_S", "REPLY_GRACE_S",
    "REQUEST_TIMEOUT_S_MAX", "Client", "Inserted", "Leased", "Removed", "connect",
    "limits_from_welcome", "open_first", "resolve_address", "seed_list",
]  # fmt: skip

DEFAULT_REQUEST_TIMEOUT_S = 15.0
# The longest a client waits for one reply; the daemon's own request_timeout_s_max
# (runtime/limits.py) defaults to the same.
REQUEST_TIMEOUT_S_MAX = 3600.0
FRAME_OVERHEAD_BYTES = check.FRAME_OVERHEAD_BYTES

R = TypeVar("R", bound=Result)


class Client:
    """A connection to one daemon.  Create it with :func:`connect`."""

    def __init__(self, link: Link, limits: Limits, replies_in_pieces: bool) -> None:
        self._link = link
        self._calls = Calls(link, limits, replies_in_pieces)
        self.request_timeout_s = link.request_timeout_s
        self.limits = limits
        self._tasks: anyio.abc.TaskGroup | None = None  # connect()'s, for consumers' refills
        self.value_bytes_max = self._calls.value_bytes_max  # per value, in bytes
        self.remove_count_max = self._calls.remove_count_max  # per remove request

    @property
    def process_id(self) -> str:
        """The daemon's process id (another member's after a fail-over)."""
        return self._link.process_id

    @property
    def structure(self) -> str:
        """What a new name becomes on this daemon by default: "queue" or "stack"."""
        return self._link.structure

    @property
    def address(self) -> str:
        """The address the client dialled (another member's after a fail-over)."""
        return self._link.address

    @property
    def name(self) -> str:
        """The daemon as error messages name it: its id, and its address if different."""
        return self._link.name

    # -- the API ----------------------------------------------------------------------

    # Every operation takes ``queue`` (a name; None: the default queue) and ``structure``
    # ("queue" or "stack"; None: the daemon's).  A name is made by its first operation,
    # with that structure; the other structure's operations on it raise RequestRejected.

    async def enqueue(
        self,
        value: bytes,
        *,
        queue: str | None = None,
        structure: str | None = None,
        priority: int | None = None,
    ) -> Inserted:
        """``priority``: its level in a queue made with priority levels (0 the most
        urgent; past the last level, the last); other queues ignore it."""
        target = check.target(queue, structure)
        return (await self._calls.insert([value], target, priority))[0]

    @overload
    async def dequeue(
        self,
        *,
        queue: str | None = ...,
        structure: str | None = ...,
        wait: float | None = ...,
        lease: None = ...,
        max_deliveries: None = ...,
    ) -> bytes | None: ...

    @overload
    async def dequeue(
        self,
        *,
        queue: str | None = ...,
        structure: str | None = ...,
        wait: float | None = ...,
        lease: float,
        max_deliveries: int | None = ...,
    ) -> Leased | None: ...

    async def dequeue(
        self,
        *,
        queue: str | None = None,
        structure: str | None = None,
        wait: float | None = None,
        lease: float | None = None,
        max_deliveries: int | None = None,
    ) -> bytes | Leased | None:
        """The oldest element (a stack: the newest), or None if there is none; with
        ``wait`` (seconds), wait up to that long for one, like Redis's BLPOP.

        With ``lease`` (seconds) the element is held for this connection, not removed:
        a :class:`~skueue.client.consumer.Leased` to :meth:`ack` when done (or
        :meth:`nack`).  Not acked in time, or when the connection closes, it goes back
        into the queue at its tail.  With ``max_deliveries`` too, an element returned
        after that many deliveries goes to the queue's dead letters (``NAME.dlq``)."""
        if lease is not None:
            got = await self.dequeue_many(
                1, queue=queue, structure=structure, wait=wait, lease=lease,
                max_deliveries=max_deliveries,
            )  # fmt: skip
            return got[0] if got else None
        if max_deliveries is not None:
            raise ValueError("max_deliveries needs a lease")
        return (await self.remove(1, queue=queue, structure=structure, wait=wait))[0].value

    async def enqueue_many(
        self,
        values: Sequence[bytes],
        *,
        queue: str | None = None,
        structure: str | None = None,
        priority: int | None = None,
    ) -> list[Inserted]:
        return await self.insert(values, queue=queue, structure=structure, priority=priority)

    @overload
    async def dequeue_many(
        self,
        count: int,
        *,
        queue: str | None = ...,
        structure: str | None = ...,
        wait: float | None = ...,
        lease: None = ...,
        max_deliveries: None = ...,
    ) -> list[bytes]: ...

    @overload
    async def dequeue_many(
        self,
        count: int,
        *,
        queue: str | None = ...,
        structure: str | None = ...,
        wait: float | None = ...,
        lease: float,
        max_deliveries: int | None = ...,
    ) -> list[Leased]: ...

    async def dequeue_many(
        self,
        count: int,
        *,
        queue: str | None = None,
        structure: str | None = None,
        wait: float | None = None,
        lease: float | None = None,
        max_deliveries: int | None = None,
    ) -> list[bytes] | list[Leased]:
        """Up to ``count`` elements, oldest first (a stack: newest first); fewer when the
        structure ran empty.  With ``wait``, an empty queue is waited on up to that long
        for at least one element.  :meth:`remove` keeps the empty results and positions.
        ``lease`` and ``max_deliveries`` as in :meth:`dequeue`."""
        return await self._calls.dequeue_many(
            count, check.target(queue, structure), wait, lease, max_deliveries
        )

    async def lease_many(
        self,
        count: int,
        queue: str | None,
        structure: str | None,
        wait: float | None,
        lease: float,
        max_deliveries: int | None,
        *,
        fetch: bool = False,
        look: bool = False,
    ) -> list[Leased]:
        """``dequeue_many(..., lease=lease)`` with every argument given (the consumer's).
        ``fetch``: a consumer's fetch, up to ``count`` (what the queue lacks is no empty
        result in its stats; waiting, one remove tries each cycle, not ``count``).
        ``look``: to show them and :meth:`release` them with ``keep``, uncounted."""
        target = check.target(queue, structure)
        return await self._calls.lease(count, target, lease, wait, max_deliveries, fetch, look)

    async def ack(self, leased: Leased) -> bool:
        """Done with a leased element: it is gone for good.  False: its lease had ended
        (it expired, or its connection closed), so the element went back and may be
        delivered again."""
        return (await self._calls.end_leases("ack", [leased]))[0]

    async def ack_many(self, leased: Sequence[Leased]) -> list[bool]:
        return await self._calls.end_leases("ack", leased)

    async def nack(self, leased: Leased) -> bool:
        """Return a leased element into its queue now (at its tail); the next delivery
        counts one more.  False: its lease had ended already (the element went back)."""
        return (await self._calls.end_leases("nack", [leased]))[0]

    async def nack_many(self, leased: Sequence[Leased]) -> list[bool]:
        return await self._calls.end_leases("nack", leased)

    async def release(self, leased: Sequence[Leased], *, keep: bool = False) -> list[bool]:
        """Return elements like :meth:`nack_many`; with ``keep``, as they were before this
        delivery (its count and reason unchanged: a look, not a delivery)."""
        return await self._calls.end_leases("keep" if keep else "nack", leased)

    async def extend(self, leased: Leased, seconds: float) -> bool:
        """Hold a leased element ``seconds`` from now instead.  False: its lease had ended."""
        return (await self._calls.end_leases("extend", [leased], check.lease_ms(seconds)))[0]

    def consume(
        self,
        queue: str | None = None,
        *,
        structure: str | None = None,
        prefetch: int = 100,
        lease: float = 30.0,
        replenish: int | None = None,
        max_deliveries: int | None = None,
        idle: float | None = None,
    ) -> Consumer:
        """``async for msg in q.consume("jobs", prefetch=100, lease=30)``: leased
        messages from a local buffer of up to ``prefetch``, refilled in the background
        below ``replenish`` (half by default).  ``idle``: stop after that many seconds
        with nothing to hand out (None: never).  Use it in ``async with`` (or call
        ``aclose()``) to return what was fetched but not handed out at once; otherwise it
        goes back when its lease ends or the connection closes.  See
        :mod:`skueue.client.consumer`."""
        check.lease_ms(lease)
        check.max_deliveries(max_deliveries)
        check.target(queue, structure)
        return Consumer(
            self, queue, structure, prefetch=prefetch, lease=lease, replenish=replenish,
            max_deliveries=max_deliveries, idle=idle,
        )  # fmt: skip

    # The stack speaks of push and pop.  Without ``structure`` every operation takes the
    # structure its queue has; push and pop differ only on a name that holds no queue
    # yet: a push makes it a stack (an enqueue, a queue of the daemon's --structure).

    async def push(
        self,
        value: bytes,
        *,
        queue: str | None = None,
        structure: str | None = None,
        priority: int | None = None,
    ) -> Inserted:
        """:meth:`enqueue`, but a new name becomes a stack (see above)."""
        pushed = await self.push_many([value], queue=queue, structure=structure, priority=priority)
        return pushed[0]

    async def push_many(
        self,
        values: Sequence[bytes],
        *,
        queue: str | None = None,
        structure: str | None = None,
        priority: int | None = None,
    ) -> list[Inserted]:
        return await self._calls.insert(values, check.target(queue, structure, True), priority)

    async def pop(
        self,
        *,
        queue: str | None = None,
        structure: str | None = None,
        wait: float | None = None,
        lease: float | None = None,
        max_deliveries: int | None = None,
    ) -> Any:
        """:meth:`dequeue` (a stack's top; on a queue, its head); bytes, None when
        empty, or with ``lease`` a Leased."""
        got = await self.pop_many(
            1, queue=queue, structure=structure, wait=wait, lease=lease,
            max_deliveries=max_deliveries,
        )  # fmt: skip
        return got[0] if got else None

    async def pop_many(
        self,
        count: int,
        *,
        queue: str | None = None,
        structure: str | None = None,
        wait: float | None = None,
        lease: float | None = None,
        max_deliveries: int | None = None,
    ) -> Any:
        """:meth:`dequeue_many`, newest first on a stack."""
        target = check.target(queue, structure, True)
        return await self._calls.dequeue_many(count, target, wait, lease, max_deliveries)

    async def insert(
        self,
        values: Sequence[bytes],
        *,
        queue: str | None = None,
        structure: str | None = None,
        priority: int | None = None,
    ) -> list[Inserted]:
        """Insert ``values`` in order; one :class:`Inserted` per value.  Every value is
        checked against the daemon's limit before any is sent."""
        return await self._calls.insert(values, check.target(queue, structure), priority)

    async def remove(
        self,
        count: int,
        *,
        queue: str | None = None,
        structure: str | None = None,
        wait: float | None = None,
        until_empty: bool = False,
        stack_if_new: bool = False,
    ) -> list[Removed]:
        """Perform ``count`` removals; one :class:`Removed` per removal, in order, its
        ``value`` None where the structure was empty.  With ``wait`` (seconds), a
        request that finds the queue empty waits up to that long until it gets at least
        one element: the daemon tries again in its own cycles, and the result is one
        operation per removal, as if it had come at the end.  ``until_empty``: send no
        more requests once one found the structure empty (as :meth:`dequeue_many`).
        ``stack_if_new``: as :meth:`pop`, a name that holds nothing yet is a stack."""
        target = check.target(queue, structure, stack_if_new)
        return await self._calls.remove(count, target, stop_when_empty=until_empty, wait=wait)

    async def create_queue(
        self,
        queue: str,
        *,
        structure: str | None = None,
        max_deliveries: int | None = None,
        priorities: int | None = None,
    ) -> bool:
        """Make the named queue with these settings: ``structure`` ("queue" or "stack";
        default the daemon's) and ``max_deliveries`` (a leased element returned more
        often goes to ``NAME.dlq``, whatever limit its consumer asked for, unless that
        is smaller; default none).  True if this call made it, False if it was made
        already with these settings; made with others, it raises ``RequestRejected``
        that says which.  ``priorities``: a queue of that many priority levels (2 to
        16; ``enqueue(priority=)`` picks one, and every dequeue takes the most urgent
        element, FIFO within a level).  A name used without a create is made by its
        first operation, with its structure, no limit and no levels."""
        name, stack, _ = check.target(queue, structure)
        assert name is not None
        limit = None
        if max_deliveries is not None:
            limit = check.checked_int("max_deliveries", max_deliveries, 0, MAX_DELIVERIES_MAX)
        if priorities is not None:
            check.checked_int("priorities", priorities, 1, PRIORITIES_MAX)
        request = CreateRequest(0, name, stack, limit, priorities)
        (made,) = await self._calls.results(request, Created)
        return made.created

    async def configure_queue(self, queue: str, *, max_deliveries: int) -> dict[str, Any]:
        """Change the delivery limit of the queue or stack ``queue`` (0: none; at most
        ``MAX_DELIVERIES_MAX``), whatever it was made with: from the leased removes
        ordered after it on, a returned element goes to ``NAME.dlq`` past it (leases
        already granted keep the limit they had).  It is ordered like a create, so the
        change is the same for every member.  Returns the settings now: ``{"structure":
        "queue" | "stack", "max_deliveries": N, "priorities": P}``; a name that holds no
        queue raises ``RequestRejected`` (it makes none)."""
        name, _, _ = check.target(queue, None)
        assert name is not None
        limit = check.checked_int("max_deliveries", max_deliveries, 0, MAX_DELIVERIES_MAX)
        (now,) = await self._calls.results(ConfigureRequest(0, name, limit), Configured)
        return {
            "structure": now.structure,
            "max_deliveries": now.max_deliveries,
            "priorities": now.priorities,
        }

    async def peek(self, *, queue: str | None = None) -> bytes | None:
        """The element a dequeue would return now (the oldest of the most urgent level),
        left in the queue; None if it is empty or no queue has the name.  It is
        linearizable like a dequeue: no later dequeue returned an element it would not
        have seen.  A stack has no peek (``RequestRejected``)."""
        return (await self.peek_element(queue=queue)).value

    async def peek_element(self, *, queue: str | None = None) -> Removed:
        """:meth:`peek` with the element's rank and position (value None: empty)."""
        name, _, _ = check.target(queue, None)
        (seen,) = await self._calls.results(PeekRequest(0, name), Removed)
        return seen

    async def delete_queue(self, queue: str) -> int:
        """Delete the named queue (or stack): the elements it holds are removed, and the
        name is free for a new queue of either kind.  Returns how many it removed; a name
        that holds no queue raises ``RequestRejected``.  Leased elements are not in the
        queue: a lease that ends by a return puts its element in the queue of that name
        again.  With client tokens, it needs an admin token."""
        name, _, _ = check.target(queue, None)
        assert name is not None
        (deleted,) = await self._calls.results(DeleteRequest(0, name), Deleted)
        return deleted.removed

    async def stats(self) -> dict[str, Any]:
        return await self._calls.stats()

    async def leave(self) -> None:
        """Make the daemon hand its data to the others and exit; returns once it has."""
        await self._calls.results(LeaveRequest(0), None)

    async def join(self, seed: str) -> None:
        """Make a daemon that is alone (and empty) join the cluster ``seed`` is in;
        returns once it is in the ring."""
        await self._calls.results(JoinClusterRequest(0, seed), None)

    async def remove_member(self, *members: str) -> dict[str, Any]:
        """Make the cluster forget members that will never come back (process ids or
        addresses; an admin connection).  Refused, with the reason, for a member that
        answers or that holds part of the ring; returns what was removed."""
        request = RemoveMemberRequest(0, tuple(members))
        (removed,) = await self._calls.results(request, MembersRemoved)
        return removed.as_dict()

    def _spawn(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``task`` in the background for as long as the connection lives."""
        if self._tasks is None:
            raise RuntimeError("a consumer runs on a client made by skueue.connect()")
        self._tasks.start_soon(task)


@asynccontextmanager
async def connect(
    address: str | None = None,
    *,
    timeout_s: float = CONNECT_TIMEOUT_S,
    request_timeout_s: float | None = None,
    admin: bool = False,
    retry: bool = True,
    token: str | None = None,
    tls: bool | ssl.SSLContext | None = None,
) -> AsyncIterator[Client]:
    """Connect to a daemon (default ``$SKUEUE_NODE``, else 127.0.0.1:7400).

    ``timeout_s`` bounds connecting and the greeting; ``request_timeout_s`` every request
    (:class:`RequestTimeout` past it; default ``DEFAULT_REQUEST_TIMEOUT_S``, 15 s).
    ``admin`` asks for the connection slot the daemon keeps for administrative commands
    (stats, join, leave).  With ``retry`` (the default) a connection that breaks is
    opened again, and the enqueues and dequeues that were waiting are sent again: the
    daemon answers each with the outcome of its first attempt, so none is applied twice
    and no dequeued element is lost with a broken reply (within the daemon's retry
    window; see the README).  ``token`` (default ``$SKUEUE_TOKEN``): the credential a
    daemon started with ``--client-tokens`` asks for.  ``tls``: None (TLS when
    ``$SKUEUE_TLS_CA`` is set), False, True or an :class:`ssl.SSLContext`; see
    :mod:`skueue.client.tls` (``$SKUEUE_TLS_CERT``/``$SKUEUE_TLS_KEY`` add a client
    certificate)."""
    token = token or os.environ.get("SKUEUE_TOKEN") or None
    context = resolve_tls(tls)
    if request_timeout_s is None:
        request_timeout_s = DEFAULT_REQUEST_TIMEOUT_S
    if not 0 < request_timeout_s <= REQUEST_TIMEOUT_S_MAX:
        raise ValueError(
            f"request_timeout_s must be positive and at most {REQUEST_TIMEOUT_S_MAX:g} "
            f"(REQUEST_TIMEOUT_S_MAX), not {request_timeout_s!r}"
        )
    seeds = seed_list(resolve_address(address))
    link = await open_link(
        seeds, timeout_s=timeout_s, request_timeout_s=request_timeout_s, admin=admin,
        retry=retry and not admin,  # stats, join and leave are not sent again
        token=token, tls=context,
    )  # fmt: skip
    limits, in_pieces = limits_from_welcome(link.opened.welcome)
    client = Client(link, limits, in_pieces)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(link.keep_connected)
            client._tasks = tg
            try:
                yield client
            finally:
                tg.cancel_scope.cancel()
                # Requests still waiting (other tasks, or a blocking call that was
                # interrupted) end now, not at their timeout.
                link.close(NodeUnreachable(f"the connection to {client.name} was closed"))
    finally:
        if link.stream is not None:
            await anyio.aclose_forcefully(link.stream)
