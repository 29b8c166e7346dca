"""The paged engine's files: page files mapped on demand, the meta file, the lock, the log.

Every page file is exactly one page long (created sparse with ``ftruncate``) and mapped
whole (``MAP_SHARED``).  Elements reach a data page through ``pwrite`` from a buffer
(:meth:`PageCache.write`): the kernel then fills whole page-cache pages from it, where a
store into the map would fault on every fresh 4 KiB page and have it zeroed first (0.75
against 0.35 us per KB here).  Index slots and removals are stores into the map.  Both
paths share the page cache, so the map sees what ``pwrite`` wrote.  Durability is
``msync`` of the byte ranges written since the last sync (tracked per page), plus an
``fsync`` of the directory after files were created or deleted.

At most ``mapped_max`` pages of a kind stay mapped; the one mapped longest ago goes first
(the head page, where appends land, never goes).  A queue touches its front and its rear,
so this is as good as an LRU there and costs nothing on a hit.  A page with unsynced
writes is flushed before it is unmapped: an eviction never loses what a later ``sync()``
would have covered.

structlog is imported when a line is logged, not with the module: recovery and corruption
are rare, and importing the storage package should stay as cheap as importing the table.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
from pathlib import Path
from typing import Any

from skueue.dht.storage.interface import StoreLocked
from skueue.dht.storage.paged_format import parse_page_name

PAGESIZE = mmap.PAGESIZE


def logger() -> Any:
    import structlog

    return structlog.get_logger("skueue.storage")


def list_pages(directory: Path) -> dict[str, list[int]]:
    """The page numbers on disk, by kind, in order."""
    found: dict[str, list[int]] = {}
    for name in os.listdir(directory):
        parsed = parse_page_name(name)
        if parsed is not None:
            found.setdefault(parsed[0], []).append(parsed[1])
    return {kind: sorted(numbers) for kind, numbers in found.items()}


def anonymous_buffer(size: int) -> mmap.mmap:
    """Scratch memory for appends not yet handed to the kernel.  An anonymous map, not a
    bytearray: a slice store into a bytearray costs 2.5 times as much (CPython 3.11)."""
    return mmap.mmap(-1, size)


def sync_directory(directory: Path) -> None:
    """Make file creations, deletions and renames in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def write_file_durably(path: Path, raw: bytes) -> None:
    """Write, fsync, rename into place, fsync the directory: all or nothing."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, raw)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    sync_directory(path.parent)


def lock_directory(path: Path) -> int:
    """An exclusive lock on ``path`` (created if missing) for as long as the fd is open."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreLocked(f"{path.parent} is open in another store") from None
    return fd


def unlock(fd: int) -> None:
    os.close(fd)  # closing the last fd of the open file releases the flock


class PageCache:
    """The page files of one kind (index or data) in one directory."""

    __slots__ = (
        "directory", "kind", "page_bytes", "mapped_max", "maps", "dirty", "existing",
        "head", "truncated", "directory_changed", "_fd", "_fd_number",
    )  # fmt: skip

    def __init__(self, directory: Path, kind: str, page_bytes: int, mapped_max: int) -> None:
        if mapped_max < 2:
            raise ValueError(f"mapped_pages_max={mapped_max} must be at least 2")
        self.directory = directory
        self.kind = kind
        self.page_bytes = page_bytes
        self.mapped_max = mapped_max
        self.maps: dict[int, mmap.mmap] = {}
        self.dirty: dict[int, list[int]] = {}  # page -> [low, high) written since the sync
        self.existing: set[int] = set()
        self.head = -1  # never evicted
        self.truncated: list[str] = []  # files found shorter than a page and extended
        self.directory_changed = False
        self._fd = -1  # open for write(): the file of page _fd_number
        self._fd_number = -1

    def path(self, number: int) -> Path:
        return self.directory / f"{self.kind}-{number:012d}.page"

    def get(self, number: int) -> mmap.mmap:
        """The mapped page ``number``, which must exist."""
        m = self.maps.get(number)
        return m if m is not None else self._map(number, create=False)

    def create(self, number: int) -> mmap.mmap:
        if number in self.existing:
            return self.get(number)
        self.directory_changed = True
        return self._map(number, create=True)

    def touch(self, number: int, low: int, high: int) -> None:
        """Bytes ``[low, high)`` of page ``number`` were written: flush them at sync."""
        span = self.dirty.get(number)
        if span is None:
            self.dirty[number] = [low, high]
        else:
            if low < span[0]:
                span[0] = low
            if high > span[1]:
                span[1] = high

    def write(self, number: int, offset: int, buffer: bytes | mmap.mmap, length: int) -> None:
        """``pwrite`` the first ``length`` bytes of ``buffer`` at ``offset`` of page
        ``number`` (module docstring); ``touch`` is the caller's, at its next sync."""
        if number != self._fd_number:
            self._close_fd()
            self._fd = os.open(self.path(number), os.O_WRONLY)
            self._fd_number = number
        with memoryview(buffer) as view:
            done = 0
            while done < length:
                done += os.pwrite(self._fd, view[done:length], offset + done)

    def flush(self) -> None:
        """msync every byte range written since the last flush."""
        for number, (low, high) in list(self.dirty.items()):
            m = self.maps.get(number)
            if m is not None:
                start = low - low % PAGESIZE
                m.flush(start, high - start)
        self.dirty.clear()

    def delete(self, number: int) -> None:
        """Unmap (unflushed: its contents no longer matter) and delete page ``number``."""
        m = self.maps.pop(number, None)
        if m is not None:
            m.close()
        self.dirty.pop(number, None)
        if number == self._fd_number:
            self._close_fd()
        self.existing.discard(number)
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path(number))
        self.directory_changed = True

    def fsync_all(self) -> None:
        """fsync every page file of this kind, whoever wrote it (used at open, before any
        page is deleted: what a dead process left in the page cache must reach the disk
        before a deletion that relies on it does)."""
        for number in sorted(self.existing):
            fd = os.open(self.path(number), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        """Unmap everything; callers flush first if they want the writes durable."""
        for m in self.maps.values():
            m.close()
        self.maps.clear()
        self.dirty.clear()
        self._close_fd()

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = self._fd_number = -1

    def _map(self, number: int, create: bool) -> mmap.mmap:
        path = self.path(number)
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        try:
            size = os.fstat(fd).st_size
            if size < self.page_bytes:
                if not create:
                    self.truncated.append(path.name)
                os.ftruncate(fd, self.page_bytes)  # sparse: costs no disk until written
            m = mmap.mmap(fd, self.page_bytes)
        finally:
            os.close(fd)
        self.existing.add(number)
        if len(self.maps) >= self.mapped_max:
            self._evict()
        self.maps[number] = m
        return m

    def _evict(self) -> None:
        for number in self.maps:
            if number != self.head:
                span = self.dirty.pop(number, None)
                m = self.maps.pop(number)
                if span is not None:
                    start = span[0] - span[0] % PAGESIZE
                    m.flush(start, span[1] - start)
                m.close()
                return
