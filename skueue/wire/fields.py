"""Field codecs shared by the wire modules: checked ints, nodes, batches, grants, routes.

Every decoder checks type and range and raises :class:`RemoteProtocolError`, never
anything else, so that a malformed frame is one clear warning in the daemon's log.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from skueue.core.batch import Batch, Batches, RunGrant
from skueue.core.errors import RemoteProtocolError
from skueue.core.ops import (
    DELIVERY_LIMIT_MAX,
    PRIORITIES_MAX,
    RETURN_REASONS,
    Element,
    Item,
    Redelivered,
    queue_name_problem,
)
from skueue.overlay.labels import LABEL_SPACE, Kind, NodeRef, node_ref
from skueue.overlay.routing import Phase, Route

PROCESS_ID_CHARS_MAX = 256
RUNS_MAX = 1 << 16  # a batch longer than this is not one a correct peer sends
INT_MAX = 1 << 63


def _int(x: Any, what: str, low: int = 0, high: int = INT_MAX) -> int:
    if type(x) is not int or not low <= x < high:
        raise RemoteProtocolError(f"{what}: expected an integer in [{low}, {high}), got {x!r:.60}")
    return x


def _bool(x: Any, what: str) -> bool:
    if type(x) is not bool:
        raise RemoteProtocolError(f"{what}: expected a boolean, got {x!r:.60}")
    return x


def _list(x: Any, what: str, length: int | None = None) -> list[Any]:
    if type(x) is not list or (length is not None and len(x) != length):
        want = "a list" if length is None else f"a list of {length}"
        raise RemoteProtocolError(f"{what}: expected {want}, got {x!r:.60}")
    return x


def process_id(x: Any, what: str = "process id") -> str:
    if type(x) is not str or not 0 < len(x) <= PROCESS_ID_CHARS_MAX:
        raise RemoteProtocolError(f"{what}: expected a non-empty string, got {x!r:.60}")
    return x


def element(x: Any, what: str = "element") -> Element:
    if type(x) not in (bytes, str):
        raise RemoteProtocolError(f"{what}: expected bytes, got {type(x).__name__}")
    return x


DELIVERIES_MAX = 1 << 31


def encode_item(x: Item) -> Any:
    """A queue's element: as it is, or ``[element, deliveries, reason]`` when it came
    back from a lease (:class:`~skueue.core.ops.Redelivered`)."""
    if type(x) is Redelivered:
        return [x.value, x.deliveries, x.reason]
    return x


def item(x: Any, what: str = "element") -> Item:
    if type(x) in (bytes, str):
        return x
    if not isinstance(x, list) or len(x) != 3:
        raise RemoteProtocolError(f"{what}: expected bytes or [bytes, deliveries, reason]")
    deliveries = _int(x[1], f"{what}'s deliveries", 1, DELIVERIES_MAX)
    if type(x[2]) is not str or x[2] not in RETURN_REASONS:
        raise RemoteProtocolError(f"{what}: unknown return reason {x[2]!r:.40}")
    return Redelivered(element(x[0], what), deliveries, x[2])


@lru_cache(maxsize=65536)
def _node(process: str, kind: int) -> NodeRef:
    return node_ref(process, Kind(kind))


def encode_node(n: NodeRef) -> list[Any]:
    return [n.process, int(n.kind)]


def decode_node(x: Any, what: str = "node") -> NodeRef:
    p, k = _list(x, what, 2)
    return _node(process_id(p, what), _int(k, f"{what} kind", 0, 3))


def queue_name(x: Any, what: str = "queue name") -> str:
    problem = queue_name_problem(x)
    if problem is not None:
        raise RemoteProtocolError(f"{what}: {problem}")
    return x  # checked above: a str


def _runs(counts: Any, slots: Any) -> Batch:
    counts = [_int(c, "batch run") for c in _list(counts, "batch counts")]
    slots = [_int(s, "batch slots") for s in _list(slots, "batch slots")]
    if len(counts) != len(slots) or len(counts) > RUNS_MAX:
        raise RemoteProtocolError("batch: counts and slots differ in length or are too long")
    if any(c > s for c, s in zip(counts, slots, strict=True)):
        raise RemoteProtocolError("batch: a run has more operations than ranks")
    return Batch(tuple(counts), tuple(slots))


def encode_batch(b: Batches) -> list[Any]:
    sections = [[name, stack, list(r.counts), list(r.slots)] for (name, stack), r in b.sections]
    for section, (_, r) in zip(sections, b.sections, strict=True):
        if r.levels:  # a queue with priority levels: each run's count per level
            section.append([list(v) for v in r.levels])
    deletes = [[name, count] for name, count in b.deletes]
    creates = [[*key, count] for key, count in b.creates]
    out = [sections, b.joins, b.leaves, b.nodes, b.patient, deletes, creates]
    if b.peeks:  # most cycles have none: the field is left out then
        out.append([[name, count] for name, count in b.peeks])
    return out


def decode_batch(x: Any) -> Batches:
    fields = _list(x, "batches")
    if len(fields) not in (7, 8):
        raise RemoteProtocolError(f"batches: 7 or 8 fields, not {len(fields)}")
    sections, joins, leaves, nodes, patient, deletes, creates = fields[:7]
    decoded = []
    for section in _list(sections, "batches"):
        levels: tuple[tuple[int, ...], ...] = ()
        if type(section) is list and len(section) == 5:
            levels = _levels(section[4])
            section = section[:4]
        name, stack, counts, slots = _list(section, "batch", 4)
        key = (queue_name(name, "batch queue"), _bool(stack, "batch stack"))
        runs = _runs(counts, slots)
        decoded.append((key, Batch(runs.counts, runs.slots, levels) if levels else runs))
    deleted = []
    for pair in _list(deletes, "batch deletes"):
        name, count = _list(pair, "batch delete", 2)
        deleted.append((queue_name(name, "deleted queue"), _int(count, "deletes")))
    created = []
    for four in _list(creates, "batch creates"):
        name, stack, limit, levels, count = _list(four, "batch create", 5)
        made = (queue_name(name, "created queue"), _bool(stack, "create stack"),
                _int(limit, "delivery limit", 0, DELIVERY_LIMIT_MAX + 1),
                _int(levels, "priority levels", 0, PRIORITIES_MAX + 1))  # fmt: skip
        created.append((made, _int(count, "creates")))
    peeked = []
    for pair in _list(fields[7], "batch peeks") if len(fields) == 8 else ():
        name, count = _list(pair, "batch peek", 2)
        peeked.append((queue_name(name, "queue peeked at"), _int(count, "peeks")))
    return Batches(tuple(decoded), _int(joins, "joins"), _int(leaves, "leaves"),
                   _int(nodes, "nodes"), _int(patient, "patient"), tuple(deleted),
                   tuple(created), tuple(peeked))  # fmt: skip


def _levels(x: Any) -> tuple[tuple[int, ...], ...]:
    """A batch's count per level of each run (checked further by the core)."""
    runs = _list(x, "batch levels")
    if not runs or len(runs) > RUNS_MAX:
        raise RemoteProtocolError("batch levels: one count vector per run")
    out = []
    for run in runs:
        counts = _list(run, "batch level counts")
        if len(counts) > PRIORITIES_MAX:
            raise RemoteProtocolError("batch levels: at most 16 levels")
        out.append(tuple(_int(c, "level count") for c in counts))
    return tuple(out)


