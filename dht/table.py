"""The DHT entries one virtual node stores, and its waiting Gets (SPEC §4, §7).

Entries are kept by position (the key only decides *which* node stores them), so two
positions whose keys collide can never be confused.

Queue: one element per position.  A Get that arrives before its Put waits here until
the Put arrives (messages are not FIFO).

Stack: a position may hold several elements over time, told apart by tickets.  A Pop
``(p, t)`` takes the entry at ``p`` with the largest ticket ``<= t``; entries pushed later
(larger tickets) are never taken by an earlier Pop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Waiter = TypeVar("Waiter")
Element = TypeVar("Element")


@dataclass(slots=True)
class Table(Generic[Waiter, Element]):
    """Entries and waiting Gets at one node.

    ``Waiter`` is whatever the caller needs to answer a Get later (the requester).
    """

    # position -> {ticket: element}; the queue uses ticket 0 only.
    entries: dict[int, dict[int, Element]] = field(default_factory=dict)
    # position -> [(ticket, waiter)]
    waiting: dict[int, list[tuple[int, Waiter]]] = field(default_factory=dict)

    def __len__(self) -> int:
        return sum(len(v) for v in self.entries.values())

    def put(self, position: int, element: Element, ticket: int = 0) -> list[tuple[Waiter, Element]]:
        """Store an entry; returns the waiting Gets it serves (at most one)."""
        waiters = self.waiting.get(position)
        if waiters:
            for i, (wanted, waiter) in enumerate(waiters):
                if ticket <= wanted:
                    del waiters[i]
                    if not waiters:
                        del self.waiting[position]
                    return [(waiter, element)]
        slot = self.entries.setdefault(position, {})
        if ticket in slot:
            raise ValueError(f"duplicate put at position {position} ticket {ticket}")
        slot[ticket] = element
        return []

    def get(self, position: int, waiter: Waiter, ticket: int = 0) -> tuple[bool, Element | None]:
        """Take the entry for a Get; ``(False, None)`` means the Get now waits here."""
        slot = self.entries.get(position)
        if slot:
            eligible = [t for t in slot if t <= ticket]
            if eligible:
                best = max(eligible)
                element = slot.pop(best)
                if not slot:
                    del self.entries[position]
                return True, element
        self.waiting.setdefault(position, []).append((ticket, waiter))
        return False, None

    def waiting_count(self) -> int:
        return sum(len(v) for v in self.waiting.values())

    def items(self) -> Iterator[tuple[int, int, Element]]:
        for position, slot in self.entries.items():
            for ticket, element in slot.items():
                yield position, ticket, element

    def take_where(self, moves: Callable[[int], bool]) -> list[tuple[int, int, Element]]:
        """Remove and return the entries whose position ``moves`` (a hand-over)."""
        out = []
        for position in [p for p in self.entries if moves(p)]:
            for ticket, element in self.entries.pop(position).items():
                out.append((position, ticket, element))
        return out

    def add_entries(self, entries: Iterable[tuple[int, int, Element]]) -> None:
        """Take over entries handed from another node; none of them may be here already."""
        for position, ticket, element in entries:
            served = self.put(position, element, ticket)
            if served:
                raise ValueError(f"a Get waited for handed-over position {position}")
