"""Cheap, sound violation patterns for queue and stack histories.

Theory of operation
-------------------
Searching for a serialization is exponential and certifying one needs the
anchor's ``ord``.  This module does neither: it looks for a few shapes that
no serialization can explain.  Every rule is *sound* (it only fires when
every candidate order breaks the queue/stack rules) and deliberately
*incomplete* (a clean result proves nothing).

The rules rest on one relation.  ``a => b`` ("a is forced before b") holds
when every admissible order must put ``a`` first: same process and lower
``seq`` (program order, both models), or ``a.response < b.invoke`` (real
time, linearizability only).  With unique elements, ``ins(v)`` and
``rem(v)`` name the insert and the removal of ``v``.

- fresh / duplicate: a removed value never inserted; a value inserted or
  removed twice.
- causality: ``rem(v) => ins(v)``.
- lost (only when the caller says the run drained): an inserted value that
  nobody removed.
- false empty: an empty removal ``d`` with some ``ins(x) => d`` where
  ``x`` is never removed or ``d => rem(x)``; at ``d`` the structure must be
  empty, so ``x`` must already be out.
- FIFO (queue): ``ins(x) => ins(y)`` and ``y`` dequeued, but ``x`` never
  dequeued or ``deq(y) => deq(x)``.  This is the false-empty condition with
  ``deq(y)`` in place of ``d``: at ``deq(y)`` everything queued ahead of
  ``y`` is gone, so both share one aggregate (:class:`_Earlier`).
- LIFO (stack): ``push(x) => push(y) => pop(x)`` but ``y`` never popped or
  ``pop(x) => pop(y)``; ``x`` is on top at ``pop(x)``, so ``y`` was popped
  before.  Checked when both links are program order of one process, and
  (linearizability) when both links are real time; mixed chains are left to
  the exact checker.

- priorities (a queue with priority levels, issue 14): FIFO and false empty hold within
  each level (checked on each level's inserts and removals, with the empty removals);
  across levels, a dequeue ``d`` returned ``y`` while some more urgent ``x`` had to be
  present: ``ins(x)`` responded before ``d`` was invoked, and ``x`` was never removed or
  its removal was invoked after ``d`` responded (real time, linearizability only).

Each rule runs in ``O(n log n)``: sweeps over program order per process,
sweeps over real time with inserts sorted by response, a range-max tree for
the per-process LIFO rule and a Fenwick tree for the real-time one.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from skueue.check.history import PEEK, Record

_INF = math.inf


class Index:
    """Inserts and removals by value, and each process's ops in program order."""

    def __init__(self, records: Sequence[Record]) -> None:
        self.records = records
        self.ins: dict[str, Record] = {}
        self.rem: dict[str, Record] = {}
        self.empties: list[Record] = []
        self.by_proc: dict[str, list[Record]] = {}
        self.problem: str | None = None
        for r in records:
            self.by_proc.setdefault(r.process, []).append(r)
        for ops in self.by_proc.values():
            ops.sort(key=lambda r: r.seq)
        # Walk in a canonical order so the reported violation does not depend
        # on the order records happen to arrive in.
        for r in sorted(records, key=lambda r: (r.process, r.seq)):
            v = r.value
            if r.inserts:
                assert v is not None
                if v in self.ins:
                    self.problem = self.problem or (
                        f"duplicate: {v!r} inserted twice, by {self.ins[v].describe()} "
                        f"and {r.describe()} (elements must be unique)"
                    )
                    continue
                self.ins[v] = r
            elif v is None:
                self.empties.append(r)
            else:
                if v in self.rem:
                    self.problem = self.problem or (
                        f"duplicate: {v!r} removed twice, by {self.rem[v].describe()} "
                        f"and {r.describe()}"
                    )
                    continue
                self.rem[v] = r
        if self.problem is None:
            for v, r in self.rem.items():
                if v not in self.ins:
                    self.problem = f"fresh: {r.describe()} returned {v!r}, which was never inserted"
                    break


def forced(a: Record, b: Record, realtime: bool) -> str | None:
    """Why every admissible order puts ``a`` before ``b``, or None if it need not."""
    if a.process == b.process and a.seq < b.seq:
        return "program order"
    if realtime and a.response < b.invoke:
        return "real time"
    return None


