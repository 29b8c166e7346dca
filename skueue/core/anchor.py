"""Stage 2: the anchor's interval assignment (SPEC §5-7), for the queue and the stack.

The anchor is the only place where the serialization order is decided.  It walks the
combined batch run by run; ``ord_next`` counts the ranks handed out so far (the paper's
virtual counter of §V), so every operation gets a unique rank.

Every named queue has its own counters (:class:`QueueAnchors`), created when its first
batch reaches the anchor: ranks are per queue, like positions, because linearizability
is a property of each object on its own (it is local), and the checkers check each
queue's history alone.

Deleting a queue (issue 12) retires its counters: the queue's remaining range goes back
with the grants, for the deleting node to clear, and the name is free again.  Positions
and ranks are never reused: Gets and Puts of the old queue may still be on their way,
and they must never meet a new queue of the same name.  One number does it, ``floor``:
above every position and rank any deleted queue used.  A queue made afterwards starts
above it (a stack's positions are offset by its ``base``), so the anchor remembers
nothing per deleted name.

A queue's settings (its structure, and its delivery limit: ``limits``) are set when it
is made, explicitly by a create or by its first operation; a configure changes the
limit of a queue that exists (issue 28).  Creates and configures go before the cycle's
runs; the limits of the queues a batch holds operations of go down with its grants, so
that a leased remove's process knows where a return past the limit goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from skueue.core.batch import (
    Batch,
    Batches,
    CreateKey,
    Creates,
    Deletes,
    Limit,
    Refusal,
    RunGrant,
    SectionGrants,
    is_insert_run,
)
from skueue.core.creates_deletes import Creation, Deletion
from skueue.core.ops import (
    CONFIGURE_LEVELS,
    CREATE_FOUND,
    CREATE_FOUND_OTHER,
    CREATE_FULL,
    CREATE_MADE,
    CREATE_NO_QUEUE,
    DEFAULT_QUEUE,
    QUEUES_MAX,
    REFUSED_OTHER_STRUCTURE,
    REFUSED_TOO_MANY_QUEUES,
    Structure,
)
from skueue.core.priority_anchor import PriorityAnchor, import_priority_anchor

# One queue's counters as they travel in an anchor hand-over: name, stack, counters.
QueueCounters = tuple[str, bool, tuple[int, ...]]


class AnchorPolicy(Protocol):
    ord_next: int

    def assign(self, batch: Batch) -> tuple[RunGrant, ...]: ...

    def size(self) -> int: ...

    def export(self) -> tuple[int, ...]: ...

    def describe(self) -> str: ...

    def retire(self, count: int) -> tuple[RunGrant, int]:
        """``count`` deletes take what the queue holds: the range removed, with the first
        delete's rank, and the least floor above every position and rank it used."""
        ...


@dataclass(slots=True)
class QueueAnchor:
    """Occupied positions are ``[first, last]``; initially empty (first=1, last=0)."""

    first: int = 1
    last: int = 0
    ord_next: int = 0

    def assign(self, batch: Batch) -> tuple[RunGrant, ...]:
        grants = []
        for i, (count, slots) in enumerate(zip(batch.counts, batch.slots, strict=True)):
            if is_insert_run(i):
                grants.append(RunGrant(self.last + 1, count, self.ord_next))
                self.last += count
            else:
                available = max(0, min(count, self.last - self.first + 1))
                grants.append(RunGrant(self.first, available, self.ord_next))
                self.first += available
            self.ord_next += slots
        return tuple(grants)

    def size(self) -> int:
        return self.last - self.first + 1

    def head(self) -> int | None:
        """The position the next dequeue would take, or None when empty (a peek's)."""
        return self.first if self.first <= self.last else None

    def export(self) -> tuple[int, ...]:
        """The counters a new anchor needs (SPEC §8, anchor change)."""
        return (self.first, self.last, self.ord_next)

    def describe(self) -> str:
        return f"queue[{self.first}..{self.last}] ord={self.ord_next}"

    def retire(self, count: int) -> tuple[RunGrant, int]:
        removed = RunGrant(self.first, self.size(), self.ord_next)
        return removed, max(self.last, self.ord_next + count)