def encode_grant(g: RunGrant) -> list[Any]:
    fields: list[Any] = [g.first, g.available, g.ord_first, g.ticket, g.step, g.ticket_step]
    if g.levels:  # a queue with priority levels: [[first, count], ...]
        fields.append([list(pair) for pair in g.levels])
    return fields


def decode_grant(x: Any) -> RunGrant:
    levels: tuple[tuple[int, int], ...] = ()
    if type(x) is list and len(x) == 7:
        pairs = _list(x[6], "grant levels")
        if not 0 < len(pairs) <= PRIORITIES_MAX:
            raise RemoteProtocolError("grant: 1 to 16 levels")
        levels = tuple(_pair(p) for p in pairs)
        x = x[:6]
    first, available, ord_first, ticket, step, ticket_step = _list(x, "grant", 6)
    # type() first: True == 1 and 1.0 == 1, and neither is a step.
    if type(step) is not int or step not in (1, -1):
        raise RemoteProtocolError("grant: step must be 1 or -1, ticket step 0 or 1")
    if type(ticket_step) is not int or ticket_step not in (0, 1):
        raise RemoteProtocolError("grant: step must be 1 or -1, ticket step 0 or 1")
    return RunGrant(
        _int(first, "grant first"),
        _int(available, "grant available"),
        _int(ord_first, "grant ord"),
        _int(ticket, "grant ticket"),
        step,
        ticket_step,
        levels,
    )


def _pair(x: Any) -> tuple[int, int]:
    first, count = _list(x, "grant level", 2)
    return _int(first, "level position"), _int(count, "level count")


def encode_route(r: Route) -> list[int]:
    return [r.target, r.bits, r.taken, r.point, int(r.phase), r.heading, r.hops]


def decode_route(x: Any) -> Route:
    target, bits, taken, point, phase, heading, hops = _list(x, "route", 7)
    try:
        return Route(
            target=_int(target, "route target", 0, LABEL_SPACE),
            bits=_int(bits, "route bits", 0, 65),
            taken=_int(taken, "route taken", 0, 65),
            point=_int(point, "route point", 0, LABEL_SPACE),
            phase=Phase(_int(phase, "route phase", 0, len(Phase))),
            heading=_int(heading, "route heading", -1, 2),
            hops=_int(hops, "route hops"),
        )
    except ValueError as e:
        raise RemoteProtocolError(f"route: {e}") from None
