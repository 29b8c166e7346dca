"""The DHT entries one virtual node stores, and its waiting Gets (SPEC §4, §7).

Entries are kept by position (the key only decides *which* node stores them), so two
positions whose keys collide can never be confused.

Queue: one element per position.  A Get that arrives before its Put waits here until
the Put arrives (messages are not FIFO).  A peek's read (a Look) returns the element and
leaves it; one that comes first waits the same way, and the Put serves every waiting Look
before it is stored or taken (skueue/core/peeks.py).

Stack: a position may hold several elements over time, told apart by tickets.  A Pop
``(p, t)`` takes the entry at ``p`` with the largest ticket ``<= t``; entries pushed later
(larger tickets) are never taken by an earlier Pop.

Where elements live: in the table itself, or, when a driver attaches an
:class:`~skueue.dht.storage.interface.EntryStore` (a durable daemon does), in that store,
the table keeping only each entry's record id.  Then the memory a node needs does not grow
with the size of its elements, only with their number; the store is the one the driver
opened, and the table only appends, reads and removes through its small interface.

The index is flat where it can be: ticket 0 (every queue entry) maps a position straight
to its element or record, and only entries with a larger ticket (a stack's) take a dict
per position.  At 10^6 entries the nested form alone cost about 200 bytes each; with a
store, the ticket-0 record ids go in an :class:`~skueue.dht.intmap.IntMap` (two flat
arrays, 24-48 bytes per entry).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from skueue.dht.intmap import IntMap
from skueue.dht.storage.interface import EntryStore

Waiter = TypeVar("Waiter")
Element = TypeVar("Element")


@dataclass(slots=True)
class Table(Generic[Waiter, Element]):
    """Entries and waiting Gets at one node.

    ``Waiter`` is whatever the caller needs to answer a Get later (the requester).
    """

    # position -> the ticket-0 entry's element, or its record id in ``store`` (then in
    # an IntMap: a quarter of a dict's memory per entry)
    entries: dict[int, Any] | IntMap = field(default_factory=dict)
    # position -> {ticket: element or record id}, for tickets above 0 (a stack's)
    ticketed: dict[int, dict[int, Any]] = field(default_factory=dict)
    # position -> [(ticket, waiter)]
    waiting: dict[int, list[tuple[int, Waiter]]] = field(default_factory=dict)
    # position -> the Looks waiting for its Put (a queue's: ticket 0)
    looking: dict[int, list[Waiter]] = field(default_factory=dict)
    # Where the elements are, when not here (attached by the driver before any entry).
    store: EntryStore | None = None

    def __len__(self) -> int:
        return len(self.entries) + sum(len(v) for v in self.ticketed.values())

    def attach(self, store: EntryStore) -> None:
        """Keep the elements in ``store`` from now on; only an empty table may move."""
        if len(self):
            raise ValueError("an entry store is attached to an empty table only")
        self.store = store
        self.entries = IntMap()

    def has(self, position: int, ticket: int = 0) -> bool:
        if ticket == 0:
            return position in self.entries
        return ticket in self.ticketed.get(position, ())

    def put(self, position: int, element: Element, ticket: int = 0) -> list[tuple[Waiter, Element]]:
        """Store an entry; returns the waiting Looks it serves, and the waiting Get (at
        most one), if any, that takes it."""
        served = [(w, element) for w in self.looking.pop(position, ())] if self.looking else []
        waiters = self.waiting.get(position)
        if waiters:
            for i, (wanted, waiter) in enumerate(waiters):
                if ticket <= wanted:
                    del waiters[i]
                    if not waiters:
                        del self.waiting[position]
                    return [*served, (waiter, element)]
        if self.has(position, ticket):
            raise ValueError(f"duplicate put at position {position} ticket {ticket}")
        self._store(position, ticket, element)
        return served

    def look(self, position: int, waiter: Waiter) -> tuple[bool, Element | None]:
        """A queue entry's element, left stored; ``(False, None)``: the Look now waits
        here for its Put."""
        if position in self.entries:
            return True, self._element(self.entries[position])
        self.looking.setdefault(position, []).append(waiter)
        return False, None

    def get(self, position: int, waiter: Waiter, ticket: int = 0) -> tuple[bool, Element | None]:
        """Take the entry for a Get; ``(False, None)`` means the Get now waits here."""
        slot = self.ticketed.get(position)
        if slot:
            eligible = [t for t in slot if t <= ticket]
            if eligible:
                stored = slot.pop(max(eligible))
                if not slot:
                    del self.ticketed[position]
                return True, self._take(stored)
        if position in self.entries:  # ticket 0: below every other, so taken last
            return True, self._take(self.entries.pop(position))
        self.waiting.setdefault(position, []).append((ticket, waiter))
        return False, None

    def waiting_count(self) -> int:
        return sum(len(v) for v in self.waiting.values()) + sum(map(len, self.looking.values()))

    def items(self) -> Iterator[tuple[int, int, Element]]:
        for position, ticket, stored in self._stored():
            yield position, ticket, self._element(stored)

    def take_where(self, moves: Callable[[int], bool]) -> list[tuple[int, int, Element]]:
        """Remove and return the entries whose position ``moves`` (a hand-over)."""
        out = []
        for position, ticket, stored in list(self._stored()):
            if moves(position):
                if ticket == 0:
                    del self.entries[position]
                else:
                    slot = self.ticketed[position]
                    del slot[ticket]
                    if not slot:
                        del self.ticketed[position]
                out.append((position, ticket, self._take(stored)))
        return out

    def add_entries(self, entries: Iterable[tuple[int, int, Element]]) -> None:
        """Take over entries handed from another node; none of them may be here already."""
        for position, ticket, element in entries:
            served = self.put(position, element, ticket)
            if served:
                raise ValueError(f"a Get waited for handed-over position {position}")

    def refill(self, entries: Iterable[tuple[int, int, Element]]) -> None:
        """Hold exactly ``entries`` from now on, each stored anew: the table came in a
        state made elsewhere (a replication snapshot from another daemon), whose record
        ids name that daemon's store.  What waits here stays."""
        self.entries = IntMap() if self.store is not None else {}
        self.ticketed = {}
        for position, ticket, element in entries:
            self._store(position, ticket, element)

    def records(self) -> Iterator[int]:
        """The store's record ids of every entry (the driver's check after a restart)."""
        if self.store is not None:
            for _, _, record in self._stored():
                yield record

    # -- where an element is ----------------------------------------------------------

    def _stored(self) -> Iterator[tuple[int, int, Any]]:
        for position, stored in self.entries.items():
            yield position, 0, stored
        for position, slot in self.ticketed.items():
            for ticket, stored in slot.items():
                yield position, ticket, stored

    def _store(self, position: int, ticket: int, element: Element) -> None:
        stored: Any = element
        if self.store is not None:
            stored = self.store.append(position, ticket, element)  # type: ignore[arg-type]
        if ticket == 0:
            self.entries[position] = stored
        else:
            self.ticketed.setdefault(position, {})[ticket] = stored

    def _element(self, stored: Any) -> Element:
        if self.store is None:
            return stored
        return self.store.read(stored)  # type: ignore[return-value]

    def _take(self, stored: Any) -> Element:
        """The element of an entry that leaves the table (its record too)."""
        element = self._element(stored)
        if self.store is not None:
            self.store.remove(stored)
        return element