@dataclass(slots=True)
class StackAnchor:
    """``last`` is the stack size; ``ticket`` counts Pushes ever assigned and never
    decreases.  The stack's positions are ``base + 1 .. base + last``: ``base`` is 0
    unless the name was deleted before (above every position the old stack used)."""

    last: int = 0
    ticket: int = 0
    ord_next: int = 0
    base: int = 0

    def assign(self, batch: Batch) -> tuple[RunGrant, ...]:
        grants = []
        for i, (count, slots) in enumerate(zip(batch.counts, batch.slots, strict=True)):
            if is_insert_run(i):
                grants.append(
                    RunGrant(
                        self.base + self.last + 1,
                        count,
                        self.ord_next,
                        ticket=self.ticket + 1,
                        ticket_step=1,
                    )
                )
                self.last += count
                self.ticket += count
            else:
                # Pops take the top first: positions last, last-1, ..., all paired with
                # the current ticket so that they skip entries pushed later.
                available = min(count, self.last)
                grants.append(self._pops(available))
                self.last -= available
            self.ord_next += slots
        return tuple(grants)

    def _pops(self, available: int) -> RunGrant:
        return RunGrant(self.base + self.last, available, self.ord_next, self.ticket, step=-1)

    def size(self) -> int:
        return self.last

    def export(self) -> tuple[int, ...]:
        return (self.last, self.ticket, self.ord_next, self.base)

    def describe(self) -> str:
        base = f" base={self.base}" if self.base else ""
        return f"stack[{self.last}] ticket={self.ticket} ord={self.ord_next}{base}"

    def retire(self, count: int) -> tuple[RunGrant, int]:
        # Every position a Push ever got is at most base + ticket.
        return self._pops(self.last), max(self.base + self.ticket, self.ord_next + count)


def new_anchor(stack: bool, floor: int, levels: int = 1) -> AnchorPolicy:
    """The counters of a queue made now: empty, above ``floor``."""
    if stack:
        return StackAnchor(ord_next=floor, base=floor)
    if levels > 1:
        return PriorityAnchor.empty(levels, floor)
    return QueueAnchor(floor + 1, floor, floor)


def levels_of(policy: AnchorPolicy) -> int:
    return policy.levels if isinstance(policy, PriorityAnchor) else 1


def import_anchor(state: tuple[int, ...], stack: bool) -> AnchorPolicy:
    """Rebuild a handed-over anchor; the state is exactly what ``export`` gave."""
    if stack:
        last, ticket, ord_next, base = state
        return StackAnchor(last, ticket, ord_next, base)
    if len(state) != 3:
        return import_priority_anchor(state)
    first, last, ord_next = state
    return QueueAnchor(first, last, ord_next)


@dataclass(slots=True)
class QueueAnchors:
    """The anchor's counters of every queue, by name, each a queue's or a stack's.

    A name's structure is fixed by the first batch that reaches the anchor for it (the
    default queue's by the cluster's, when the cluster starts).  A later batch of the
    other structure for the name, or of a new name when ``QUEUES_MAX`` names exist, is
    refused whole: its operations complete with an error, and nothing else changes."""

    queues: dict[str, AnchorPolicy] = field(default_factory=dict)
    # Above every position and rank of every deleted queue (see the module doc).
    floor: int = 0
    # The delivery limits of the queues that have one (see the module doc).
    limits: dict[str, int] = field(default_factory=dict)

    @classmethod
    def starting(cls, structure: Structure) -> QueueAnchors:
        """A new cluster's anchor: the default queue has the cluster's structure."""
        policy = StackAnchor() if structure is Structure.STACK else QueueAnchor()
        return cls({DEFAULT_QUEUE: policy})

    def assign(self, batches: Batches) -> tuple[tuple[SectionGrants, ...], tuple[Refusal, ...]]:
        """Stage 2 for every queue of the cycle, in the batches' (sorted) order: the
        grants of the queues served, and the queues refused with why."""
        grants: list[SectionGrants] = []
        refused: list[Refusal] = []
        for key, batch in batches.sections:
            name, stack = key
            policy = self.queues.get(name)
            if policy is None:
                if len(self.queues) >= QUEUES_MAX:
                    refused.append((key, REFUSED_TOO_MANY_QUEUES))
                    continue
                policy = self.queues[name] = new_anchor(stack, self.floor)
            elif isinstance(policy, StackAnchor) != stack:
                refused.append((key, REFUSED_OTHER_STRUCTURE))
                continue
            grants.append((key, policy.assign(batch)))
        return tuple(grants), tuple(refused)

    def create(self, creates: Creates) -> tuple[Creation, ...]:
        """Make the queues ``creates`` ask for (before the cycle's runs), each with its
        settings, or find them made: what each create key got, with the queue's
        settings as they are now.  Keys are in order, so of two creates of one name
        with other settings in one cycle, the first in that order makes it."""
        out: list[Creation] = []
        for key, _ in creates:
            name, stack, limit, levels = key
            policy = self.queues.get(name)
            if levels == CONFIGURE_LEVELS:
                out.append(self._configure(key, policy, limit))
                continue
            if policy is None:
                if len(self.queues) >= QUEUES_MAX:
                    out.append((key, CREATE_FULL, stack, limit, levels))
                    continue
                self.queues[name] = new_anchor(stack, self.floor, levels)
                if limit:
                    self.limits[name] = limit
                out.append((key, CREATE_MADE, stack, limit, levels))
                continue
            now = (isinstance(policy, StackAnchor), self.limits.get(name, 0), levels_of(policy))
            outcome = CREATE_FOUND if now == (stack, limit, levels) else CREATE_FOUND_OTHER
            out.append((key, outcome, *now))
        return tuple(out)

    def _configure(self, key: CreateKey, policy: AnchorPolicy | None, limit: int) -> Creation:
        """A configure: the queue the name holds takes the new delivery limit (from the
        leased removes of this cycle on, whose grants carry it), or there is no queue."""
        name = key[0]
        if policy is None:
            return (key, CREATE_NO_QUEUE, False, 0, 1)
        if limit:
            self.limits[name] = limit
        else:
            self.limits.pop(name, None)
        return (key, CREATE_FOUND, isinstance(policy, StackAnchor), limit, levels_of(policy))

    def limits_of(self, batches: Batches) -> tuple[Limit, ...]:
        """The delivery limits of the queues ``batches`` holds operations of."""
        if not self.limits:
            return ()
        return tuple(
            (key, self.limits[key[0]]) for key, _ in batches.sections if key[0] in self.limits
        )

    def delete(self, deletes: Deletes) -> tuple[Deletion, ...]:
        """Retire every queue named in ``deletes`` (after the cycle's runs): what each
        held is removed, its name is free, and the floor rises above it.  Deleting a
        name that holds no queue removes nothing and says so: it makes nothing either
        (issue 28), but takes its ranks like a delete, from the floor."""
        out: list[Deletion] = []
        for name, count in deletes:
            policy = self.queues.pop(name, None)
            if policy is None:
                out.append(((name, False), RunGrant(self.floor + 1, 0, self.floor), False))
                self.floor += count  # the deletes' ranks
                continue
            self.limits.pop(name, None)
            removed, floor = policy.retire(count)
            out.append(((name, isinstance(policy, StackAnchor)), removed, True))
            self.floor = max(self.floor, floor)
        return tuple(out)

    def describe_queues(self) -> dict[str, tuple[int, str, int, int]]:
        """Each queue's size, structure, delivery limit and priority levels, by name."""
        return {
            name: (
                policy.size(),
                "stack" if isinstance(policy, StackAnchor) else "queue",
                self.limits.get(name, 0),
                levels_of(policy),
            )
            for name, policy in sorted(self.queues.items())
        }

    def export(self) -> tuple[tuple[QueueCounters, ...], int, tuple[tuple[str, int], ...]]:
        """Every queue's counters, the floor and the limits, for the next anchor (SPEC
        §8, anchor change)."""
        counters = tuple(
            (name, isinstance(policy, StackAnchor), policy.export())
            for name, policy in sorted(self.queues.items())
        )
        return counters, self.floor, tuple(sorted(self.limits.items()))

    def describe(self) -> str:
        floor = f" floor={self.floor}" if self.floor else ""
        return " ".join(f"{name}:{p.describe()}" for name, p in sorted(self.queues.items())) + floor