class _Earlier:
    """Aggregate over a growing set of inserts that are all forced before some later op.

    Answers: is there an ``x`` in the set that must be removed before ``op``
    but is never removed, or whose removal is forced after ``op``?  Keeping only
    the extreme candidates suffices: the one removal with the largest invoke
    (real time) and, per process, the one with the largest seq (program order).
    """

    def __init__(self, rem: dict[str, Record], realtime: bool) -> None:
        self._rem = rem
        self._realtime = realtime
        self._missing: Record | None = None
        self._late_rt: tuple[Record, Record] | None = None  # (x, rem(x)), largest invoke
        self._late_po: dict[str, tuple[Record, Record]] = {}  # per process, largest seq

    def add(self, x: Record) -> None:
        assert x.value is not None
        d = self._rem.get(x.value)
        if d is None:
            if self._missing is None:
                self._missing = x
            return
        if self._realtime and (self._late_rt is None or d.invoke > self._late_rt[1].invoke):
            self._late_rt = (x, d)
        cur = self._late_po.get(d.process)
        if cur is None or d.seq > cur[1].seq:
            self._late_po[d.process] = (x, d)

    def blame(self, op: Record) -> str | None:
        """How some insert of the set breaks ``op``, or None."""
        if self._missing is not None:
            return f"{self._missing.describe()} is never removed"
        cands = [self._late_po.get(op.process)]
        if self._realtime:
            cands.append(self._late_rt)
        for c in cands:
            if c is None:
                continue
            x, d = c
            why = forced(op, d, self._realtime)
            if why is not None:
                return (
                    f"{x.describe()} is removed only by {d.describe()}, "
                    f"which is forced after it ({why})"
                )
        return None


def _false_empty_and_fifo(ix: Index, structure: str, realtime: bool) -> str | None:
    fifo = structure == "queue"

    def report(how: str, target: Record, anchor: Record, why: str) -> str:
        if target.value is None:
            return (
                f"false empty: {target.describe()} returned empty, but an insert forced "
                f"before it ({why}) is still in: {how}"
            )
        return (
            f"FIFO: {target.describe()} dequeued {anchor.describe()}, but an element "
            f"enqueued before that ({why}) is still ahead of it: {how}"
        )

    # Program-order sweep: the set is "own inserts so far".
    for ops in ix.by_proc.values():
        agg = _Earlier(ix.rem, realtime)
        for r in ops:
            if r.inserts:
                assert r.value is not None
                target = ix.rem.get(r.value) if fifo else None
                if target is not None:
                    how = agg.blame(target)
                    if how is not None:
                        return report(how, target, r, "program order")
                agg.add(r)
            elif r.value is None:
                how = agg.blame(r)
                if how is not None:
                    return report(how, r, r, "program order")
    if not realtime:
        return None
    # Real-time sweep: the set is "inserts that responded before the anchor was invoked".
    queries: list[tuple[Record, Record]] = [(d, d) for d in ix.empties]
    if fifo:
        queries += [(y, ix.rem[v]) for v, y in ix.ins.items() if v in ix.rem]
    queries.sort(key=lambda q: q[0].invoke)
    inserts = sorted(ix.ins.values(), key=lambda r: r.response)
    agg = _Earlier(ix.rem, realtime)
    i = 0
    for anchor, target in queries:
        while i < len(inserts) and inserts[i].response < anchor.invoke:
            agg.add(inserts[i])
            i += 1
        how = agg.blame(target)
        if how is not None:
            return report(how, target, anchor, "real time")
    return None


class _RangeMax:
    """Static range-argmax over a list of keys (iterative segment tree)."""

    def __init__(self, keys: list[float]) -> None:
        n = len(keys)
        self._n = n
        self._keys = keys
        tree = [0] * n + list(range(n))
        for i in range(n - 1, 0, -1):
            a, b = tree[2 * i], tree[2 * i + 1]
            tree[i] = a if keys[a] >= keys[b] else b
        self._tree = tree

    def argmax(self, lo: int, hi: int) -> int:
        """Index of a maximal key in ``[lo, hi)``, or -1 if the range is empty."""
        best = -1
        keys, tree = self._keys, self._tree
        lo += self._n
        hi += self._n
        while lo < hi:
            if lo & 1:
                c = tree[lo]
                if best < 0 or keys[c] > keys[best]:
                    best = c
                lo += 1
            if hi & 1:
                hi -= 1
                c = tree[hi]
                if best < 0 or keys[c] > keys[best]:
                    best = c
            lo >>= 1
            hi >>= 1
        return best


def _lifo_report(x: Record, y: Record, px: Record, py: Record | None, why: str, rt: bool) -> str:
    how = (
        "y is never popped"
        if py is None
        else f"y is popped only by {py.describe()}, forced after ({forced(px, py, rt)})"
    )
    return (
        f"LIFO: x = {x.describe()} is pushed before y = {y.describe()}, which is pushed "
        f"before {px.describe()} pops x ({why}), so y must be popped first, but {how}"
    )


def _lifo_program_order(ix: Index, realtime: bool) -> str | None:
    for p, ops in ix.by_proc.items():
        pushes = [r for r in ops if r.inserts]
        if not pushes:
            continue
        seqs = [r.seq for r in pushes]
        where = {r.value: i for i, r in enumerate(pushes)}
        own: list[float] = []  # forces pop(y) after pop(x) when y's pop is p's and later
        late: list[float] = []  # forces it by real time
        for y in pushes:
            assert y.value is not None
            py = ix.rem.get(y.value)
            if py is None:
                own.append(_INF)
                late.append(_INF)
            else:
                own.append(py.seq if py.process == p else -_INF)
                late.append(py.invoke if realtime else -_INF)
        own_max, late_max = _RangeMax(own), _RangeMax(late)
        for px in ops:
            if px.inserts or px.value is None or px.value not in where:
                continue
            lo = where[px.value] + 1
            hi = bisect.bisect_left(seqs, px.seq)
            for tree, keys, bound in ((own_max, own, px.seq), (late_max, late, px.response)):
                j = tree.argmax(lo, hi)
                if j >= 0 and keys[j] > bound:
                    y = pushes[j]
                    assert y.value is not None
                    return _lifo_report(
                        ix.ins[px.value], y, px, ix.rem.get(y.value), "program order", realtime
                    )
    return None


