"""The replica's log keeps only terms of what its disk holds, when it has a reader
(replication/log.py): a daemon's log must not sit in memory twice."""

from __future__ import annotations

from collections.abc import Sequence

from skueue.replication.config import Config
from skueue.replication.log import RaftLog
from skueue.replication.messages import Entry

CONFIG = Config.of(["a"])


class Disk:
    """A reader over a list of entries (index 1 first), counting what it was asked."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.reads: list[tuple[int, int]] = []

    def read_entries(self, first: int, last: int, bytes_max: int) -> Sequence[Entry]:
        self.reads.append((first, last))
        out: list[Entry] = []
        size = 0
        for entry in self.entries[first - 1 : last]:
            size += entry.size()
            if out and size > bytes_max:
                break
            out.append(entry)
        return out


def data(term: int, n: int) -> Entry:
    return Entry(term, "data", bytes([n]) * 10)


def test_persisted_entries_leave_memory_and_are_read_back() -> None:
    disk = Disk()
    log = RaftLog(0, 0, CONFIG, reader=disk)
    entries = [data(1, n) for n in range(1, 6)]
    log.append(entries)
    assert len(log.held) == 5 and not disk.reads  # not on disk yet: held
    disk.entries = list(entries)
    log.persisted = 3
    assert log.held == entries[3:] and log.stable == 3
    assert log.between(2, 1 << 20, 10) == tuple(entries[1:])
    assert disk.reads == [(2, 3)]  # only what the disk has is read from it
    assert [log.term_at(i) for i in range(6)] == [0, 1, 1, 1, 1, 1]
    assert log.entry(1) == entries[0]


def test_the_byte_limit_holds_across_disk_and_memory() -> None:
    disk = Disk()
    log = RaftLog(0, 0, CONFIG, reader=disk)
    entries = [data(1, n) for n in range(1, 6)]  # 26 bytes each by Entry.size
    log.append(entries)
    disk.entries = list(entries)
    log.persisted = 2
    assert log.between(1, 60, 10) == tuple(entries[:2])  # a third would pass 60
    assert log.between(2, 60, 10) == tuple(entries[1:3])  # one from disk, one held
    assert log.between(1, 0, 10) == (entries[0],)  # at least one


def test_a_truncation_below_the_disk_mark_keeps_terms_right() -> None:
    disk = Disk()
    log = RaftLog(0, 0, CONFIG, reader=disk)
    entries = [data(1, n) for n in range(1, 6)]
    log.append(entries)
    disk.entries = list(entries)
    log.persisted = 5
    log.truncate_from(3)
    assert log.last_index == 2 and log.stable == 2 and log.held == []
    fresh = [data(2, 9), data(2, 10)]
    log.append(fresh)
    assert log.held == fresh and log.term_at(3) == 2 and log.persisted == 2
    disk.entries = entries[:2] + fresh
    assert log.between(1, 1 << 20, 10) == tuple(entries[:2] + fresh)


def test_compaction_and_a_start_from_disk_without_data() -> None:
    disk = Disk()
    disk.entries = [data(1, n) for n in range(1, 6)]
    bare = [Entry(e.term, e.kind) for e in disk.entries]  # the data is on disk only
    log = RaftLog(0, 0, CONFIG, bare, reader=disk)
    assert log.held == [] and log.entry(4) == disk.entries[3]
    log.compact(3)
    assert (log.snapshot_index, log.last_index, log.term_at(3)) == (3, 5, 1)
    assert log.between(4, 1 << 20, 10) == tuple(disk.entries[3:])


def test_without_a_reader_everything_stays_in_memory() -> None:
    log = RaftLog(0, 0, CONFIG)
    entries = [data(1, n) for n in range(1, 4)]
    log.append(entries)
    log.persisted = 3
    assert log.held == entries and log.between(1, 1 << 20, 10) == tuple(entries)