def import_anchors(
    state: tuple[QueueCounters, ...], floor: int, limits: tuple[tuple[str, int], ...] = ()
) -> QueueAnchors:
    """Rebuild a handed-over anchor's counters; the arguments are what ``export`` gave."""
    queues = {name: import_anchor(counters, stack) for name, stack, counters in state}
    return QueueAnchors(queues, floor, dict(limits))


@dataclass(slots=True)
class UpdateTrigger:
    """When the anchor starts an update phase (SPEC §8).

    The paper's rule: more joining nodes pending than nodes in the ring, or more leaving
    nodes than half of them.  Added: an age bound, so that a lone join (or leave) waits
    at most ``age_cycles`` batches.  ``nodes`` comes with every batch (each integrated
    node counts itself), so the anchor knows the ring's size without a member list.
    """

    join_factor: float = 1.0
    leave_factor: float = 0.5
    age_cycles: int = 8
    pending_joins: int = 0
    pending_leaves: int = 0
    age: int = 0

    def observe(self, batch: Batches) -> bool:
        """Account for one assigned batch; True when its grants start an update phase."""
        self.pending_joins += batch.joins
        self.pending_leaves += batch.leaves
        if not (self.pending_joins or self.pending_leaves):
            return False
        self.age += 1
        fire = (
            self.pending_joins > self.join_factor * batch.nodes
            or self.pending_leaves > self.leave_factor * batch.nodes
            or self.age >= self.age_cycles
        )
        if fire:
            self.pending_joins = self.pending_leaves = self.age = 0
        return fire


@dataclass(slots=True)
class AnchorSeat:
    """The anchor's counters and update trigger, at the node that is the anchor now (both
    None elsewhere).  The seat moves when the minimum node changes (SPEC §8)."""

    policy: QueueAnchors | None = None
    trigger: UpdateTrigger | None = None

    def take(self, policy: QueueAnchors) -> None:
        self.policy = policy
        self.trigger = UpdateTrigger()

    def hand_over(self) -> tuple[tuple[QueueCounters, ...], int, tuple[tuple[str, int], ...]]:
        """Give the seat up; returns what the next anchor needs (``QueueAnchors.export``)."""
        assert self.policy is not None
        state = self.policy.export()
        self.policy = self.trigger = None
        return state
