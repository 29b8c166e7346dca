"""Batches (paper Definition 5, SPEC §5) and the position grants that come back down.

Theory of operation
-------------------
A batch is a sequence of run lengths ``(b_1, ..., b_k)``: odd runs (1-based) count
inserts (Enqueue/Push), even runs count removes (Dequeue/Pop).  Batches combine
elementwise on their way up the aggregation tree; the node that combined them keeps
the sub-batches in a fixed order (own buffer first, then children in tree order) so that
the grants coming back down can be split in that same order.

Besides the run lengths, a batch carries ``slots``: per run, how many ranks of the
anchor's serialization (``ord``) the run needs.  For the queue ``slots == counts``.  For
the stack, locally combined Push/Pop pairs need ranks but no DHT positions, so a run's
slots may exceed its count.  Carrying them keeps every operation's ``ord`` a unique
integer that respects program order, which is what lets a checker certify any history.

Named queues (issue 12): every queue of the cluster is its own Skueue instance on the
shared tree, so a node reports up one :class:`Batches` per cycle: a batch per queue that
has operations, keyed by :data:`QueueKey` (the queue's name, and whether it is a stack)
and sorted by it, so that combining is a merge and the anchor walks the queues in one
fixed order.  One cycle of the tree serves every active queue; a queue with no
operations costs nothing in it.

Making a queue with settings and deleting one (issue 12) are not runs: ``creates`` and
``deletes`` count those operations per queue, and the anchor applies creates before the
cycle's runs and deletes after them (:mod:`skueue.core.creates_deletes` has what comes
back down).  Peeks (issue 14) are not runs either: ``peeks`` counts them per queue, and
the anchor applies them last (:mod:`skueue.core.peeks`).

``joins`` and ``leaves`` (on :class:`Batches`) are the update-phase counters of SPEC §8
(summed on combine); ``nodes`` counts the integrated nodes whose batches went into this
one, so that the anchor knows the size of the ring for the paper's update trigger
without anyone holding a list.

A :class:`RunGrant` is what the anchor assigns to one run: ``available`` consecutive
positions starting at ``first`` and walking in direction ``step`` (+1, or -1 for stack
Pops, which take the highest position first), the first rank ``ord_first``, and the
stack ticket.  Operations beyond ``available`` in a remove run get "empty".
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from skueue.core.levels import LevelCounts, Segments, combine_runs, fold, nth, take
from skueue.core.ops import PRIORITIES_MAX

T = TypeVar("T")

# Bounds no correct batch comes near; a peer's batch beyond them is refused, so that
# positions and ranks can never leave the range the DHT keys and the wire support.
RUN_OPS_MAX = 1 << 32
COUNTER_MAX = 1 << 32
RANK_MAX = 1 << 62


def _add_elementwise(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if len(a) < len(b):
        a, b = b, a
    return tuple(x + (b[i] if i < len(b) else 0) for i, x in enumerate(a))


def is_insert_run(index: int) -> bool:
    """0-based run index: even indices (the paper's odd b_i) are insert runs."""
    return index % 2 == 0


def per_level(runs: tuple[int, ...], priorities: Iterable[int]) -> tuple[LevelCounts, ...]:
    """Each run's count per priority level, the operations' ``priorities`` given in run
    order (a remove's is not read); empty when every insert is at level 0."""
    out: list[list[int]] = [[] for _ in runs]
    levels = iter(priorities)
    for i, count in enumerate(runs):
        for _ in range(count):
            level = min(next(levels), PRIORITIES_MAX - 1)
            if is_insert_run(i):
                out[i].extend([0] * (level + 1 - len(out[i])))
                out[i][level] += 1
    if all(len(v) <= 1 for v in out):
        return ()
    return tuple(tuple(v) for v in out)


@dataclass(frozen=True, slots=True)
class Batch:
    """One queue's runs (Definition 5)."""

    counts: tuple[int, ...] = ()
    slots: tuple[int, ...] = ()
    # Per run, an insert run's count at each priority level (skueue/core/levels.py);
    # empty while every insert is at level 0.
    levels: tuple[LevelCounts, ...] = ()

    @staticmethod
    def of(*counts: int) -> Batch:
        """A batch whose every operation needs a position (the queue's case)."""
        return Batch(tuple(counts), tuple(counts))

    @staticmethod
    def of_order(inserts: Iterable[bool], priorities: Iterable[int] | None = None) -> Batch:
        """Definition 5 over a buffer: each operation, in order (True for an insert),
        extends the last run if it is of its kind and starts a run of 1 otherwise; a
        buffer that starts with a remove is ``(0, 1, ...)``.  Every operation needs a
        position (the queue's case).  With ``priorities`` (each operation's, in the same
        order), the insert runs count their inserts per level too."""
        counts: list[int] = []
        for insert in inserts:
            if counts and is_insert_run(len(counts) - 1) == insert:
                counts[-1] += 1
                continue
            if not counts and not insert:
                counts.append(0)
            counts.append(1)
        runs = tuple(counts)
        if priorities is None:
            return Batch(runs, runs)
        return Batch(runs, runs, per_level(runs, priorities))

    def combine(self, other: Batch) -> Batch:
        counts = _add_elementwise(self.counts, other.counts)
        slots = _add_elementwise(self.slots, other.slots)
        if not self.levels and not other.levels:
            return Batch(counts, slots)
        levels = combine_runs(self.levels, self.counts, other.levels, other.counts)
        return Batch(counts, slots, levels)

    @property
    def operations(self) -> int:
        return sum(self.slots)

    @property
    def is_empty(self) -> bool:
        return not any(self.slots)

    def describe(self) -> str:
        # Not strict: a peer's malformed batch must still describe itself in a log line.
        pairs = itertools.zip_longest(self.counts, self.slots, fillvalue="?")
        runs = ",".join(str(c) if c == s else f"{c}/{s}" for c, s in pairs)
        return f"({runs}){f' levels {self.levels}' if self.levels else ''}"


QueueKey = tuple[str, bool]
"""A queue of the cluster: its name, and True for a stack.  Batches are keyed by both,
so that operations of both kinds on one name can meet in a combined batch; the anchor
decides which one the name is."""
Section = tuple[QueueKey, Batch]
Deletes = tuple[tuple[str, int], ...]
"""Per queue name, in name order, how many delete operations a batch carries."""
CreateKey = tuple[str, bool, int, int]
"""A create's queue and settings: name, stack, delivery limit, priority levels
(QueueSettings).  A configure's is ``(name, False, limit, ops.CONFIGURE_LEVELS)``: it
sets the limit of the queue the name holds, whatever its structure and levels."""
Creates = tuple[tuple[CreateKey, int], ...]
"""Per create key, in order, how many create operations a batch carries."""
Peeks = tuple[tuple[str, int], ...]
"""Per queue name, in name order, how many peeks a batch carries (skueue/core/peeks.py)."""



def _merge(a: tuple[Section, ...], b: tuple[Section, ...]) -> tuple[Section, ...]:
    """Two sorted section lists as one, the batches of a queue in both combined."""
    if not b:
        return a
    if not a:
        return b
    merged = dict(a)
    for key, batch in b:
        mine = merged.get(key)
        merged[key] = batch if mine is None else mine.combine(batch)
    return tuple(sorted(merged.items()))


Counts = tuple[tuple[T, int], ...]


def _merge_counts(a: Counts[T], b: Counts[T]) -> Counts[T]:
    """Two sorted (key, count) lists as one, the counts of a key in both added."""
    if not b:
        return a
    if not a:
        return b
    merged = dict(a)
    for key, count in b:
        merged[key] = merged.get(key, 0) + count
    return tuple(sorted(merged.items()))


@dataclass(frozen=True, slots=True)
class Batches:
    """What goes up the tree in one cycle: a batch per queue with operations, sorted by
    queue, and the update-phase counters (SPEC §8)."""

    sections: tuple[Section, ...] = ()
    joins: int = 0
    leaves: int = 0
    nodes: int = 0
    patient: int = 0  # of the operations, blocking dequeues' attempts (they hurry no one)
    deletes: Deletes = ()
    creates: Creates = ()
    peeks: Peeks = ()

    def combine(self, other: Batches) -> Batches:
        return Batches(
            _merge(self.sections, other.sections),
            self.joins + other.joins,
            self.leaves + other.leaves,
            self.nodes + other.nodes,
            self.patient + other.patient,
            _merge_counts(self.deletes, other.deletes),
            _merge_counts(self.creates, other.creates),
            _merge_counts(self.peeks, other.peeks),
        )

    @property
    def operations(self) -> int:
        return (
            sum(b.operations for _, b in self.sections)
            + sum(n for _, n in self.deletes)
            + sum(n for _, n in self.creates)
            + sum(n for _, n in self.peeks)
        )

    @property
    def is_empty(self) -> bool:
        return not self.operations and not self.joins and not self.leaves

    @property
    def urgent(self) -> bool:
        """Something in it should not wait for the idle pace: an operation that is not
        a blocking dequeue's attempt, or a join or leave."""
        return self.operations > self.patient or bool(self.joins or self.leaves)

    @property
    def runs(self) -> int:
        """The most runs of any queue's batch (Theorem 18/20 bound each)."""
        return max((len(b.counts) for _, b in self.sections), default=0)

    def describe(self) -> str:
        parts = [f"{name}{'(stack)' if stack else ''}{b.describe()}"
                 for (name, stack), b in self.sections]  # fmt: skip
        parts += [f"delete:{name}x{n}" for name, n in self.deletes]
        parts += [f"create:{key!r:.60}x{n}" for key, n in self.creates]
        parts += [f"peek:{name}x{n}" for name, n in self.peeks]
        extra = f" j{self.joins}" if self.joins else ""
        extra += f" l{self.leaves}" if self.leaves else ""
        return (" ".join(parts) or "()") + extra


def combine_all(batches: Sequence[Batch]) -> Batch:
    total = Batch()
    for b in batches:
        total = total.combine(b)
    return total


@dataclass(frozen=True, slots=True)
class RunGrant:
    """Positions and ranks assigned to one run of a batch."""

    first: int
    available: int
    ord_first: int
    ticket: int = 0
    step: int = 1
    ticket_step: int = 0
    # A queue with priority levels (skueue/core/levels.py): an insert run's first
    # position and count at each level; a remove run's segments, most urgent first.
    levels: Segments = ()

    def position(self, i: int) -> int:
        if self.levels:
            return nth(self.levels, i)
        return self.first + i * self.step

    def ticket_of(self, i: int) -> int:
        return self.ticket + i * self.ticket_step

    def describe(self) -> str:
        if self.available == 0:
            return f"[empty ord {self.ord_first}]"
        last = self.position(self.available - 1)
        return f"[{self.first}..{last} ord {self.ord_first} t{self.ticket}]"


SectionGrants = tuple[QueueKey, tuple[RunGrant, ...]]
Refusal = tuple[QueueKey, int]  # a queue whose operations the anchor refused, and why
Limit = tuple[QueueKey, int]  # a queue of the batch with a delivery limit, and the limit


def split_by_queue(
    refused: Sequence[Refusal], subs: Sequence[Batches]
) -> list[tuple[Refusal, ...]]:
    """Each sub-batch's share of what the anchor says per queue (the queues it refused,
    the delivery limits): that of the queues the sub-batch holds operations of."""
    if len(subs) == 1:
        return [tuple(refused)]
    tables = [dict(sub.sections) for sub in subs]
    return [tuple(r for r in refused if r[0] in t) for t in tables]


def split_section_grants(
    grants: Sequence[SectionGrants], subs: Sequence[Batches]
) -> list[tuple[SectionGrants, ...]]:
    """Stage 3 for every queue: split each queue's grants over the sub-batches that hold
    operations of it, in order; returns one tuple per sub-batch, its queues in order."""
    if len(subs) == 1:
        return [tuple(grants)]
    out: list[list[SectionGrants]] = [[] for _ in subs]
    tables = [dict(sub.sections) for sub in subs]
    for key, runs in grants:
        holders = [j for j, t in enumerate(tables) if key in t]
        parts = split_grants(runs, [tables[j][key] for j in holders])
        for j, part in zip(holders, parts, strict=True):
            out[j].append((key, part))
    return [tuple(x) for x in out]


def split_grants(grants: Sequence[RunGrant], subs: Sequence[Batch]) -> list[tuple[RunGrant, ...]]:
    """Stage 3: split the grants of a combined batch over its sub-batches, in order.

    Sub-batch ``j`` takes the next ``counts[j][i]`` positions of run ``i`` while they
    last and the next ``slots[j][i]`` ranks.  Returns one grant tuple per sub-batch,
    as long as that sub-batch's run list.
    """
    out: list[list[RunGrant]] = [[] for _ in subs]
    for i, g in enumerate(grants):
        if g.levels:
            _split_levels(i, g, subs, out)
            continue
        # The grant's fields, walked forward sub-batch by sub-batch (plain ints: this
        # runs for every run of every node's batch in every cycle).
        first, available, ord_first, ticket = g.first, g.available, g.ord_first, g.ticket
        step, ticket_step = g.step, g.ticket_step
        for j, sub in enumerate(subs):
            if i >= len(sub.counts):
                continue
            taken = min(sub.counts[i], available)
            out[j].append(RunGrant(first, taken, ord_first, ticket, step, ticket_step))
            first += taken * step
            available -= taken
            ord_first += sub.slots[i]
            ticket += taken * ticket_step
    return [tuple(x) for x in out]


def _split_levels(i: int, g: RunGrant, subs: Sequence[Batch], out: list[list[RunGrant]]) -> None:
    """:func:`split_grants` for run ``i`` of a queue with priority levels: an insert run
    by each sub-batch's count per level, a remove run along its segments."""
    ord_first = g.ord_first
    if is_insert_run(i):
        nexts = [first for first, _ in g.levels]
        for j, sub in enumerate(subs):
            if i >= len(sub.counts):
                continue
            mine = fold(sub.levels[i] if sub.levels else (sub.counts[i],), len(nexts))
            levels = tuple((nexts[k], n) for k, n in enumerate(mine))
            nexts = [x + n for x, n in zip(nexts, mine, strict=True)]
            out[j].append(RunGrant(levels[0][0], sub.counts[i], ord_first, levels=levels))
            ord_first += sub.slots[i]
        return
    rest = g.levels
    for j, sub in enumerate(subs):
        if i >= len(sub.counts):
            continue
        taken, rest = take(rest, sub.counts[i])
        available = sum(n for _, n in taken)
        first = taken[0][0] if taken else g.first
        out[j].append(RunGrant(first, available, ord_first, levels=taken))
        ord_first += sub.slots[i]
