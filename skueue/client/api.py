"""The embedded Python API: talk to a ``skueued`` from trio or asyncio code.

    async with skueue.connect("127.0.0.1:7400") as q:
        await q.enqueue(b"job-1")
        item = await q.dequeue()          # bytes, or None when the queue was empty

One connection carries any number of concurrent requests (each has a request id); a
reader task hands every reply to the task waiting for it.  It is written against anyio,
so the same code runs under trio and asyncio.  :mod:`skueue.client.blocking` wraps it for
plain scripts, and :func:`skueue.cluster.inprocess.local_cluster` runs a whole cluster
in-process.

Every request has a deadline (``request_timeout_s``, 15 s by default).  The daemon is
told the same timeout in the hello and answers a request it could not finish in time with
an error that says why; the client waits a little longer (``REPLY_GRACE_S``) so that this
more informative answer normally arrives first, and raises :class:`RequestTimeout` itself
otherwise.  A timed-out request may still take effect: its outcome is unknown.

Values are checked against the daemon's limits (sent in its welcome) before anything is
sent, so an oversized value fails alone and never costs the connection; large
``enqueue_many``/``dequeue_many`` calls are split into requests that each fit the frame
and per-request limits, sent one after another so their order is kept.
"""

from __future__ import annotations

import itertools
import os
import secrets
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, overload

import anyio
import anyio.abc
import attrs

from skueue.client.connection import Opened, open_connection
from skueue.client.consumer import Consumer, Leased, leased_from
from skueue.client.errors import (
    BadAddress,
    NodeUnreachable,
    RequestRejected,
    RequestTimeout,
    SkueueError,
    error_from,
    reason,
)
from skueue.client.tls import resolve as resolve_tls
from skueue.core.errors import RemoteProtocolError
from skueue.core.ops import PRIORITIES_MAX, queue_name_problem
from skueue.host.address import AddressError, parse_seed_list
from skueue.runtime.limits import Limits
from skueue.wire.client_protocol import (
    LEASE_MS_MAX,
    MAX_DELIVERIES_MAX,
    PROTOCOL_VERSION,
    WAIT_MS_MAX,
    ClientHello,
    ClientRequest,
    ConfigureRequest,
    CreateRequest,
    DeleteRequest,
    InsertRequest,
    JoinClusterRequest,
    LeaseRequest,
    LeaveRequest,
    PeekRequest,
    RemoveMemberRequest,
    RemoveRequest,
    StatsRequest,
)
from skueue.wire.client_replies import Done, ErrorReply, More, StatsReply, Welcome, parse_reply
from skueue.wire.framing import pack

DEFAULT_NODE = "127.0.0.1:7400"
CONNECT_TIMEOUT_S = 10.0
DEFAULT_REQUEST_TIMEOUT_S = 15.0
# The longest a client waits for one reply; the daemon's own request_timeout_s_max
# (runtime/limits.py) defaults to the same.
REQUEST_TIMEOUT_S_MAX = 3600.0
# Extra wait past the request timeout, so that the daemon's own timeout error (which
# names the member that is down) normally arrives before the client gives up.
REPLY_GRACE_S = 2.0
# Room for a request frame's own fields (kind, rid, list header) and per-value headers.
FRAME_OVERHEAD_BYTES = 64
VALUE_OVERHEAD_BYTES = 5
# Room for a removed element's rank and position next to its value in a reply.
RESULT_OVERHEAD_BYTES = 32

@attrs.frozen
class Inserted:
    """Where an inserted element went: its rank in the serialization and its position."""

    ord: int
    position: int | None


@attrs.frozen
class Removed:
    """A removed element (None: the structure was empty), its rank and position."""

    value: bytes | None
    ord: int
    position: int | None


@attrs.define
class _Waiter:
    blob: bytes  # the request's frame, to send again after a reconnect
    # An enqueue or dequeue of a client with a session: sent again after a reconnect
    # (stats, join and leave fail with the connection instead).
    retry: bool
    done: anyio.Event = attrs.field(factory=anyio.Event)
    results: list[Any] = attrs.field(factory=list)
    reply: Done | StatsReply | None = None
    error: SkueueError | None = None
    sent_on: int = 0  # the connection it went out on last (0: none yet)
    answered_on: int = 0  # the connection its reply came on (a lease belongs to it)


