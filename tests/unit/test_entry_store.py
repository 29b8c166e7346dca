"""The durable daemon's entry store (skueue.runtime.durability.entry_store): removes wait for the
snapshot after them, a restart keeps exactly what the restored state names, and a
snapshot names records instead of holding elements."""

from __future__ import annotations

import io
from pathlib import Path

import attrs
import pytest

from skueue.core.ops import Redelivered, Structure
from skueue.runtime.durability.entry_store import (
    SnapshotEntryStore,
    attach,
    dump,
    load,
    named_records,
)
from skueue.runtime.errors import DaemonError
from skueue.runtime.limits import Limits
from skueue.sim.cluster import build_cluster

PAGE = 64 * 1024


def open_store(path: Path) -> SnapshotEntryStore:
    return SnapshotEntryStore(path, PAGE, 2)


def test_removes_wait_for_the_snapshot_after_them(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    a, b = store.append(1, 0, b"a"), store.append(2, 0, b"b")
    store.remove(a)
    assert len(store) == 1 and [r for r, _, _ in store.live()] == [b]
    assert store.inner.read(a) == b"a"  # a replay of its Get may still need it
    store.before_snapshot()
    store.after_snapshot()
    assert [r for r, _, _ in store.inner.live()] == [b]
    store.close()


def test_a_restart_keeps_only_the_named_records(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    kept = store.append(1, 0, b"named by the snapshot")
    store.before_snapshot()
    lost = store.append(2, 0, b"appended after it: the replay makes it again")
    store.remove(kept)  # after the snapshot: not applied
    store.inner.sync()  # it reached the disk (an unsynced append may not), unnamed
    store.inner.abandon()  # kill -9
    again = open_store(tmp_path)
    assert again.keep_only([kept]) == 1
    assert [r for r, _, _ in again.inner.live()] == [kept]
    assert again.read(kept) == b"named by the snapshot"
    assert lost not in {r for r, _, _ in again.inner.live()}
    again.close()


def test_a_named_record_the_store_lost_stops_the_start(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append(1, 0, b"x")
    with pytest.raises(DaemonError, match="lost 1 and holds 0 corrupt"):
        store.keep_only([12345])
    store.close()


def test_a_snapshot_names_records_and_comes_back_with_the_store(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    process = attach(build_cluster(["p0"], Structure.QUEUE)["p0"], store)
    element = b"x" * 10_000
    for position in range(1, 51):
        next(iter(process.nodes.values())).store.table("default").put(position, element)
    file = io.BytesIO()
    dump(process, file, store)
    assert len(file.getvalue()) < 50 * len(element) // 10  # the elements are not in it
    restored = load(io.BytesIO(file.getvalue()), store)
    assert sorted(named_records(restored)) == sorted(named_records(process))
    tables = next(iter(restored.nodes.values())).store
    assert tables.entry_store is store and tables.table("jobs").store is store
    table = tables.table("default")
    assert table.store is store and table.get(1, "w") == (True, element)
    with pytest.raises(Exception, match="entry store"):
        load(io.BytesIO(file.getvalue()), None)
    store.close()


def test_a_returned_element_keeps_its_count_and_reason_through_a_snapshot(
    tmp_path: Path,
) -> None:
    """Leases (issue 12): an element that came back carries its delivery count and why;
    its bytes are in the pages like any other, the rest beside the tables."""
    store = open_store(tmp_path)
    process = attach(build_cluster(["p0"], Structure.QUEUE)["p0"], store)
    table = next(iter(process.nodes.values())).store.table("default")
    table.put(1, Redelivered(b"again", 3, "expired"))
    table.put(2, b"plain")
    store.before_snapshot()
    file = io.BytesIO()
    dump(process, file, store)
    store.inner.abandon()  # kill -9 right after the snapshot
    again = open_store(tmp_path)
    restored = load(io.BytesIO(file.getvalue()), again)
    assert again.keep_only(named_records(restored)) == 0
    table = next(iter(restored.nodes.values())).store.table("default")
    assert table.get(1, "w") == (True, Redelivered(b"again", 3, "expired"))
    assert table.get(2, "w") == (True, b"plain")
    assert not again.extras  # taken: nothing of it is left beside the tables
    again.close()


def test_entry_page_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="largest element"):
        attrs.evolve(Limits(), entry_page_bytes=1024)
    with pytest.raises(ValueError, match="at least 2"):
        attrs.evolve(Limits(), entry_pages_mapped_max=1)
    assert Limits().entry_page_bytes >= Limits().value_bytes_max
