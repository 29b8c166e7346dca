"""Opening a paged store: scan the index, cut the torn tail, find corruption, collect pages.

Theory of operation: every slot from the first index page on is classified in record
order.  A *good* slot is a removed one, or a live one whose slot checksum and element
checksum both hold.  Everything after the last good slot is the torn tail: appends whose
bytes did not all reach the disk before a crash (the last sync did not cover them, since a
sync flushes data before index and both before returning).  They are cut (their slots
zeroed, their ids handed out again) and reported in one warning line.  A bad slot *before*
a good one cannot be an unfinished append: it is corruption, reported in one error line.
A corrupt record whose slot is intact is still live (``live()`` lists it, ``read`` raises
``CorruptRecord``), so the table can report the loss instead of never knowing; one whose
slot is unreadable is not listed, and ``read`` of its id raises ``CorruptRecord`` too.

What the scan read may be only in the page cache (a dead process's last writes): every
page file is fsynced before a page is deleted on the strength of it.  Then pages past the
tail and pages whose records are all removed are deleted, except the head pages, which
anchor the next record id and the next data offset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from skueue.dht.storage.interface import RecoveryReport
from skueue.dht.storage.paged_files import PageCache, list_pages, logger, sync_directory
from skueue.dht.storage.paged_format import (
    BODY_OFFSET,
    DATA_KIND,
    EMPTY,
    INDEX_KIND,
    LIVE,
    REMOVED,
    SLOT,
    SLOT_BYTES,
)

ZERO_SLOT = bytes(SLOT_BYTES)


@dataclass(slots=True)
class Recovered:
    """The state a store starts from, besides the maps in its page caches."""

    next_record: int = 0
    data_head: int = 0
    write_offset: int = 0
    live: int = 0
    data_live: dict[int, int] = field(default_factory=dict)
    index_live: dict[int, int] = field(default_factory=dict)  # corrupt slots pin too
    corrupt_unlisted: set[int] = field(default_factory=set)
    report: RecoveryReport = field(default_factory=RecoveryReport)


@dataclass(slots=True)
class _Scan:
    out: Recovered
    slots: int
    crc: Callable[[bytes], int]  # the directory's checksum (by its format version)
    removed_seen: int = 0
    last_good: int = -1
    head_end: tuple[int, int] | None = None  # (data page, end offset) of the last good body
    suspects: list[tuple[str, int, int]] = field(default_factory=list)  # (why, record, page)
    corrupt: list[int] = field(default_factory=list)


def recover(
    directory: Path, index: PageCache, data: PageCache, checksum: Callable[[bytes], int]
) -> Recovered:
    pages = list_pages(directory)
    index.existing = set(pages.get(INDEX_KIND, []))
    data.existing = set(pages.get(DATA_KIND, []))
    slots = index.page_bytes // SLOT_BYTES
    scan = _Scan(Recovered(), slots, checksum)
    for number in sorted(index.existing):
        _scan_page(scan, index, data, number, slots)
    out = scan.out
    cut = [record for why, record, _ in scan.suspects if why != "empty"]
    for _, record, _ in scan.suspects:
        _zero_slot(index, record, slots)
    if scan.last_good >= 0:
        out.next_record = scan.last_good + 1
    elif index.existing:
        out.next_record = min(index.existing) * slots
    if scan.head_end is not None:
        out.data_head, out.write_offset = scan.head_end
    elif data.existing:
        out.data_head = max(data.existing) + 1
    index.head, data.head = out.next_record // slots, out.data_head
    index.create(index.head)
    data.create(data.head)
    index.flush()
    index.fsync_all()
    data.fsync_all()
    orphans = _collect(index, out.index_live) + _collect(data, out.data_live)
    if orphans or index.directory_changed or data.directory_changed:
        sync_directory(directory)
    index.directory_changed = data.directory_changed = False
    out.report = RecoveryReport(
        live=out.live,
        removed_seen=scan.removed_seen,
        cut=tuple(cut),
        corrupt=tuple(scan.corrupt),
        truncated_files=tuple(index.truncated + data.truncated),
        orphan_files=tuple(orphans),
        next_record=out.next_record,
    )
    _log(directory, out.report)
    return out


def _scan_page(scan: _Scan, index: PageCache, data: PageCache, number: int, slots: int) -> None:
    m = index.get(number)
    first = number * slots
    for slot in range(slots):
        at = slot * SLOT_BYTES
        record = first + slot
        state, crc, stored, _, _, page, offset, length, element_crc = SLOT.unpack_from(m, at)
        body_ok = stored == record and scan.crc(m[at + BODY_OFFSET : at + SLOT_BYTES]) == crc
        if state == REMOVED:
            scan.removed_seen += 1
            _good(scan, record, (page, offset + length) if body_ok else None)
        elif state == LIVE and body_ok:
            if _element_ok(scan, data, page, offset, length, element_crc):
                _good(scan, record, (page, offset + length))
                _count_live(scan, record, page)
            else:
                scan.suspects.append(("data", record, page))
        elif state == EMPTY and m[at : at + SLOT_BYTES] == ZERO_SLOT:
            if m[at:].count(0) == len(m) - at:
                return  # the rest of the page was never written
            scan.suspects.append(("empty", record, -1))
        else:
            scan.suspects.append(("slot", record, -1))


def _element_ok(
    scan: _Scan, data: PageCache, page: int, offset: int, length: int, element_crc: int
) -> bool:
    if offset + length > data.page_bytes:
        return False
    if page not in data.existing:
        return length == 0 and element_crc == 0
    return scan.crc(data.get(page)[offset : offset + length]) == element_crc


def _good(scan: _Scan, record: int, end: tuple[int, int] | None) -> None:
    """A good slot: every suspect before it is corruption, not a torn tail."""
    out = scan.out
    for why, suspect, page in scan.suspects:
        scan.corrupt.append(suspect)
        if why == "data":  # the slot is intact: still live, and read() will say corrupt
            _count_live(scan, suspect, page)
        else:
            out.corrupt_unlisted.add(suspect)
            _pin(scan, suspect)
    scan.suspects.clear()
    scan.last_good = record
    if end is not None:
        scan.head_end = end


def _count_live(scan: _Scan, record: int, data_page: int) -> None:
    out = scan.out
    out.live += 1
    out.data_live[data_page] = out.data_live.get(data_page, 0) + 1
    _pin(scan, record)


def _pin(scan: _Scan, record: int) -> None:
    """The record's index page holds something not removed: it may not be collected."""
    page = record // scan.slots
    scan.out.index_live[page] = scan.out.index_live.get(page, 0) + 1


def _zero_slot(index: PageCache, record: int, slots: int) -> None:
    number, at = divmod(record, slots)
    at *= SLOT_BYTES
    index.get(number)[at : at + SLOT_BYTES] = ZERO_SLOT
    index.touch(number, at, at + SLOT_BYTES)


def _collect(cache: PageCache, live: dict[int, int]) -> list[str]:
    """Delete the pages with nothing live (past the tail, or all removed) but the head."""
    gone = []
    for number in sorted(cache.existing):
        if number != cache.head and not live.get(number):
            gone.append(cache.path(number).name)
            cache.delete(number)
    return gone


def _log(directory: Path, report: RecoveryReport) -> None:
    if report.cut or report.truncated_files:
        logger().warning(
            "storage.torn_tail_cut",
            directory=str(directory),
            cut_records=len(report.cut),
            first_cut=report.cut[0] if report.cut else None,
            truncated_files=list(report.truncated_files),
            next_record=report.next_record,
        )
    if report.corrupt:
        logger().error(
            "storage.corrupt_records",
            directory=str(directory),
            records=list(report.corrupt[:20]),
            count=len(report.corrupt),
            hint="read() of these raises CorruptRecord; live() lists those whose slot is intact",
        )
