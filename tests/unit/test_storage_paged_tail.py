"""The paged engine's tail (skueue.dht.storage.paged, "The tail"): the last appends wait in
memory buffers until a flush hands them to the kernel, elements before slots, so that a
killed process never leaves a slot without its element; reads are served from the
buffers meanwhile; an element bigger than the buffer goes to its page directly; and every
removal's state word is among the ranges a sync (or an eviction) flushes."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from skueue.dht.storage import UnknownRecord
from skueue.dht.storage.paged import PagedEntryStore
from skueue.dht.storage.paged_files import PageCache
from skueue.dht.storage.paged_format import BUFFER_BYTES_MAX, SLOT_BYTES

PAGE = 4096
SLOTS = 16


def open_store(path: Path, **kw: int) -> PagedEntryStore:
    return PagedEntryStore(path, page_bytes=PAGE, index_page_slots=SLOTS, **kw)


def element(i: int, size: int = 100) -> bytes:
    return (f"<{i}>" * size).encode()[:size]


def live_ids(store: PagedEntryStore) -> list[int]:
    return [r for r, _, _ in store.live()]


def test_the_tail_is_read_before_it_reaches_the_kernel(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    ids = [store.append(i, 0, element(i)) for i in range(5)]  # 500 bytes: all in the tail
    assert [store.read(r) for r in ids] == [element(i) for i in range(5)]
    assert len(store) == 5
    with pytest.raises(UnknownRecord):
        store.read(5)
    store.remove(ids[1])  # a removal hands the tail over first
    assert len(store) == 4 and live_ids(store) == [0, 2, 3, 4]
    store.close()


def test_flush_hands_the_tail_to_the_kernel_and_a_kill_keeps_it(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    flushed = [store.append(i, 0, element(i)) for i in range(3)]
    store.flush()
    store.append(9, 0, b"still in the buffer")
    store.abandon()  # kill -9: the page cache survives, the process's memory does not
    again = open_store(tmp_path)
    assert again.recovery.clean, again.recovery.describe()
    assert live_ids(again) == flushed
    assert [again.read(r) for r in flushed] == [element(i) for i in range(3)]
    assert again.append(1, 0, b"x") == 3  # the lost append's id comes again
    again.close()


def test_a_process_that_dies_mid_flush_leaves_no_slot_without_its_element(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The elements go to the kernel before their slots do: if the process dies while
    writing the elements, the slots were not copied yet, and recovery finds a clean log
    without them (not a torn tail, and no corruption)."""
    store = open_store(tmp_path)
    kept = [store.append(i, 0, element(i)) for i in range(2)]
    store.sync()
    for i in range(2, 6):
        store.append(i, 0, element(i))

    def dies(*_: object) -> None:
        raise OSError("killed while writing")

    monkeypatch.setattr(PageCache, "write", dies)
    with pytest.raises(OSError, match="killed"):
        store.flush()
    store.abandon()
    monkeypatch.undo()
    with capture_logs() as logs:
        again = open_store(tmp_path)
    assert again.recovery.clean and again.recovery.cut == (), again.recovery.describe()
    assert logs == []
    assert live_ids(again) == kept
    again.close()


def test_an_element_bigger_than_the_buffer_goes_to_its_page_directly(tmp_path: Path) -> None:
    page = 2 * BUFFER_BYTES_MAX
    store = PagedEntryStore(tmp_path, page_bytes=page, index_page_slots=SLOTS)
    big = bytes(range(256)) * ((BUFFER_BYTES_MAX + 1000) // 256)
    assert len(big) > BUFFER_BYTES_MAX
    ids = [store.append(1, 0, b"before"), store.append(2, 0, big), store.append(3, 0, b"after")]
    assert [store.read(r) for r in ids] == [b"before", big, b"after"]
    store.close()
    again = PagedEntryStore(tmp_path)
    assert again.recovery.clean
    assert [again.read(r) for r in ids] == [b"before", big, b"after"]
    again.close()


@pytest.mark.parametrize("mapped", [2, 16])
def test_every_removal_is_among_the_ranges_flushed(
    tmp_path: Path, mapped: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page cache hides a missed msync from every reopen test, so the index ranges
    flushed by syncs and by evictions (2 mapped pages: reading old records evicts) are
    checked directly: each removed slot's state word must be in one."""
    store = open_store(tmp_path, mapped_pages_max=mapped)
    ids = [store.append(i, 0, element(i)) for i in range(80)]  # 5 index pages
    store.sync()
    flushed: list[tuple[int, int, int]] = []
    real_flush, real_evict = PageCache.flush, PageCache._evict

    def spy_flush(cache: PageCache) -> None:
        if cache.kind == "index":
            flushed.extend((n, lo, hi) for n, (lo, hi) in cache.dirty.items())
        real_flush(cache)

    def spy_evict(cache: PageCache) -> None:
        if cache.kind == "index":
            gone = next(n for n in cache.maps if n != cache.head)
            if gone in cache.dirty:
                low, high = cache.dirty[gone]
                flushed.append((gone, low, high))
        real_evict(cache)

    monkeypatch.setattr(PageCache, "flush", spy_flush)
    monkeypatch.setattr(PageCache, "_evict", spy_evict)
    removed = ids[3:70:3] + [r for r in ids[1:60:7] if r % 3]
    kept = [r for r in ids if r not in removed]
    for k, r in enumerate(removed):
        store.remove(r)
        store.read(kept[(k * 7) % len(kept)])  # maps other index pages
    store.sync()
    for record in removed:
        page, slot = divmod(record, SLOTS)
        at = slot * SLOT_BYTES
        assert any(n == page and lo <= at and at + 4 <= hi for n, lo, hi in flushed), record
    store.close()
