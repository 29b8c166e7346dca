"""PEI, the popped element index: how far from the head a dequeue took its element.

Theory of operation
-------------------
Seed 000 (the relaxed distributed priority queue) measures a priority queue's error by
the PEI of every pop: the global index, in priority order, of the element it returned
among all elements present at that moment.  A perfect priority queue always pops index 0.
Here the priority order is the one Skueue promises: the most urgent level first
(``Record.priority``, 0 the most urgent), and within a level the order of insertion
(FIFO).  A queue without levels is one level, and its PEI is the FIFO error.

"At that moment" needs a point in time for each operation.  Two measures:

- :func:`pei_by_order` takes it from the system's own serialization (``Record.ord``,
  the anchor's order): replay the records in ``ord`` order, keep the present elements in
  a Fenwick tree indexed by their priority-order rank, and a dequeue's PEI is the number
  of present elements ranked before its own.  Exact, but only for a history that carries
  an ``ord`` on every record; for Skueue it is 0 by construction.
- :func:`pei_observed` needs nothing but the real-time intervals, so it measures any
  system the same way (RabbitMQ's priority queues have no ``ord``).  It counts only the
  elements that were present, and ranked before the returned one, in *every*
  linearization: inserted (the insert responded) before the dequeue was invoked, not
  removed (their removal invoked) before the dequeue responded, and either at a more
  urgent level or at the same level with an insert that responded before the returned
  element's insert was invoked.  It is a lower bound of the PEI in any linearization, so
  a linearizable priority queue scores 0 and every count above 0 is a proven inversion.

Both measure the dequeues that returned an element (an empty dequeue has no index), per
named queue, and ignore stacks' pops, whose order is not a priority order.  Elements
that no record inserted are left out: the checkers report those.

Pure: stdlib and attrs only.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

import attrs

from skueue.check.history import Record


class _Fenwick:
    """Counts over ranks 0..n-1 with O(log n) update and prefix sum."""

    def __init__(self, n: int) -> None:
        self._tree = [0] * (n + 1)

    def add(self, rank: int, delta: int) -> None:
        i = rank + 1
        while i < len(self._tree):
            self._tree[i] += delta
            i += i & -i

    def before(self, rank: int) -> int:
        """How many counted ranks are below ``rank``."""
        total, i = 0, rank
        while i > 0:
            total += self._tree[i]
            i -= i & -i
        return total


def _by_queue(records: Iterable[Record]) -> list[list[Record]]:
    queues: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.op in ("enqueue", "dequeue"):
            queues[r.queue or ""].append(r)
    return [queues[name] for name in sorted(queues)]


def pei_by_order(records: Sequence[Record]) -> list[int]:
    """The PEI of every dequeue that returned an element, at its ``ord`` (see the module
    doc), in ``ord`` order per queue.  Raises ValueError if a record has no ``ord``."""
    out: list[int] = []
    for ops in _by_queue(records):
        if any(r.ord is None for r in ops):
            raise ValueError("pei_by_order needs an ord on every record; use pei_observed")
        ops.sort(key=lambda r: r.ord)  # type: ignore[arg-type, return-value]
        inserts = sorted(
            (r for r in ops if r.op == "enqueue"), key=lambda r: (r.priority or 0, r.ord)
        )
        rank = {r.value: i for i, r in enumerate(inserts)}
        present = _Fenwick(len(inserts))
        for r in ops:
            at = rank.get(r.value)
            if at is None:
                continue
            if r.op == "enqueue":
                present.add(at, 1)
            else:
                out.append(present.before(at))
                present.add(at, -1)
    return out


def pei_observed(records: Sequence[Record]) -> list[int]:
    """The PEI every linearization must give each dequeue that returned an element (a
    lower bound; see the module doc), in invocation order per queue."""
    out: list[int] = []
    for ops in _by_queue(records):
        out.extend(_observed_one_queue(ops))
    return out


def _observed_one_queue(ops: list[Record]) -> list[int]:
    inserted = {r.value: r for r in ops if r.op == "enqueue"}
    removal: dict[str | None, Record] = {}
    for r in sorted(
        (r for r in ops if r.op == "dequeue" and r.value in inserted), key=lambda r: r.invoke
    ):
        removal.setdefault(r.value, r)  # a second removal is a duplicate: checkers' job
    level = {v: r.priority or 0 for v, r in inserted.items()}
    levels = sorted(set(level.values()))
    # Per level, the inserts in response order; an element's rank is its place there.
    responses: dict[int, list[float]] = {lv: [] for lv in levels}
    for r in sorted(inserted.values(), key=lambda r: r.response):
        responses[level[r.value]].append(r.response)
    rank = {v: bisect.bisect_left(responses[level[v]], r.response) for v, r in inserted.items()}
    trees = {lv: _Fenwick(len(responses[lv])) for lv in levels}
    count = dict.fromkeys(levels, 0)
    added: set[str | None] = set()
    gone: set[str | None] = set()

    def take(v: str | None, delta: int) -> None:
        trees[level[v]].add(rank[v], delta)
        count[level[v]] += delta

    def ahead(x: str | None, e: str | None) -> bool:
        """x surely comes before e in priority order (by level, then by insertion)."""
        if level[x] != level[e]:
            return level[x] < level[e]
        return inserted[x].response < inserted[e].invoke

    by_response = sorted(inserted.values(), key=lambda r: r.response)
    by_removal = sorted(removal.values(), key=lambda r: r.invoke)
    removal_invokes = [r.invoke for r in by_removal]
    next_in = next_out = 0
    out: list[int] = []
    for d in by_removal:
        while next_in < len(by_response) and by_response[next_in].response < d.invoke:
            v = by_response[next_in].value
            next_in += 1
            if v not in gone:
                added.add(v)
                take(v, 1)
        while next_out < len(by_removal) and by_removal[next_out].invoke < d.invoke:
            v = by_removal[next_out].value
            next_out += 1
            gone.add(v)
            if v in added:
                added.discard(v)
                take(v, -1)
        e = d.value
        mine = level[e]
        pei = sum(count[lv] for lv in levels if lv < mine)
        pei += trees[mine].before(bisect.bisect_left(responses[mine], inserted[e].invoke))
        # Elements whose removal was invoked while d ran may have left before it: not sure.
        window = bisect.bisect_right(removal_invokes, d.response)
        for other in by_removal[next_out:window]:
            x = other.value
            if x != e and x in added and ahead(x, e):
                pei -= 1
        out.append(pei)
    return out


@attrs.frozen
class PeiSummary:
    """Seed 000's aggregate statistics of a PEI distribution."""

    count: int
    median: float
    mean: float
    p90: float
    p99: float
    max: int

    @staticmethod
    def of(values: Sequence[int]) -> PeiSummary:
        if not values:
            return PeiSummary(0, math.nan, math.nan, math.nan, math.nan, 0)
        ordered = sorted(values)

        def at(q: float) -> float:
            """Nearest-rank percentile."""
            return float(ordered[max(0, math.ceil(q * len(ordered)) - 1)])

        return PeiSummary(
            count=len(ordered),
            median=at(0.5),
            mean=sum(ordered) / len(ordered),
            p90=at(0.9),
            p99=at(0.99),
            max=ordered[-1],
        )
