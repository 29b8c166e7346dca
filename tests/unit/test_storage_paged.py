"""The paged engine (skueue.dht.storage.paged, seed 004): entries survive a reopen exactly,
removal is out of order, consumed pages are deleted from disk, a torn tail is cut, a
corrupt record is refused, another format version is refused, and the element limit is
page_bytes.  Small pages (4 KiB, 16 slots per index page) make every edge cheap to reach."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from skueue.dht.storage import (
    CorruptRecord,
    EntryStore,
    FormatMismatch,
    StorageError,
    StoreLocked,
    UnknownRecord,
)
from skueue.dht.storage.paged import PagedEntryStore
from skueue.dht.storage.paged_files import PageCache
from skueue.dht.storage.paged_format import SLOT_BYTES, VERSION, page_name

PAGE = 4096
SLOTS = 16


def open_store(path: Path, **kw: Any) -> PagedEntryStore:
    return PagedEntryStore(path, page_bytes=PAGE, index_page_slots=SLOTS, **kw)


def element(i: int, size: int = 1000) -> bytes:
    return (f"<{i}>" * size).encode()[:size]


def files(path: Path, kind: str) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.startswith(kind + "-"))


def fill(store: PagedEntryStore, n: int, size: int = 1000) -> list[int]:
    return [store.append(i + 1, i % 3, element(i, size)) for i in range(n)]


def test_reopen_recovers_every_synced_record_exactly(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    assert isinstance(store, EntryStore)
    ids = fill(store, 40)
    assert ids == list(range(40))
    store.close()
    again = open_store(tmp_path)
    assert again.recovery.clean and again.recovery.live == 40
    assert list(again.live()) == [(i, i + 1, i % 3) for i in range(40)]
    assert [again.read(i) for i in ids] == [element(i) for i in range(40)]
    assert again.append(99, 1, b"next") == 40  # ids keep increasing across a reopen
    again.close()


def test_out_of_order_removal_survives_a_reopen(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    ids = fill(store, 30)
    removed = [17, 3, 29, 0, 12, 13]
    for r in removed:
        store.remove(r)
    with pytest.raises(UnknownRecord):
        store.read(17)
    with pytest.raises(UnknownRecord):
        store.remove(3)
    assert len(store) == 24
    store.close()
    again = open_store(tmp_path)
    assert [r for r, _, _ in again.live()] == [r for r in ids if r not in removed]
    assert len(again) == 24
    for r in removed:
        with pytest.raises(UnknownRecord):
            again.read(r)
    assert again.read(14) == element(14)
    again.close()


def test_gc_deletes_consumed_page_files_but_never_the_heads(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    ids = fill(store, 40)  # 4 elements a data page: data pages 0-9; index pages 0-2
    assert files(tmp_path, "data") == [page_name("data", n) for n in range(10)]
    assert files(tmp_path, "index") == [page_name("index", n) for n in range(3)]
    for r in ids[:18]:  # data pages 0-3 fully, page 4 half; index page 0 fully
        store.remove(r)
    assert len(files(tmp_path, "data")) == 10, "nothing is deleted before the removals are synced"
    store.sync()
    assert files(tmp_path, "data") == [page_name("data", n) for n in range(4, 10)]
    assert files(tmp_path, "index") == [page_name("index", n) for n in (1, 2)]
    for r in ids[18:]:
        store.remove(r)
    store.sync()
    # Everything is consumed: only the head pages stay, anchoring the next id and offset.
    assert files(tmp_path, "data") == [page_name("data", 9)]
    assert files(tmp_path, "index") == [page_name("index", 2)]
    store.close()
    again = open_store(tmp_path)
    assert len(again) == 0 and list(again.live()) == []
    assert again.append(1, 0, b"x") == 40
    again.close()


def test_a_removal_out_of_order_frees_a_middle_page(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    fill(store, 12)  # data pages 0, 1, 2
    for r in (4, 6, 5, 7):  # all of page 1, out of order
        store.remove(r)
    store.sync()
    assert files(tmp_path, "data") == [page_name("data", n) for n in (0, 2)]
    assert store.read(8) == element(8) and store.read(3) == element(3)
    store.close()


def test_a_torn_data_tail_is_cut_at_open_with_one_warning(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    fill(store, 10)  # the last record (9) is the second of data page 2
    store.close()
    last = tmp_path / page_name("data", 2)
    os.truncate(last, 1000 + 500)  # the middle of record 9
    with capture_logs() as logs:
        again = open_store(tmp_path)
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [e["event"] for e in warnings] == ["storage.torn_tail_cut"], logs
    assert warnings[0]["cut_records"] == 1 and warnings[0]["first_cut"] == 9
    assert not [e for e in logs if e["log_level"] == "error"]
    report = again.recovery
    assert report.cut == (9,) and report.corrupt == () and not report.clean
    assert report.truncated_files == (page_name("data", 2),)
    assert [r for r, _, _ in again.live()] == list(range(9))
    with pytest.raises(UnknownRecord):
        again.read(9)
    assert again.read(8) == element(8)
    assert again.append(50, 0, b"after") == 9  # the cut id was never durable
    again.close()
    third = open_store(tmp_path)
    assert third.recovery.clean and third.read(9) == b"after"
    third.close()


def test_a_torn_index_slot_is_cut(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    fill(store, 5)
    store.close()
    os.truncate(tmp_path / page_name("index", 0), 4 * SLOT_BYTES + 20)
    with capture_logs() as logs:
        again = open_store(tmp_path)
    assert again.recovery.cut == (4,)
    assert [e["event"] for e in logs] == ["storage.torn_tail_cut"]
    assert len(again) == 4
    again.close()


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x40]))


def test_a_corrupt_record_in_the_middle_is_found_at_open_and_never_returned(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path)
    fill(store, 10)
    store.close()
    flip_byte(tmp_path / page_name("data", 1), 1000 + 123)  # inside record 5
    with capture_logs() as logs:
        again = open_store(tmp_path)
    errors = [e for e in logs if e["log_level"] == "error"]
    assert [e["event"] for e in errors] == ["storage.corrupt_records"], logs
    assert errors[0]["records"] == [5]
    assert again.recovery.corrupt == (5,) and again.recovery.cut == ()
    assert "corrupt=[5](1)" in again.recovery.describe()
    # Its slot is intact: still listed, so the table can report the loss; never read.
    assert 5 in [r for r, _, _ in again.live()]
    with capture_logs() as logs, pytest.raises(CorruptRecord) as raised:
        again.read(5)
    assert raised.value.record == 5 and "crc32" in str(raised.value)
    assert [e["event"] for e in logs] == ["storage.corrupt_record"]
    assert [again.read(r) for r in (4, 6, 9)] == [element(4), element(6), element(9)]
    again.remove(5)
    assert len(again) == 9
    again.close()


def test_corruption_after_open_is_caught_at_read(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    fill(store, 6)
    store.sync()
    flip_byte(tmp_path / page_name("data", 0), 2000 + 7)  # record 2, under the live map
    with pytest.raises(CorruptRecord):
        store.read(2)
    assert store.read(3) == element(3)
    store.close()


def test_a_corrupt_index_slot_in_the_middle_is_unlisted_yet_reported(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    fill(store, 6)
    store.close()
    flip_byte(tmp_path / page_name("index", 0), 2 * SLOT_BYTES + 20)  # record 2's position
    again = open_store(tmp_path)
    assert again.recovery.corrupt == (2,)
    assert [r for r, _, _ in again.live()] == [0, 1, 3, 4, 5]
    with pytest.raises(CorruptRecord):
        again.read(2)
    again.remove(2)  # an operator (or the table) may drop it for good
    with pytest.raises(UnknownRecord):
        again.read(2)
    again.close()


def test_another_format_version_is_refused_with_one_error_line(tmp_path: Path) -> None:
    open_store(tmp_path).close()
    meta_path = tmp_path / "store.meta"
    meta = json.loads(meta_path.read_text())
    meta["version"] = VERSION + 1
    meta_path.write_text(json.dumps(meta))
    with capture_logs() as logs, pytest.raises(FormatMismatch) as raised:
        open_store(tmp_path)
    assert f"version {VERSION + 1}" in str(raised.value)
    assert [e["event"] for e in logs] == ["storage.format_refused"]
    (tmp_path / "store.meta").write_text("not json")
    with pytest.raises(FormatMismatch, match="not a skueue paged store"):
        open_store(tmp_path)


def test_a_version_1_directory_is_still_read_with_its_own_checksum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 2 changed only the checksum (zlib's crc32 to crc32c); a directory written
    by version 1 keeps its version and its checksum, and a corrupt element still fails."""
    import zlib

    import skueue.dht.storage.paged as paged
    from skueue.dht.storage.paged_format import Geometry

    with monkeypatch.context() as patch:
        patch.setattr(paged, "Geometry", lambda page, slots: Geometry(page, slots, 1))
        store = open_store(tmp_path)
        ids = fill(store, 6)
        store.close()
    slot = (tmp_path / page_name("index", 0)).read_bytes()[:SLOT_BYTES]
    assert int.from_bytes(slot[44:48], "little") == zlib.crc32(element(0))
    again = open_store(tmp_path)
    assert again.geometry.version == 1 and again.recovery.clean
    assert [again.read(r) for r in ids] == [element(i) for i in range(6)]
    ids.append(again.append(7, 0, b"appended under version 1"))
    again.close()
    assert json.loads((tmp_path / "store.meta").read_text())["version"] == 1
    with open(tmp_path / page_name("data", 0), "r+b") as f:
        f.seek(10)
        f.write(b"#")
    third = open_store(tmp_path)
    assert third.read(ids[-1]) == b"appended under version 1"
    with pytest.raises(CorruptRecord, match="fails its crc32$"):
        third.read(ids[0])
    third.close()


