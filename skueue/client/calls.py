"""How the API's calls become requests: values checked and split to fit the daemon's
limits, removes repeated until they have their count, leased removes and the requests
that end leases, and the typed results checked to be the ones the request asked for.

:class:`Calls` is :class:`skueue.client.api.Client`'s: the public API checks its
arguments and hands them here; the requests go out through :func:`multiplex.call`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import anyio

from skueue.client import arguments as check
from skueue.client.arguments import (
    FRAME_OVERHEAD_BYTES,
    RESULT_OVERHEAD_BYTES,
    VALUE_OVERHEAD_BYTES,
)
from skueue.client.coalesce import JoinLimits
from skueue.client.consumer import Leased, leased_from
from skueue.client.errors import NodeUnreachable, SkueueError
from skueue.client.lifecycle import Link
from skueue.client.multiplex import call
from skueue.core.ops import PRIORITIES_MAX
from skueue.host.requests import (
    ClientRequest,
    InsertRequest,
    LeaseRequest,
    RemoveRequest,
    StatsRequest,
)
from skueue.host.results import Inserted, LeaseAnswer, Removed, Result
from skueue.runtime.limits import Limits

R = TypeVar("R", bound=Result)


class Calls:
    """One client's calls, as requests on its link."""

    def __init__(self, link: Link, limits: Limits, replies_in_pieces: bool) -> None:
        self.link = link
        self.limits = limits
        # The largest value a request may carry: the daemon's limit, and never more than
        # fits a frame on its own.
        self.value_bytes_max = min(
            limits.value_bytes_max,
            limits.frame_bytes_max - FRAME_OVERHEAD_BYTES - VALUE_OVERHEAD_BYTES,
        )
        # A daemon that splits its replies takes any count up to its per-request limit;
        # one that does not must fit every removed value into one reply frame.
        per_reply = limits.frame_bytes_max // (limits.value_bytes_max + RESULT_OVERHEAD_BYTES)
        self.remove_count_max = (
            limits.ops_per_request_max
            if replies_in_pieces
            else max(1, min(limits.ops_per_request_max, per_reply))
        )
        # Calls waiting together on the link are joined within the same limits.
        link.requests.limits = JoinLimits(
            limits.ops_per_request_max, limits.frame_bytes_max, self.remove_count_max
        )

    async def dequeue_many(
        self,
        count: int,
        target: check.Target,
        wait: float | None,
        lease: float | None,
        max_deliveries: int | None,
    ) -> list[bytes] | list[Leased]:
        if lease is not None:
            return await self.lease(count, target, lease, wait, max_deliveries)
        if max_deliveries is not None:
            raise ValueError("max_deliveries needs a lease")
        return [
            r.value
            for r in await self.remove(count, target, stop_when_empty=True, wait=wait)
            if r.value is not None
        ]

    async def insert(
        self, values: Sequence[bytes], target: check.Target, priority: int | None
    ) -> list[Inserted]:
        name, stack, prefer = target
        if priority is not None:
            check.checked_int("priority", priority, 0, PRIORITIES_MAX - 1)
        checked = [check.checked_value(v, self.value_bytes_max) for v in values]
        if len(checked) == 1:  # an enqueue: one value always fits one request
            return await self.results(
                InsertRequest(0, tuple(checked), name, stack, priority, prefer), Inserted
            )
        limits = self.limits
        out: list[Inserted] = []
        chunks = check.insert_chunks(checked, limits.ops_per_request_max, limits.frame_bytes_max)
        for chunk in chunks:
            request = InsertRequest(0, tuple(chunk), name, stack, priority, prefer)
            out.extend(await self.results(request, Inserted))
        return out

    async def lease(
        self,
        count: int,
        target: check.Target,
        seconds: float,
        wait: float | None,
        max_deliveries: int | None,
        fetch: bool = False,
        look: bool = False,
    ) -> list[Leased]:
        check.checked_count(count)
        lease_ms, limit, wait_ms = (
            check.lease_ms(seconds),
            check.max_deliveries(max_deliveries),
            check.wait_ms(wait),
        )
        out: list[Leased] = []
        while len(out) < count:
            n = min(self.remove_count_max, count - len(out))
            name, stack, prefer = target
            request = RemoveRequest(
                0, n, name, stack, wait_ms, lease_ms, limit, prefer, fetch=fetch, look=look
            )
            deadline = anyio.current_time() + lease_ms / 1000  # the daemon's is later
            results, connection = await self.results_on(request, Removed, (wait_ms or 0) / 1000)
            wait_ms = None
            got = [leased_from(r, deadline, connection) for r in results if r.value is not None]
            out.extend(got)
            if len(got) < n:
                break
        return out

    async def end_leases(
        self, how: str, leased: Sequence[Leased], lease_ms: int | None = None
    ) -> list[bool]:
        """Ack, nack, keep or extend leases, one answer each.  A lease of an earlier
        connection is over (its element went back when that one closed): False, unasked.
        If the connection breaks before the answer, the leases are over either way."""
        for x in leased:
            if not isinstance(x, Leased):
                raise TypeError(f"expected a Leased element, not {type(x).__name__}")
        live = [x for x in leased if x.connection == self.link.connection]
        answers: dict[int, bool] = {}
        for start in range(0, len(live), self.limits.ops_per_request_max):
            chunk = live[start : start + self.limits.ops_per_request_max]
            request = LeaseRequest(0, how, tuple(x.lease for x in chunk), lease_ms)  # type: ignore[arg-type]
            try:
                results = [r.live for r in await self.results(request, LeaseAnswer)]
            except NodeUnreachable:
                if self.link.broken is not None:
                    raise
                results = [False] * len(chunk)  # the connection closed: the leases ended
            answers.update(zip((id(x) for x in chunk), results, strict=True))
        return [bool(answers.get(id(x), False)) for x in leased]

    async def remove(
        self,
        count: int,
        target: check.Target,
        *,
        stop_when_empty: bool,
        wait: float | None = None,
    ) -> list[Removed]:
        check.checked_count(count)
        wait_ms = check.wait_ms(wait)
        out: list[Removed] = []
        while len(out) < count:
            n = min(self.remove_count_max, count - len(out))
            name, stack, prefer = target
            request = RemoveRequest(0, n, name, stack, wait_ms=wait_ms, prefer_stack=prefer)
            batch = await self.results(request, Removed, (wait_ms or 0) / 1000)
            wait_ms = None  # only the first request waits: then the call has its element
            out.extend(batch)
            if stop_when_empty and any(r.value is None for r in batch):
                break
        return out

    async def stats(self) -> dict[str, Any]:
        summary, _ = await call(self.link, StatsRequest(0))
        if not isinstance(summary, dict):
            raise _bad_reply(self.link.name, StatsRequest.KIND, summary)
        return summary

    async def results(
        self, request: ClientRequest, kind: type[R] | None, waits_s: float = 0.0
    ) -> list[R]:
        """Send one request and wait for its results, each a ``kind`` (None: none come);
        raise the error the daemon answered with, or RequestTimeout."""
        return (await self.results_on(request, kind, waits_s))[0]

    async def results_on(
        self, request: ClientRequest, kind: type[R] | None, waits_s: float = 0.0
    ) -> tuple[list[R], int]:
        """:meth:`results`, and the connection its reply came on (a lease's)."""
        results, connection = await call(self.link, request, waits_s)
        if isinstance(results, dict) or not all(type(r) is kind for r in results):
            raise _bad_reply(self.link.name, request.KIND, results)
        return list(results), connection  # type: ignore[arg-type]


def _bad_reply(name: str, kind: str, got: object) -> SkueueError:
    return NodeUnreachable(f"bad reply from {name} to a {kind}: {got!r:.80}")
