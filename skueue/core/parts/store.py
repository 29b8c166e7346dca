"""The DHT store of one node: the entries it is responsible for, and its own DHT
operations still on their way (SPEC §7).

Entries are kept in a :class:`~skueue.dht.table.Table` per queue: every named queue has
its own positions (and, for a stack, tickets), and its keys hash (name, position), so a
node may hold entries of many queues.  When the driver attaches an entry store (a durable
daemon does), every table keeps its elements there.

Own removes wait in ``awaiting`` for their element; own Puts wait in ``unacked_puts``
for their acknowledgement, and own deletes in ``dropping`` for their Drops' (issue 12).
An update phase's first stage waits until all are empty
(:meth:`Store.quiet`), so that no DHT message is overtaken while data moves.  ``owners``
remembers which node answered for which keys, so that the next request goes there
directly (:mod:`skueue.core.parts.key_owners`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from skueue.core.batch import RunGrant
from skueue.core.intake import Assignment
from skueue.core.ops import Item
from skueue.core.parts.key_owners import KeyOwners
from skueue.dht.storage.interface import EntryStore
from skueue.dht.table import Table
from skueue.overlay.labels import NodeRef

Waiter = tuple[NodeRef, int, bool]
"""Who waits at a position for its Put: the requesting node, its op id, and True for a
Drop (answered with an acknowledgement, not the element)."""
QueueTable = Table[Waiter, Item]
# One entry on the move between nodes: (queue, position, ticket, element).
QueueEntry = tuple[str, int, int, Item]


@dataclass(slots=True)
class Clearing:
    """An own delete's Drops: the queue, the positions they clear, and how many are not
    acknowledged yet."""

    queue: str
    removes: RunGrant
    left: int
    op_id: int  # the delete's
    stack: bool

    def covers(self, position: int) -> bool:
        g = self.removes
        if g.levels:
            return any(first <= position < first + n for first, n in g.levels)
        low, high = sorted((g.first, g.position(g.available - 1)))
        return low <= position <= high


@dataclass(slots=True)
class Store:
    tables: dict[str, QueueTable] = field(default_factory=dict)  # by queue name
    # Own removes waiting for their element: op_id -> assignment.
    awaiting: dict[int, Assignment] = field(default_factory=dict)
    # Own Puts not yet acknowledged (op_id -> queue and position): an update phase waits
    # until none is on its way.
    unacked_puts: dict[int, tuple[str, int]] = field(default_factory=dict)
    # Own deletes whose Drops are on their way: op_id -> what they clear.
    dropping: dict[int, Clearing] = field(default_factory=dict)
    # Own stack deletes whose Drops wait for this node's next grants (see VirtualNode).
    deferred_drops: list[Clearing] = field(default_factory=list)
    owners: KeyOwners = field(default_factory=KeyOwners)
    entry_store: EntryStore | None = None  # where every table keeps its elements, if set

    def quiet(self) -> bool:
        """No own Get waits for its element, and no own Put or Drop for its
        acknowledgement."""
        return not self.awaiting and not self.unacked_puts and not self.dropping

    def dropped(self, op_id: int) -> None:
        """One of delete ``op_id``'s Drops was acknowledged."""
        clearing = self.dropping[op_id]
        clearing.left -= 1
        if not clearing.left:
            del self.dropping[op_id]

    def table(self, queue: str) -> QueueTable:
        """The table of ``queue``'s entries here (made on its first entry or Get)."""
        table = self.tables.get(queue)
        if table is None:
            table = self.tables[queue] = Table()
            if self.entry_store is not None:
                table.attach(self.entry_store)
        return table

    def attach(self, entry_store: EntryStore) -> None:
        """Keep the elements in ``entry_store`` from now on (before any entry)."""
        for table in self.tables.values():
            table.attach(entry_store)
        self.entry_store = entry_store

    def has(self, queue: str, position: int, ticket: int) -> bool:
        table = self.tables.get(queue)
        return table is not None and table.has(position, ticket)

    def waits(self, queue: str, position: int) -> bool:
        """A Get waits here for ``queue``'s entry at ``position``."""
        table = self.tables.get(queue)
        return table is not None and position in table.waiting

    def entries(self) -> int:
        return sum(len(t) for t in self.tables.values())

    def waiting_count(self) -> int:
        return sum(t.waiting_count() for t in self.tables.values())

    def items(self) -> Iterator[QueueEntry]:
        for queue, table in self.tables.items():
            for position, ticket, element in table.items():
                yield queue, position, ticket, element

    def take_where(self, moves: Callable[[str, int], bool]) -> list[QueueEntry]:
        """Remove and return the entries whose (queue, position) ``moves`` (a hand-over)."""
        out: list[QueueEntry] = []
        for queue, table in self.tables.items():
            taken = table.take_where(lambda position: moves(queue, position))  # noqa: B023
            out.extend((queue, position, ticket, element) for position, ticket, element in taken)
        return out

    def add_entries(self, entries: Iterable[QueueEntry]) -> None:
        """Take over entries handed from another node; none of them may be here already."""
        for queue, position, ticket, element in entries:
            self.table(queue).add_entries([(position, ticket, element)])

    def records(self) -> Iterator[int]:
        """The entry store's record ids of every entry (the driver's check at a restart)."""
        for table in self.tables.values():
            yield from table.records()