def _lifo_real_time(ix: Index) -> str | None:
    pushes = sorted(ix.ins.values(), key=lambda r: r.response)
    invokes = sorted({r.invoke for r in pushes})
    m = len(invokes)
    # Fenwick tree over reversed invoke ranks, so "invoke > t" is a prefix.
    fen_key = [-_INF] * (m + 1)
    fen_rec: list[Record | None] = [None] * (m + 1)
    pops = sorted((r for r in ix.rem.values()), key=lambda r: r.invoke)
    i = 0
    for px in pops:
        assert px.value is not None
        while i < len(pushes) and pushes[i].response < px.invoke:
            y = pushes[i]
            i += 1
            assert y.value is not None
            py = ix.rem.get(y.value)
            key = _INF if py is None else py.invoke
            k = m - bisect.bisect_left(invokes, y.invoke)
            while k <= m:
                if key > fen_key[k]:
                    fen_key[k], fen_rec[k] = key, y
                k += k & -k
        x = ix.ins[px.value]
        k = m - bisect.bisect_right(invokes, x.response)
        best_key, best = -_INF, None
        while k > 0:
            if fen_key[k] > best_key:
                best_key, best = fen_key[k], fen_rec[k]
            k -= k & -k
        if best is not None and best_key > px.response:
            assert best.value is not None
            return _lifo_report(x, best, px, ix.rem.get(best.value), "real time", True)
    return None


def find_violation_patterns(
    records: Sequence[Record], *, structure: str, realtime: bool, drained: bool
) -> str | None:
    """First definite violation found, or None (which proves nothing).  Peeks are
    passed over: they change nothing, and the patterns look for what removals did."""
    records = [r for r in records if r.op != PEEK]
    ix = Index(records)
    if ix.problem is not None:
        return ix.problem
    for v, d in sorted(ix.rem.items(), key=lambda kv: (kv[1].process, kv[1].seq)):
        e = ix.ins[v]
        why = forced(d, e, realtime)
        if why is not None:
            return f"{why}: {d.describe()} returned {v!r} before {e.describe()} inserted it"
    if drained:
        for v, e in sorted(ix.ins.items(), key=lambda kv: (kv[1].process, kv[1].seq)):
            if v not in ix.rem:
                return f"lost: {e.describe()} was never removed, but the run drained"
    if structure == "queue" and any(r.priority for r in records):
        return _priorities(records, realtime)
    found = _false_empty_and_fifo(ix, structure, realtime)
    if found is None and structure == "stack":
        found = _lifo_program_order(ix, realtime)
        if found is None and realtime:
            found = _lifo_real_time(ix)
    return found


def _priorities(records: Sequence[Record], realtime: bool) -> str | None:
    """The rules of a queue with priority levels (see the module doc)."""
    level = {r.value: r.priority or 0 for r in records if r.inserts}
    for at in sorted(set(level.values())):
        ops = [r for r in records if r.value is None or level.get(r.value) == at]
        found = _false_empty_and_fifo(Index(ops), "queue", realtime)
        if found is not None:
            return f"at priority {at}: {found}"
    return _less_urgent_first(records, level) if realtime else None


def _less_urgent_first(records: Sequence[Record], level: dict[str | None, int]) -> str | None:
    """A dequeue that returned a level-``l`` element while a more urgent one had to be
    present.  Per cut-off level ``l``, a sweep over the inserts by response keeps the one
    below ``l`` whose removal came latest (never removed: infinitely late)."""
    ix = Index(records)
    inserts = sorted((r for r in records if r.inserts), key=lambda r: r.response)
    responses = [r.response for r in inserts]
    latest: dict[int, list[tuple[float, Record | None]]] = {}
    for cut in sorted({lv for lv in level.values() if lv}):
        best: tuple[float, Record | None] = (-_INF, None)
        sweep = []
        for r in inserts:
            if level[r.value] < cut:
                removal = ix.rem.get(r.value)  # type: ignore[arg-type]
                late = _INF if removal is None else removal.invoke
                if late > best[0]:
                    best = (late, r)
            sweep.append(best)
        latest[cut] = sweep
    for d in sorted(ix.rem.values(), key=lambda r: (r.process, r.seq)):
        mine = level[d.value]
        before = bisect.bisect_left(responses, d.invoke)
        if not mine or not before:
            continue
        late, urgent = latest[mine][before - 1]
        if urgent is not None and d.response < late:
            return (
                f"priority: {d.describe()} returned a level-{mine} element while "
                f"{urgent.describe()} (level {level[urgent.value]}) had to be in the queue"
            )
    return None
