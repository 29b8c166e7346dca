"""Stage 2: the anchor's interval assignment (SPEC §5-7), for the queue and the stack.

The anchor is the only place where the serialization order is decided.  It walks the
combined batch run by run; ``ord_next`` counts the ranks handed out so far (the paper's
virtual counter of §V), so every operation gets a unique rank.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from skueue.batch import Batch, RunGrant, is_insert_run


class AnchorPolicy(Protocol):
    ord_next: int

    def assign(self, batch: Batch) -> tuple[RunGrant, ...]: ...

    def size(self) -> int: ...

    def describe(self) -> str: ...


@attrs.define
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

    def describe(self) -> str:
        return f"queue[{self.first}..{self.last}] ord={self.ord_next}"


@attrs.define
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

    def describe(self) -> str:
        return f"stack[{self.last}] ticket={self.ticket} ord={self.ord_next}"
