"""Which of the calls waiting on one connection go out together in one request frame.

When the connection's writer runs, every call made since its last write is waiting.
Calls that the daemon would serve exactly alike as parts of one request are joined:

- inserts (enqueue, push, and the requests of insert_many) on the same queue, with the
  same structure, priority and preference, become one insert of all their values, in
  the calls' order;
- plain removes (no wait, no lease, no fetch or look) on the same queue and structure
  become one remove of the sum of their counts.

Why this changes no call's meaning: the daemon serves an insert of n values or a remove
of n as n operations of its batch (``skueue.host.clients.Clients._submit``: one core
operation per value or removal, each completed on its own, the reply sent when all
are), exactly what n requests of one would be.  The joined calls were all waiting at
once, so they are concurrent and any order among them is a legal one; each operation
is still linearized inside its own call's interval (the request goes out after every
call began and its reply comes before any of them returns).  Each call gets its own
slice of the results (its positions, or its elements and empties).

What is never joined: blocking removes (their wait belongs to one caller), leased ones
(a lease, a fetch and a look are a consumer's), peeks, lease ends, creates and every
other kind; and nothing that would make a request over the daemon's limits (a
``too-large`` answer would reach callers whose own request was fine).  Nothing waits
for more calls to come: only what is already waiting is joined, so a lone call goes out
as it would alone.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

from skueue.client.arguments import FRAME_OVERHEAD_BYTES, VALUE_OVERHEAD_BYTES
from skueue.host.requests import ClientRequest, InsertRequest, RemoveRequest


@dataclass(frozen=True, slots=True)
class JoinLimits:
    """How far joined calls may grow: the daemon's limits as the client keeps them."""

    ops_per_request_max: int = 1  # values of one insert (1: nothing is joined)
    frame_bytes_max: int = 1 << 20  # one request frame, in bytes
    remove_count_max: int = 1  # removals of one remove (1: nothing is joined)


@dataclass(slots=True)
class Joined:
    """One request to send for ``members`` (indexes into the calls given), each owning
    ``counts[i]`` consecutive results of its reply."""

    request: ClientRequest
    members: list[int]
    counts: list[int]
    size: int = 0  # an insert's values' bytes with their headers, so far


def join_key(request: ClientRequest) -> Hashable | None:
    """What two joinable requests have in common (None: this one goes alone)."""
    if type(request) is InsertRequest:
        return (True, request.queue, request.stack, request.priority, request.prefer_stack)
    if (
        type(request) is RemoveRequest
        and request.wait_ms is None
        and request.lease_ms is None
        and request.max_deliveries is None
        and not request.fetch
        and not request.look
    ):
        return (False, request.queue, request.stack, request.prefer_stack)
    return None


def _count(request: ClientRequest) -> int:
    if type(request) is InsertRequest:
        return len(request.values)
    if type(request) is RemoveRequest:
        return request.count
    return 1


def _insert_bytes(request: InsertRequest) -> int:
    return sum(len(v) + VALUE_OVERHEAD_BYTES for v in request.values)


def _fits(group: Joined, request: ClientRequest, limits: JoinLimits) -> bool:
    total = sum(group.counts) + _count(request)
    if type(request) is InsertRequest:
        budget = limits.frame_bytes_max - FRAME_OVERHEAD_BYTES
        return total <= limits.ops_per_request_max and group.size + _insert_bytes(request) <= budget
    return total <= limits.remove_count_max


def join(requests: Sequence[ClientRequest], limits: JoinLimits) -> list[Joined]:
    """The requests to send for ``requests`` (the waiting calls', oldest first), in the
    order of each one's first member; a request that goes alone is passed as it is."""
    out: list[Joined] = []
    open_groups: dict[Hashable, Joined] = {}  # the latest group of each key, still growing
    for index, request in enumerate(requests):
        key = join_key(request)
        group = open_groups.get(key) if key is not None else None
        if group is not None and _fits(group, request, limits):
            group.members.append(index)
            group.counts.append(_count(request))
            if type(request) is InsertRequest:
                group.size += _insert_bytes(request)
            continue
        size = _insert_bytes(request) if type(request) is InsertRequest else 0
        group = Joined(request, [index], [_count(request)], size)
        out.append(group)
        if key is not None:
            open_groups[key] = group
    for group in out:
        if len(group.members) > 1:
            group.request = _merged(group, requests)
    return out


def _merged(group: Joined, requests: Sequence[ClientRequest]) -> ClientRequest:
    first = group.request
    if type(first) is InsertRequest:
        values = tuple(v for i in group.members for v in requests[i].values)  # type: ignore[union-attr]
        return replace(first, values=values)
    assert type(first) is RemoveRequest
    return replace(first, count=sum(group.counts))
