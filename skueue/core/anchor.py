"""Stage 2: the anchor's interval assignment (SPEC §5-7), for the queue and the stack.

The anchor is the only place where the serialization order is decided.  It walks the
combined batch run by run; ``ord_next`` counts the ranks handed out so far (the paper's
virtual counter of §V), so every operation gets a unique rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from skueue.core.batch import Batch, RunGrant, is_insert_run


class AnchorPolicy(Protocol):
    ord_next: int

    def assign(self, batch: Batch) -> tuple[RunGrant, ...]: ...

    def size(self) -> int: ...

    def export(self) -> tuple[int, ...]: ...

    def describe(self) -> str: ...


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

    def export(self) -> tuple[int, ...]:
        """The counters a new anchor needs (SPEC §8, anchor change)."""
        return (self.first, self.last, self.ord_next)

    def describe(self) -> str:
        return f"queue[{self.first}..{self.last}] ord={self.ord_next}"


@dataclass(slots=True)
class StackAnchor:
    """``last`` is the stack size; ``ticket`` counts Pushes ever assigned and never decreases."""

    last: int = 0
    ticket: int = 0
    ord_next: int = 0

    def assign(self, batch: Batch) -> tuple[RunGrant, ...]:
        grants = []
        for i, (count, slots) in enumerate(zip(batch.counts, batch.slots, strict=True)):
            if is_insert_run(i):
                grants.append(
                    RunGrant(
                        self.last + 1, count, self.ord_next, ticket=self.ticket + 1, ticket_step=1
                    )
                )
                self.last += count
                self.ticket += count
            else:
                # Pops take the top first: positions last, last-1, ..., all paired with
                # the current ticket so that they skip entries pushed later.
                available = min(count, self.last)
                grants.append(
                    RunGrant(self.last, available, self.ord_next, ticket=self.ticket, step=-1)
                )
                self.last -= available
            self.ord_next += slots
        return tuple(grants)

    def size(self) -> int:
        return self.last

    def export(self) -> tuple[int, ...]:
        return (self.last, self.ticket, self.ord_next)

    def describe(self) -> str:
        return f"stack[{self.last}] ticket={self.ticket} ord={self.ord_next}"


def import_anchor(state: tuple[int, ...], stack: bool) -> AnchorPolicy:
    """Rebuild a handed-over anchor; the state is exactly what ``export`` gave."""
    if stack:
        last, ticket, ord_next = state
        return StackAnchor(last, ticket, ord_next)
    first, last, ord_next = state
    return QueueAnchor(first, last, ord_next)


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

    def observe(self, batch: Batch) -> bool:
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

    policy: AnchorPolicy | None = None
    trigger: UpdateTrigger | None = None

    def take(self, policy: AnchorPolicy) -> None:
        self.policy = policy
        self.trigger = UpdateTrigger()

    def hand_over(self) -> tuple[int, ...]:
        """Give the seat up; returns the counters the next anchor needs."""
        assert self.policy is not None
        state = self.policy.export()
        self.policy = self.trigger = None
        return state