def test_new_directories_are_the_current_version_with_crc32c(tmp_path: Path) -> None:
    import google_crc32c

    store = open_store(tmp_path)
    store.append(1, 0, element(0))
    store.close()
    assert json.loads((tmp_path / "store.meta").read_text())["version"] == VERSION == 2
    slot = (tmp_path / page_name("index", 0)).read_bytes()[:SLOT_BYTES]
    assert int.from_bytes(slot[44:48], "little") == google_crc32c.value(element(0))


def test_page_files_without_a_meta_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / page_name("data", 0)).write_bytes(b"x")
    with pytest.raises(FormatMismatch, match="no store.meta"):
        open_store(tmp_path)


def test_the_element_limit_is_page_bytes(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    small = store.append(1, 0, b"s")
    full = store.append(2, 0, b"F" * PAGE)  # exactly a page: fits, in a page of its own
    with pytest.raises(ValueError, match=f"element limit page_bytes={PAGE}"):
        store.append(3, 0, b"x" * (PAGE + 1))
    assert store.append(4, 0, b"") == full + 1
    store.close()
    again = open_store(tmp_path)
    assert again.read(full) == b"F" * PAGE and again.read(small) == b"s"
    assert again.read(full + 1) == b""
    again.close()


def test_positions_and_tickets_are_64_bit(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    r = store.append(2**63 - 1, -5, b"edge")
    with pytest.raises(ValueError, match="position="):
        store.append(2**63, 0, b"x")
    store.close()
    again = open_store(tmp_path)
    assert list(again.live()) == [(r, 2**63 - 1, -5)]
    assert again.append(1, 0, b"y") == r + 1  # the refused append took no id
    again.close()


def test_a_directory_is_open_in_one_store_at_a_time(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    with pytest.raises(StoreLocked):
        open_store(tmp_path)
    store.close()
    with pytest.raises(StorageError):
        store.append(1, 0, b"x")
    open_store(tmp_path).close()


def test_few_mapped_pages_still_read_everything(tmp_path: Path) -> None:
    store = open_store(tmp_path, mapped_pages_max=2)
    ids = fill(store, 60, size=700)
    for r in ids[::7]:
        store.remove(r)
    store.sync()
    assert all(store.read(r) == element(r, 700) for r in ids if r % 7)
    store.close()
    again = open_store(tmp_path, mapped_pages_max=2)
    assert len(again) == len([r for r in ids if r % 7])
    again.close()


def test_an_abandoned_store_keeps_what_was_synced(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    synced = fill(store, 8)
    store.remove(synced[2])
    store.sync()
    store.append(100, 0, b"unsynced")
    store.abandon()  # a dead process: no sync
    again = open_store(tmp_path)
    live = {r for r, _, _ in again.live()}
    assert set(synced) - {synced[2]} <= live and synced[2] not in live
    again.close()


def test_the_directory_keeps_its_page_size(tmp_path: Path) -> None:
    open_store(tmp_path).close()
    with capture_logs() as logs:
        store = PagedEntryStore(tmp_path, page_bytes=PAGE * 2)
    assert store.geometry.page_bytes == PAGE
    assert [e["event"] for e in logs] == ["storage.geometry_kept"]
    store.close()
    with pytest.raises(ValueError, match="page_bytes=10"):
        PagedEntryStore(tmp_path / "new", page_bytes=10)


@pytest.mark.parametrize("appended", [1, SLOTS - 3, 2 * SLOTS - 3, SLOTS, 3 * SLOTS])
def test_sync_flushes_every_byte_appended_since_the_last_sync(
    tmp_path: Path, appended: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page cache hides a missed msync from every reopen test, so the ranges each sync
    hands to msync are checked directly: they must cover every slot and element written.
    3 + 13 and 3 + 29 records end exactly at an index page's end, before the next append
    rolls to a new page."""
    store = open_store(tmp_path)
    fill(store, 3, size=100)
    store.sync()
    flushed: dict[str, list[tuple[int, int, int]]] = {"index": [], "data": []}
    real = PageCache.flush

    def spy(cache: PageCache) -> None:
        flushed[cache.kind] += [(n, lo, hi) for n, (lo, hi) in cache.dirty.items()]
        real(cache)

    monkeypatch.setattr(PageCache, "flush", spy)
    fill(store, appended, size=100)
    store.sync()
    for record in range(3, 3 + appended):
        page, slot = divmod(record, SLOTS)
        at = slot * SLOT_BYTES
        assert any(n == page and lo <= at and at + SLOT_BYTES <= hi
                   for n, lo, hi in flushed["index"]), (record, flushed["index"])
    data_bytes = sum(hi - lo for _, lo, hi in flushed["data"])
    assert data_bytes == 100 * appended, flushed["data"]
    store.close()


def test_sync_does_not_flush_a_data_page_it_is_about_to_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer that keeps up removes whole pages between two syncs; writing their bytes
    to disk only to delete them was most of a sync's time.  The removals still reach the
    disk (index flush) before the page file goes, and what is live is still flushed."""
    store = open_store(tmp_path)
    ids = fill(store, 10)  # 4 elements of 1000 bytes per 4 KiB page: pages 0, 1 and 2
    flushed: dict[str, list[int]] = {"index": [], "data": []}
    real = PageCache.flush

    def spy(cache: PageCache) -> None:
        flushed[cache.kind] += sorted(cache.dirty)
        real(cache)

    monkeypatch.setattr(PageCache, "flush", spy)
    for record in ids[:4] + ids[5:6]:  # all of page 0, one record of page 1
        store.remove(record)
    store.sync()
    assert flushed["data"] == [1, 2] and flushed["index"] == [0]
    assert files(tmp_path, "data") == [page_name("data", 1), page_name("data", 2)]
    store.close()
    again = open_store(tmp_path)
    assert [r for r, _, _ in again.live()] == ids[4:5] + ids[6:]
    assert [again.read(r) for r in ids[6:]] == [element(i) for i in range(6, 10)]
    again.close()
