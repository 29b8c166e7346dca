"""The DHT table with an entry store attached (skueue.dht.table): the elements live in the
store, the table keeps only record ids, and every entry that leaves the table leaves the
store too."""

from __future__ import annotations

import pytest

from skueue.dht.storage import MemoryEntryStore
from skueue.dht.table import Table


def test_elements_go_to_the_store_and_come_back_from_it() -> None:
    store: MemoryEntryStore[bytes] = MemoryEntryStore()
    table: Table[str, bytes] = Table()
    table.attach(store)
    assert table.put(5, b"five") == []
    assert table.put(6, b"six") == []
    assert sorted(r for _, r in table.entries.items()) == sorted(r for r, _, _ in store.live())
    assert sorted(table.records()) == sorted(r for r, _, _ in store.live())
    assert table.get(5, "w") == (True, b"five")
    assert [p for _, p, _ in store.live()] == [6]  # taken: gone from the store too
    assert list(table.items()) == [(6, 0, b"six")]
    assert len(table) == len(store) == 1


def test_a_stack_takes_the_largest_ticket_not_above_its_own_through_the_store() -> None:
    store: MemoryEntryStore[bytes] = MemoryEntryStore()
    table: Table[str, bytes] = Table()
    table.attach(store)
    for ticket, element in ((0, b"a"), (5, b"b"), (9, b"c")):
        table.put(7, element, ticket)
    assert table.has(7, 5) and not table.has(7, 4)
    assert table.get(7, "p1", 6) == (True, b"b")
    assert table.get(7, "p2", 3) == (True, b"a")  # ticket 0 is below every other
    assert table.get(7, "p3", 8) == (False, None)  # only ticket 9 is left: waits
    assert table.put(7, b"d", 2) == [("p3", b"d")]  # served at once, never stored
    assert [t for _, _, t in store.live()] == [9]


def test_a_handover_takes_the_entries_out_of_the_store() -> None:
    store: MemoryEntryStore[bytes] = MemoryEntryStore()
    table: Table[str, bytes] = Table()
    table.attach(store)
    for position in range(1, 7):
        table.put(position, f"e{position}".encode(), position % 2)
    moved = table.take_where(lambda p: p > 3)
    assert sorted(moved) == [(4, 0, b"e4"), (5, 1, b"e5"), (6, 0, b"e6")]
    assert sorted(p for _, p, _ in store.live()) == [1, 2, 3]
    other: Table[str, bytes] = Table()
    other.attach(store)
    other.add_entries(moved)
    assert len(store) == 6 and len(other) == 3


def test_a_duplicate_put_and_a_late_attach_are_refused() -> None:
    table: Table[str, bytes] = Table()
    table.put(1, b"x")
    with pytest.raises(ValueError, match="duplicate"):
        table.put(1, b"y")
    with pytest.raises(ValueError, match="empty table"):
        table.attach(MemoryEntryStore())