# Waits between attempts to reopen a broken connection (doubling up to the maximum).
RECONNECT_START_S = 0.05
RECONNECT_MAX_S = 1.0


def limits_from_welcome(welcome: Welcome) -> tuple[Limits, bool]:
    """The daemon's limits from its welcome, and whether it sent them (a daemon that does
    speaks the protocol with replies in pieces); the defaults where it did not."""
    defaults = Limits()
    advertised = welcome.limits
    if advertised is None:
        return defaults, False
    known = {}
    for name in ("value_bytes_max", "ops_per_request_max", "frame_bytes_max"):
        value = advertised.get(name)
        if type(value) is int and value > 0:
            known[name] = value
    return attrs.evolve(defaults, **known), True


class Client:
    """A connection to one daemon.  Create it with :func:`connect`."""

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        process_id: str,
        structure: str,
        *,
        address: str | None = None,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        limits: Limits | None = None,
        replies_in_pieces: bool = False,
        reopen: Callable[[], Awaitable[Opened]] | None = None,
        fail_over: Callable[[str], Awaitable[tuple[str, Opened] | None]] | None = None,
    ) -> None:
        # The current connection; None while a broken one is being reopened.
        self._stream: anyio.abc.ByteStream | None = stream
        self._connection = 1  # counts the connections
        self._reopen = reopen  # None: a broken connection ends the client
        # Opens a session on another member of the seed list (None: no other seed).
        self._fail_over = fail_over
        self._read_scope = anyio.CancelScope()  # the current connection's reader
        self._why_lost = ""  # why the connection broke last
        self._reconnect_error = ""  # why the last attempt to reopen it failed
        self.process_id = process_id
        self.structure = structure
        self.address = address or process_id
        self.request_timeout_s = request_timeout_s
        self.limits = limits or Limits()
        self._rids = itertools.count(1)
        self._last_rid = 0
        self._waiting: dict[int, _Waiter] = {}
        self._send_lock = anyio.Lock()
        self._broken: SkueueError | None = None
        self._tasks: anyio.abc.TaskGroup | None = None  # connect()'s, for consumers' refills
        # The largest value a request may carry: the daemon's limit, and never more than
        # fits a frame on its own.
        self.value_bytes_max = min(
            self.limits.value_bytes_max,
            self.limits.frame_bytes_max - FRAME_OVERHEAD_BYTES - VALUE_OVERHEAD_BYTES,
        )
        # A daemon that splits its replies takes any count up to its per-request limit;
        # one that does not must fit every removed value into one reply frame.
        per_reply = self.limits.frame_bytes_max // (
            self.limits.value_bytes_max + RESULT_OVERHEAD_BYTES
        )
        self.remove_count_max = (
            self.limits.ops_per_request_max
            if replies_in_pieces
            else max(1, min(self.limits.ops_per_request_max, per_reply))
        )

    @property
    def name(self) -> str:
        """The daemon as error messages name it: its id, and its address if different."""
        if self.address == self.process_id:
            return self.process_id
        return f"{self.process_id} ({self.address})"

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
        return (await self.insert([value], queue=queue, structure=structure, priority=priority))[0]

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
        return await self._dequeue_many(
            count, _target(queue, structure), wait, lease, max_deliveries
        )

    async def _dequeue_many(
        self,
        count: int,
        target: Target,
        wait: float | None,
        lease: float | None,
        max_deliveries: int | None,
    ) -> list[bytes] | list[Leased]:
        if lease is not None:
            return await self._lease(count, target, lease, wait, max_deliveries)
        if max_deliveries is not None:
            raise ValueError("max_deliveries needs a lease")
        return [
            r.value
            for r in await self._remove(count, target, stop_when_empty=True, wait=wait)
            if r.value is not None
        ]

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
        target = _target(queue, structure)
        return await self._lease(count, target, lease, wait, max_deliveries, fetch, look)

    async def ack(self, leased: Leased) -> bool:
        """Done with a leased element: it is gone for good.  False: its lease had ended
        (it expired, or its connection closed), so the element went back and may be
        delivered again."""
        return (await self._end_leases("ack", [leased]))[0]

    async def ack_many(self, leased: Sequence[Leased]) -> list[bool]:
        return await self._end_leases("ack", leased)

    async def nack(self, leased: Leased) -> bool:
        """Return a leased element into its queue now (at its tail); the next delivery
        counts one more.  False: its lease had ended already (the element went back)."""
        return (await self._end_leases("nack", [leased]))[0]

    async def nack_many(self, leased: Sequence[Leased]) -> list[bool]:
        return await self._end_leases("nack", leased)

    async def release(self, leased: Sequence[Leased], *, keep: bool = False) -> list[bool]:
        """Return elements like :meth:`nack_many`; with ``keep``, as they were before this
        delivery (its count and reason unchanged: a look, not a delivery)."""
        return await self._end_leases("keep" if keep else "nack", leased)

    async def extend(self, leased: Leased, seconds: float) -> bool:
        """Hold a leased element ``seconds`` from now instead.  False: its lease had ended."""
        return (await self._end_leases("extend", [leased], _lease_ms(seconds)))[0]

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
        _lease_ms(lease)
        _max_deliveries(max_deliveries)
        _target(queue, structure)
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
        return await self._insert(values, _target(queue, structure, True), priority)

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
        target = _target(queue, structure, True)
        return await self._dequeue_many(count, target, wait, lease, max_deliveries)

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
        return await self._insert(values, _target(queue, structure), priority)

    async def _insert(
        self, values: Sequence[bytes], target: Target, priority: int | None
    ) -> list[Inserted]:
        name, stack, prefer = target
        if priority is not None:
            _checked_int("priority", priority, 0, PRIORITIES_MAX - 1)
        checked = [self._checked_value(v) for v in values]
        out: list[Inserted] = []
        for chunk in self._insert_chunks(checked):
            request = InsertRequest(0, chunk, name, stack, priority, prefer)
            results = await self._request(request)
            out.extend(Inserted(r[0], r[1]) for r in results)
        return out

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
        target = _target(queue, structure, stack_if_new)
        return await self._remove(count, target, stop_when_empty=until_empty, wait=wait)

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
        name, stack, _ = _target(queue, structure)
        assert name is not None
        limit = None
        if max_deliveries is not None:
            limit = _checked_int("max_deliveries", max_deliveries, 0, MAX_DELIVERIES_MAX)
        if priorities is not None:
            _checked_int("priorities", priorities, 1, PRIORITIES_MAX)
        request = CreateRequest(0, name, stack, limit, priorities)
        ((created,),) = await self._request(request)
        return bool(created)

    async def configure_queue(self, queue: str, *, max_deliveries: int) -> dict[str, Any]:
        """Change the delivery limit of the queue or stack ``queue`` (0: none; at most
        ``MAX_DELIVERIES_MAX``), whatever it was made with: from the leased removes
        ordered after it on, a returned element goes to ``NAME.dlq`` past it (leases
        already granted keep the limit they had).  It is ordered like a create, so the
        change is the same for every member.  Returns the settings now: ``{"structure":
        "queue" | "stack", "max_deliveries": N, "priorities": P}``; a name that holds no
        queue raises ``RequestRejected`` (it makes none)."""
        name, _, _ = _target(queue, None)
        assert name is not None
        limit = _checked_int("max_deliveries", max_deliveries, 0, MAX_DELIVERIES_MAX)
        ((structure, limit, levels),) = await self._request(ConfigureRequest(0, name, limit))
        return {"structure": structure, "max_deliveries": limit, "priorities": levels}

    async def peek(self, *, queue: str | None = None) -> bytes | None:
        """The element a dequeue would return now (the oldest of the most urgent level),
        left in the queue; None if it is empty or no queue has the name.  It is
        linearizable like a dequeue: no later dequeue returned an element it would not
        have seen.  A stack has no peek (``RequestRejected``)."""
        return (await self.peek_element(queue=queue)).value

    async def peek_element(self, *, queue: str | None = None) -> Removed:
        """:meth:`peek` with the element's rank and position (value None: empty)."""
        name, _, _ = _target(queue, None)
        ((value, rank, position),) = await self._request(PeekRequest(0, name))
        return Removed(value, rank, position)

    async def delete_queue(self, queue: str) -> int:
        """Delete the named queue (or stack): the elements it holds are removed, and the
        name is free for a new queue of either kind.  Returns how many it removed; a name
        that holds no queue raises ``RequestRejected``.  Leased elements are not in the
        queue: a lease that ends by a return puts its element in the queue of that name
        again.  With client tokens, it needs an admin token."""
        name, _, _ = _target(queue, None)
        assert name is not None
        ((removed, _rank),) = await self._request(DeleteRequest(0, name))
        return int(removed)

    async def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = await self._request(StatsRequest(0))
        return stats

    async def leave(self) -> None:
        """Make the daemon hand its data to the others and exit; returns once it has."""
        await self._request(LeaveRequest(0))

    async def join(self, seed: str) -> None:
        """Make a daemon that is alone (and empty) join the cluster ``seed`` is in;
        returns once it is in the ring."""
        await self._request(JoinClusterRequest(0, seed))

    async def remove_member(self, *members: str) -> dict[str, Any]:
        """Make the cluster forget members that will never come back (process ids or
        addresses; an admin connection).  Refused, with the reason, for a member that
        answers or that holds part of the ring; returns what was removed."""
        (result,) = await self._request(RemoveMemberRequest(0, tuple(members)))
        return dict(result)

    # -- leases -------------------------------------------------------------------------

    async def _lease(
        self,
        count: int,
        target: Target,
        seconds: float,
        wait: float | None,
        max_deliveries: int | None,
        fetch: bool = False,
        look: bool = False,
    ) -> list[Leased]:
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count must be a non-negative integer, not {count!r}")
        lease_ms, limit, wait_ms = (
            _lease_ms(seconds),
            _max_deliveries(max_deliveries),
            _wait_ms(wait),
        )
        out: list[Leased] = []
        while len(out) < count:
            n = min(self.remove_count_max, count - len(out))
            name, stack, prefer = target
            request = RemoveRequest(
                0, n, name, stack, wait_ms, lease_ms, limit, prefer, fetch=fetch, look=look
            )
            deadline = anyio.current_time() + lease_ms / 1000  # the daemon's is later
            results, connection = await self._request_on(request, (wait_ms or 0) / 1000)
            wait_ms = None
            got = [leased_from(r, deadline, connection) for r in results if r[0] is not None]
            out.extend(got)
            if len(got) < n:
                break
        return out

    async def _end_leases(
        self, how: str, leased: Sequence[Leased], lease_ms: int | None = None
    ) -> list[bool]:
        """Ack, nack, keep or extend leases, one answer each.  A lease of an earlier
        connection is over (its element went back when that one closed): False, unasked.
        If the connection breaks before the answer, the leases are over either way."""
        for x in leased:
            if not isinstance(x, Leased):
                raise TypeError(f"expected a Leased element, not {type(x).__name__}")
        live = [x for x in leased if x.connection == self._connection]
        answers: dict[int, bool] = {}
        for start in range(0, len(live), self.limits.ops_per_request_max):
            chunk = live[start : start + self.limits.ops_per_request_max]
            request = LeaseRequest(how, 0, [x.lease for x in chunk], lease_ms)
            try:
                results = await self._request(request)
            except NodeUnreachable:
                if self._broken is not None:
                    raise
                results = [False] * len(chunk)  # the connection closed: the leases ended
            answers.update(zip((id(x) for x in chunk), results, strict=True))
        return [bool(answers.get(id(x), False)) for x in leased]

    def _spawn(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``task`` in the background for as long as the connection lives."""
        if self._tasks is None:
            raise RuntimeError("a consumer runs on a client made by skueue.connect()")
        self._tasks.start_soon(task)

    # -- checks and splitting ---------------------------------------------------------

    def _checked_value(self, v: Any) -> bytes:
        if not isinstance(v, bytes | bytearray | memoryview):
            raise TypeError(f"elements must be bytes, not {type(v).__name__}")
        value = bytes(v)
        if len(value) > self.value_bytes_max:
            raise RequestRejected(
                f"a value of {len(value)} bytes exceeds the limit of {self.value_bytes_max} "
                f"bytes per element (the daemon's value_bytes_max)"
            )
        return value

    def _insert_chunks(self, values: list[bytes]) -> list[list[bytes]]:
        """Consecutive runs of ``values``, each within the per-request count and the frame
        size."""
        budget = self.limits.frame_bytes_max - FRAME_OVERHEAD_BYTES
        chunks: list[list[bytes]] = []
        chunk: list[bytes] = []
        size = 0
        for v in values:
            cost = len(v) + VALUE_OVERHEAD_BYTES
            if chunk and (len(chunk) >= self.limits.ops_per_request_max or size + cost > budget):
                chunks.append(chunk)
                chunk, size = [], 0
            chunk.append(v)
            size += cost
        if chunk:
            chunks.append(chunk)
        return chunks

    async def _remove(
        self,
        count: int,
        target: Target,
        *,
        stop_when_empty: bool,
        wait: float | None = None,
    ) -> list[Removed]:
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count must be a non-negative integer, not {count!r}")
        wait_ms = _wait_ms(wait)
        out: list[Removed] = []
        while len(out) < count:
            n = min(self.remove_count_max, count - len(out))
            name, stack, prefer = target
            request = RemoveRequest(0, n, name, stack, wait_ms=wait_ms, prefer_stack=prefer)
            results = await self._request(request, (wait_ms or 0) / 1000)
            wait_ms = None  # only the first request waits: then the call has its element
            batch = [Removed(r[0], r[1], r[2]) for r in results]
            out.extend(batch)
            if stop_when_empty and any(r.value is None for r in batch):
                break
        return out

    # -- plumbing ---------------------------------------------------------------------

    async def _request(self, request: ClientRequest, waits_s: float = 0.0) -> Any:
        """Send one request and wait for its results (the pieces concatenated), or the
        stats object; raise the error the daemon answered with, or RequestTimeout."""
        return (await self._request_on(request, waits_s))[0]

    async def _request_on(self, request: ClientRequest, waits_s: float = 0.0) -> tuple[Any, int]:
        """:meth:`_request`, and the connection its reply came on."""
        if self._broken is not None:
            raise self._broken
        rid = next(self._rids)
        self._last_rid = rid
        retryable = (
            InsertRequest | RemoveRequest | DeleteRequest | CreateRequest | ConfigureRequest
            | PeekRequest
        )  # fmt: skip
        retry = self._reopen is not None and isinstance(request, retryable)
        waiter = _Waiter(pack(attrs.evolve(request, rid=rid).frame()), retry)
        self._waiting[rid] = waiter
        try:
            with anyio.move_on_after(self.request_timeout_s + waits_s + REPLY_GRACE_S):
                await self._send(waiter)
                await waiter.done.wait()
        finally:
            self._waiting.pop(rid, None)
        if not waiter.done.is_set():
            lost = ""
            if self._stream is None:
                tried = self._reconnect_error and f"; reopening it failed: {self._reconnect_error}"
                lost = f" ({self._why_lost}{tried})"
            raise RequestTimeout(
                f"no reply from {self.name} within {self.request_timeout_s:g} s{lost}; "
                "the outcome is unknown"
            )
        if waiter.error is not None:
            raise waiter.error
        reply = waiter.reply
        if isinstance(reply, Done):
            return [*waiter.results, *reply.results], waiter.answered_on
        assert isinstance(reply, StatsReply)
        return reply.summary, waiter.answered_on

    async def _send(self, waiter: _Waiter) -> None:
        """Send a waiting request on the current connection, unless it went out there
        already; while disconnected, the reconnect sends it."""
        async with self._send_lock:
            stream, connection = self._stream, self._connection
            if stream is None or waiter.sent_on == connection:
                return
            sending = True
            try:
                await stream.send(waiter.blob)
                sending = False
                waiter.sent_on = connection
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as e:
                sending = False
                self._lose(connection, f"connection to {self.name} broke: {reason(e)}")
            finally:
                if sending:
                    # Cut off in the middle of a frame: this connection is out of step.
                    self._lose(connection, f"a send to {self.name} was cut off")

    def _lose(self, connection: int, why: str) -> None:
        """Connection number ``connection`` is unusable: end the client, or (with a
        session) let :meth:`_keep_connected` open another."""
        if connection != self._connection or self._stream is None:
            return  # that one is gone already
        self._why_lost, self._reconnect_error = why, ""
        if self._reopen is None:
            self._break(NodeUnreachable(why))
        else:
            for rid, waiter in list(self._waiting.items()):
                if not waiter.retry and not waiter.done.is_set():
                    waiter.error = NodeUnreachable(why)
                    waiter.done.set()
                    del self._waiting[rid]
        self._read_scope.cancel()

    def _break(self, error: SkueueError) -> None:
        if self._broken is None:
            self._broken = error
        for waiter in self._waiting.values():
            if not waiter.done.is_set():  # an answer that already arrived stands
                waiter.error = self._broken
                waiter.done.set()
        self._waiting.clear()

    async def _keep_connected(self, opened: Opened) -> None:
        """Read replies; when the connection breaks, open another (with a session) and
        send the waiting enqueues and dequeues again."""
        while True:
            stream = opened.stream
            await self._read_replies(opened)
            self._stream = None
            await anyio.aclose_forcefully(stream)
            if self._reopen is None or self._broken is not None:
                return
            reopened = await self._reconnect()
            if reopened is None:
                return
            opened = reopened

    async def _reconnect(self) -> Opened | None:
        """A new connection with every waiting retryable request sent on it (None: the
        address now answers as another daemon, and the client is broken)."""
        assert self._reopen is not None
        delay = RECONNECT_START_S
        while True:
            try:
                opened = await self._reopen()
            except SkueueError as e:
                self._reconnect_error = str(e)
                moved = await self._move_to_another_member()
                if moved is None:
                    await anyio.sleep(delay)
                    delay = min(RECONNECT_MAX_S, delay * 2)
                    continue
                opened = moved
            if opened.welcome.process_id != self.process_id:
                await anyio.aclose_forcefully(opened.stream)
                self._break(NodeUnreachable(
                    f"{self.address} is now {opened.welcome.process_id}, not {self.process_id}"
                ))
                return None
            async with self._send_lock:
                self._connection += 1
                try:
                    for _, waiter in sorted(self._waiting.items()):
                        waiter.results.clear()  # pieces of the first reply come again
                        await opened.stream.send(waiter.blob)
                        waiter.sent_on = self._connection
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    await anyio.aclose_forcefully(opened.stream)
                    continue
                self._stream = opened.stream
            return opened

    async def _move_to_another_member(self) -> Opened | None:
        """With a seed list, when this daemon cannot be reopened: go on with another
        member, but only while no request waits that went out to this one (its outcome
        is this daemon's to tell: sent elsewhere, an enqueue could be applied twice).
        Such requests time out first, as unknown; the next ones go to the new member."""
        if self._fail_over is None or any(w.sent_on for w in self._waiting.values()):
            return None
        moved = await self._fail_over(self.address)
        if moved is None:
            return None
        target, opened = moved
        self.address, self.process_id = target, opened.welcome.process_id
        self.structure = opened.welcome.structure
        return opened

    async def _read_replies(self, opened: Opened) -> None:
        """Deliver the replies of one connection until it ends (or another task found it
        broken)."""
        connection = self._connection
        why = f"{self.name} closed the connection"
        with anyio.CancelScope() as self._read_scope:  # _lose cancels it
            try:
                for frame in opened.leftover:
                    self._deliver(frame)
                while True:
                    data = await opened.stream.receive()
                    for frame in opened.decoder.feed(data):
                        self._deliver(frame)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            except OSError as e:
                why = f"connection to {self.name} broke: {reason(e)}"
            except RemoteProtocolError as e:
                why = f"bad reply from {self.name}: {e}"
        self._lose(connection, why)

    def _deliver(self, frame: Any) -> None:
        reply = parse_reply(frame)
        if isinstance(reply, ErrorReply) and reply.rid is None:
            self._break(error_from(reply, self.name))
            return
        if isinstance(reply, Welcome):
            raise RemoteProtocolError(f"unexpected reply {frame!r:.60}")
        rid = reply.rid
        if rid is None or not 0 < rid <= self._last_rid:
            raise RemoteProtocolError(f"reply for unknown request {rid!r:.20}")
        waiter = self._waiting.get(rid)
        if waiter is None:
            return  # a request we stopped waiting for (timed out or cancelled)
        if isinstance(reply, More):
            waiter.results.extend(reply.results)
            return
        del self._waiting[rid]  # answered: a break that follows does not change that
        waiter.answered_on = self._connection
        if isinstance(reply, ErrorReply):
            waiter.error = error_from(reply, self.name)
        else:
            waiter.reply = reply
        waiter.done.set()


def resolve_address(address: str | None) -> str:
    """The address to use: ``address``, else ``$SKUEUE_NODE``, else the default."""
    return address or os.environ.get("SKUEUE_NODE") or DEFAULT_NODE


def seed_list(addresses: str) -> list[str]:
    """``"HOST:PORT,HOST:PORT,..."``: the members a client may use, in order; a bad one
    is :class:`BadAddress` before anything is dialled."""
    try:
        return [str(a) for a in parse_seed_list(addresses)]
    except AddressError as e:
        raise BadAddress(str(e)) from None


async def open_first(
    seeds: list[str], hello: ClientHello, timeout_s: float, tls: ssl.SSLContext | None = None
) -> tuple[str, Opened]:
    """The first seed that answers, in order; if none does, the error of each, in one line."""
    errors = []
    for seed in seeds:
        try:
            return seed, await open_connection(seed, hello, timeout_s, tls)
        except BadAddress:
            raise
        except SkueueError as e:
            if len(seeds) == 1:
                raise
            errors.append(str(e))
    raise NodeUnreachable("no member of the seed list answered: " + "; ".join(errors))


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
    retry = retry and not admin  # stats, join and leave are not sent again

    def new_hello() -> ClientHello:
        session = secrets.token_hex(16) if retry else None  # a session is one daemon's
        return ClientHello(PROTOCOL_VERSION, request_timeout_s, admin, session, token)

    hello = new_hello()
    target, opened = await open_first(seeds, hello, timeout_s, context)

    async def reopen() -> Opened:
        return await open_connection(client.address, hello, timeout_s, context)

    async def fail_over(current: str) -> tuple[str, Opened] | None:
        nonlocal hello
        others = [*seeds[seeds.index(current) + 1 :], *seeds[: seeds.index(current)]]
        fresh = new_hello()
        for other in others:
            try:
                opened = await open_connection(other, fresh, timeout_s, context)
            except SkueueError:
                continue
            hello = fresh
            return other, opened
        return None

    limits, in_pieces = limits_from_welcome(opened.welcome)
    client = Client(
        opened.stream,
        opened.welcome.process_id,
        opened.welcome.structure,
        address=target,
        request_timeout_s=request_timeout_s,
        limits=limits,
        replies_in_pieces=in_pieces,
        reopen=reopen if retry else None,
        fail_over=fail_over if retry and len(seeds) > 1 else None,
    )
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client._keep_connected, opened)
            client._tasks = tg
            try:
                yield client
            finally:
                tg.cancel_scope.cancel()
                # Requests still waiting (other tasks, or a blocking call that was
                # interrupted) end now, not at their timeout.
                client._break(NodeUnreachable(f"the connection to {client.name} was closed"))
    finally:
        if client._stream is not None:
            await anyio.aclose_forcefully(client._stream)


def _wait_ms(wait: float | None) -> int | None:
    """A blocking remove's wait for the wire, in milliseconds (at least 1)."""
    if wait is None:
        return None
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not wait > 0:
        raise ValueError(f"wait must be a positive number of seconds, not {wait!r}")
    if wait * 1000 > WAIT_MS_MAX:
        raise RequestRejected(f"wait={wait} s is over the limit of {WAIT_MS_MAX // 1000} s")
    return max(1, round(wait * 1000))


def _lease_ms(seconds: float) -> int:
    """A lease's length for the wire, in milliseconds (at least 1)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"lease must be a positive number of seconds, not {seconds!r}")
    if seconds * 1000 > LEASE_MS_MAX:
        raise RequestRejected(f"lease={seconds} s is over the limit of {LEASE_MS_MAX // 1000} s")
    return max(1, round(seconds * 1000))


def _max_deliveries(limit: int | None) -> int | None:
    if limit is None:
        return None
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int)
        or not 1 <= limit <= MAX_DELIVERIES_MAX
    ):
        raise ValueError(f"max_deliveries must be an integer from 1 to {MAX_DELIVERIES_MAX}")
    return limit


def _checked_int(name: str, value: object, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}")
    return value


Target = tuple[str | None, bool | None, bool | None]
"""The wire's queue, stack and prefer_stack (client_protocol.py)."""


def _target(queue: str | None, structure: str | None, stack_if_new: bool = False) -> Target:
    """The wire's (queue, stack, prefer_stack) for the API's arguments; a bad one raises
    at once.  Without ``structure`` the daemon takes the queue's own, and a new name is a
    stack if ``stack_if_new`` (push and pop), else of the daemon's structure."""
    if queue is not None:
        problem = queue_name_problem(queue)
        if problem is not None:
            raise RequestRejected(problem)
    if structure not in (None, "queue", "stack"):
        raise ValueError(f'structure must be "queue", "stack" or None, not {structure!r}')
    stack = None if structure is None else structure == "stack"
    return queue, stack, True if stack_if_new and stack is None else None
