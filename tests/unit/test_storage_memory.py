"""The memory engine (skueue.dht.storage.memory): the EntryStore contract, and crashes
that keep exactly what was synced, for the simulators."""

from __future__ import annotations

import pytest

from skueue.dht.storage import EntryStore, MemoryEntryStore, StorageError, UnknownRecord


def test_it_is_an_entry_store_and_keeps_entries_in_append_order() -> None:
    store: MemoryEntryStore[bytes] = MemoryEntryStore()
    assert isinstance(store, EntryStore)
    ids = [store.append(p, t, f"e{p}".encode()) for p, t in [(1, 0), (2, 5), (1, 3)]]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert list(store.live()) == [(ids[0], 1, 0), (ids[1], 2, 5), (ids[2], 1, 3)]
    assert store.read(ids[1]) == b"e2"
    assert len(store) == 3


def test_out_of_order_removal_and_unknown_records() -> None:
    store: MemoryEntryStore[str] = MemoryEntryStore()
    ids = [store.append(p, 0, f"e{p}") for p in range(5)]
    store.remove(ids[3])
    store.remove(ids[0])
    assert [r for r, _, _ in store.live()] == [ids[1], ids[2], ids[4]]
    with pytest.raises(UnknownRecord):
        store.read(ids[3])
    with pytest.raises(KeyError):  # UnknownRecord is a KeyError too
        store.remove(ids[0])
    with pytest.raises(UnknownRecord):
        store.read(99)


def test_a_crash_keeps_exactly_what_was_synced() -> None:
    store: MemoryEntryStore[str] = MemoryEntryStore()
    a = store.append(1, 0, "a")
    b = store.append(2, 0, "b")
    store.sync()
    store.remove(a)  # not synced: comes back
    c = store.append(3, 0, "c")  # not synced: lost
    assert store.unsynced == 2
    store.crash()
    assert list(store.live()) == [(a, 1, 0), (b, 2, 0)]
    assert store.read(a) == "a"
    with pytest.raises(UnknownRecord):
        store.read(c)
    # ids continue from the last synced one, as the paged engine's do after a crash
    assert store.append(4, 0, "d") == c


def test_a_synced_remove_survives_a_crash() -> None:
    store: MemoryEntryStore[str] = MemoryEntryStore()
    a = store.append(1, 0, "a")
    store.remove(a)
    store.sync()
    store.crash()
    assert len(store) == 0 and list(store.live()) == []
    assert store.append(2, 0, "b") == a + 1


def test_close_syncs_and_then_refuses_use() -> None:
    store: MemoryEntryStore[str] = MemoryEntryStore()
    store.append(1, 0, "a")
    store.close()
    assert store.unsynced == 0
    with pytest.raises(StorageError):
        store.append(2, 0, "b")
