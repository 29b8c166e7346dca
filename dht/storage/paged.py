"""The durable engine: an append-only paged log in memory-mapped files (seed 004, BigQueue).

Theory of operation.  A store is one directory:

    store.meta                 JSON: magic, format version, page_bytes, index_page_slots
    store.lock                 flock'ed while a store has the directory open
    index-000000000000.page    index_page_slots slots of 48 bytes, slot r % slots of record r
    data-000000000000.page     page_bytes of elements, packed back to back, no header

Record ``r`` lives in slot ``r % index_page_slots`` of index page ``r // index_page_slots``
(so a read is two map lookups and no search).  A slot holds the state word (EMPTY, LIVE,
REMOVED), a checksum of the rest of the slot, and the record id, position, ticket, data
page, offset, length and checksum of the element (layout in :mod:`~.paged_format`; crc32c,
or zlib's crc32 in a version 1 directory).  An append
copies the element to the end of the head data page (a new page when it does not fit,
so an element may be at most ``page_bytes``), then fills the next slot.  A remove
rewrites only the state word, in any order.  Nothing is ever rewritten in a data page.

The tail.  The last appends are held in memory, not in the maps: their elements in a
buffer of up to 256 KiB (``BUFFER_BYTES_MAX``), their slots in a buffer of up to 4096 slots
(``PENDING_SLOTS_MAX``).  When either is full, and before a sync, a roll to a new head
page, a removal of one of them or ``flush()``, the elements are handed to the kernel in one
``pwrite`` and then the slots are copied into the index map.  A store into a fresh page of
the map costs a page fault and the zeroing of a 4 KiB page; ``pwrite`` fills whole pages
and costs half as much per KB.  The order (elements, then slots) keeps what a killed process
leaves behind whole: never a slot whose element the kernel does not have.  What is still
in the buffers when the process dies is lost, as an unsynced append may be anyway; a read
of it is served from the buffers.

``sync()`` is msync of the ranges written since the last sync, data before index, then
garbage collection: a data page whose records are all removed and an index page whose
slots are all removed are deleted (never the head pages, which anchor the next offset and
the next record id), then the directory is fsynced.  Deleting only after the removals are
durable means a crash can never leave a live slot pointing at a deleted page.

Opening scans the index (:mod:`~.paged_recovery`): the torn tail is cut and reported in
one warning line, corruption before the tail in one error line, and ``recovery`` holds the
``RecoveryReport``.  Reads verify the element's crc and raise ``CorruptRecord`` rather
than return wrong bytes.  A directory of another format version is refused.

Single-threaded, like the daemon that owns it (one owner per process).  The daemon calls
``flush()`` after every step (``runtime/durability/entry_store.py``), so that a process crash leaves
each finished step's appends in the page cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from skueue.dht.storage.interface import (
    CorruptRecord,
    FormatMismatch,
    RecoveryReport,
    StorageError,
    UnknownRecord,
)
from skueue.dht.storage.paged_files import (
    PageCache,
    anonymous_buffer,
    lock_directory,
    logger,
    read_file,
    sync_directory,
    unlock,
    write_file_durably,
)
from skueue.dht.storage.paged_format import (
    BODY,
    BODY_OFFSET,
    BUFFER_BYTES_MAX,
    DATA_KIND,
    HEAD,
    INDEX_KIND,
    INDEX_PAGE_SLOTS_DEFAULT,
    LIVE,
    LOCK_NAME,
    MAPPED_PAGES_MAX_DEFAULT,
    META_NAME,
    PAGE_BYTES_DEFAULT,
    PENDING_SLOTS_MAX,
    REMOVED,
    SLOT,
    SLOT_BYTES,
    STATE,
    STATE_AND_ELEMENT,
    STATE_AND_PAGE,
    Geometry,
    decode_meta,
    element_too_big,
    encode_meta,
)
from skueue.dht.storage.paged_recovery import recover

if TYPE_CHECKING:
    from mmap import mmap

__all__ = ["PAGE_BYTES_DEFAULT", "INDEX_PAGE_SLOTS_DEFAULT", "PagedEntryStore"]


class PagedEntryStore:
    """Entries in memory-mapped page files; see the module's theory of operation."""

    # Slots, not a dict: past 30 attributes CPython 3.11 stops sharing an instance dict's
    # keys, and every attribute access on the hot paths became a dict lookup.
    __slots__ = (
        "directory", "geometry", "recovery", "_lock", "_closed", "_page_bytes", "_slots",
        "_crc", "_index", "_data", "_index_maps", "_data_maps", "_next", "_live",
        "_data_live", "_index_live", "_corrupt", "_collectable", "_data_head", "_data_map",
        "_write_offset", "_data_synced", "_index_head", "_index_map", "_index_synced",
        "_buffer_bytes", "_pending_max", "_buffer", "_slot_buffer", "_buffer_base",
        "_flushed", "_buffer_end", "_slot_end",
    )  # fmt: skip

    def __init__(
        self,
        directory: str | Path,
        page_bytes: int | None = None,
        index_page_slots: int | None = None,
        mapped_pages_max: int = MAPPED_PAGES_MAX_DEFAULT,
    ) -> None:
        """Open (or create) the store in ``directory``.  ``page_bytes`` (default
        ``PAGE_BYTES_DEFAULT``, 32 MiB) and ``index_page_slots`` (default 65536) apply to a
        new directory; an existing one keeps its own, with a warning if they differ."""
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        wanted = Geometry(
            PAGE_BYTES_DEFAULT if page_bytes is None else page_bytes,
            INDEX_PAGE_SLOTS_DEFAULT if index_page_slots is None else index_page_slots,
        )
        explicit = page_bytes is not None or index_page_slots is not None
        self.geometry = _open_geometry(self.directory, wanted, explicit)
        self._lock = lock_directory(self.directory / LOCK_NAME)
        try:
            self._open(mapped_pages_max)
        except BaseException:
            unlock(self._lock)
            raise

    def _open(self, mapped_pages_max: int) -> None:
        g = self.geometry
        self._page_bytes = g.page_bytes
        self._slots = g.index_page_slots
        self._crc = g.checksum
        self._index = PageCache(self.directory, INDEX_KIND, g.index_page_bytes, mapped_pages_max)
        self._data = PageCache(self.directory, DATA_KIND, g.page_bytes, mapped_pages_max)
        self._index_maps = self._index.maps  # the same dicts, looked up inline on hot paths
        self._data_maps = self._data.maps
        state = recover(self.directory, self._index, self._data, g.checksum)
        self.recovery: RecoveryReport = state.report
        self._next = state.next_record
        self._live = state.live
        self._data_live = state.data_live
        self._index_live = state.index_live
        self._corrupt = state.corrupt_unlisted
        self._collectable: set[tuple[str, int]] = set()
        # The head pages, and where the bytes written since the last sync begin in them.
        self._data_head = state.data_head
        self._data_map = self._data.get(state.data_head)
        self._write_offset = self._data_synced = state.write_offset
        self._index_head = self._next // self._slots
        self._index_map = self._index.get(self._index_head)
        self._index_synced = (self._next % self._slots) * SLOT_BYTES
        # The tail not yet handed to the kernel (see "The tail" in the module docstring):
        # records [_flushed, _next), their elements at [_buffer_base, _write_offset) of the
        # head data page, in _buffer, and their slots in _slot_buffer.
        self._buffer_bytes = min(BUFFER_BYTES_MAX, g.page_bytes)
        self._pending_max = min(PENDING_SLOTS_MAX, g.index_page_slots)
        self._buffer = anonymous_buffer(self._buffer_bytes)
        self._slot_buffer = anonymous_buffer(self._pending_max * SLOT_BYTES)
        self._buffer_base = self._write_offset
        self._flushed = self._next
        self._buffer_end = self._slot_end = 0
        self._closed = False
        self._bound_tail()

    # -- the interface --------------------------------------------------------------------

    def append(self, position: int, ticket: int, element: bytes) -> int:
        size = len(element)
        offset = self._write_offset
        record = self._next
        # One test each for "the buffer is full, the head data page is full, the store
        # is closed" and "the slot buffer is full, the head index page is full".
        if offset + size > self._buffer_end or record >= self._slot_end:
            return self._append_slowly(position, ticket, element)
        crc = self._crc
        try:
            element_crc = crc(element)
            body = BODY.pack(record, position, ticket, self._data_head, offset, size, element_crc)
        except Exception as e:  # struct.error for an int out of range, TypeError: not bytes
            raise ValueError(f"cannot store position={position} ticket={ticket}: {e}") from None
        at = offset - self._buffer_base
        self._buffer[at : at + size] = element
        at = (record - self._flushed) * SLOT_BYTES
        slots = self._slot_buffer
        slots[at + BODY_OFFSET : at + SLOT_BYTES] = body
        HEAD.pack_into(slots, at, LIVE, crc(body))
        self._write_offset = offset + size
        self._next = record + 1
        return record

    def read(self, record: int) -> bytes:
        if record >= self._flushed:
            return self._read_tail(record)
        number, slot = divmod(record, self._slots)
        m = self._index_maps.get(number)
        if m is None:
            m = self._index_page(record)
        state, page, offset, size, element_crc = STATE_AND_ELEMENT.unpack_from(m, slot * SLOT_BYTES)
        if state != LIVE or (self._corrupt and record in self._corrupt):
            raise self._unreadable(record)
        data = self._data_maps.get(page)
        if data is None:
            if page not in self._data.existing:
                raise self._found_corrupt(record, f"its data page {page} is missing")
            data = self._data.get(page)
        # The element's checksum covers its bytes; a damaged slot shows as a mismatch too
        # (other offset, length or crc), and the slots' own checksum was checked at open.
        element = data[offset : offset + size]
        if self._crc(element) != element_crc:
            name = self.geometry.checksum_name
            raise self._found_corrupt(record, f"its element (data page {page}) fails its {name}")
        return element

    def remove(self, record: int) -> None:
        if record >= self._flushed:
            self._flush_tail()  # a removal is a store into the map: the slot must be there
        number, slot = divmod(record, self._slots)
        m = self._index_maps.get(number)
        if m is None:
            m = self._index_page(record)
        at = slot * SLOT_BYTES
        state, page = STATE_AND_PAGE.unpack_from(m, at)
        if self._corrupt and record in self._corrupt:
            self._corrupt.discard(record)  # unreadable slot: never counted live
        elif state != LIVE:
            raise UnknownRecord(record)
        else:
            self._live -= 1
            left = self._data_live[page] - 1
            self._data_live[page] = left
            if not left and page != self._data_head:
                self._collectable.add((DATA_KIND, page))
        STATE.pack_into(m, at, REMOVED)
        span = self._index.dirty.get(number)  # PageCache.touch, inlined: the hot path
        if span is None:
            self._index.dirty[number] = [at, at + 4]
        elif at < span[0]:
            span[0] = at
        elif at + 4 > span[1]:
            span[1] = at + 4
        left = self._index_live[number] - 1
        self._index_live[number] = left
        if not left and number != self._index_head:
            self._collectable.add((INDEX_KIND, number))

    def live(self) -> Iterator[tuple[int, int, int]]:
        """Live records in append order (corrupt ones whose slot is intact included).
        Each index page is read whole before its records are yielded."""
        self._check_open()
        self._flush_tail()
        for number in sorted(self._index.existing):
            if number not in self._index.existing:
                continue  # collected by a sync() while the caller iterated
            found = []
            m = self._index.get(number)
            first = number * self._slots
            for slot in range(min(self._slots, self._next - first)):
                at = slot * SLOT_BYTES
                state, _, _, position, ticket, _, _, _, _ = SLOT.unpack_from(m, at)
                if state == LIVE and first + slot not in self._corrupt:
                    found.append((first + slot, position, ticket))
            yield from found

    def flush(self) -> None:
        """Hand every append so far to the kernel, without waiting for the disk: a process
        that dies after this loses none of them (a power loss still may; ``sync`` is what
        makes them durable)."""
        self._check_open()
        self._flush_tail()

    def sync(self) -> None:
        self._check_open()
        self._flush_tail()
        if self._write_offset > self._data_synced:
            self._data.touch(self._data_head, self._data_synced, self._write_offset)
        self._skip_collected_data()
        self._data.flush()
        self._data_synced = self._write_offset
        # Up to the end of the head page when the last append filled it (the next append
        # rolls to a new page; this one's slots must be flushed all the same).
        end = (self._next - self._index_head * self._slots) * SLOT_BYTES
        if end > self._index_synced:
            self._index.touch(self._index_head, self._index_synced, end)
        self._index.flush()
        self._index_synced = end
        self._collect()
        if self._index.directory_changed or self._data.directory_changed:
            sync_directory(self.directory)
            self._index.directory_changed = self._data.directory_changed = False

    def close(self) -> None:
        if self._closed:
            return
        self.sync()
        self._release()

    def __len__(self) -> int:
        return self._live + self._next - self._flushed

    # -- beyond the interface -------------------------------------------------------------

    def abandon(self) -> None:
        """Let go without syncing, as a process that dies would: what the kernel already
        has in its page cache may still reach the disk; the tail still in this process's
        buffers (appends since the last flush) is lost; nothing else is promised."""
        if not self._closed:
            self._release()

    @property
    def next_record(self) -> int:
        return self._next

    def page_files(self) -> dict[str, list[int]]:
        """The page numbers on disk by kind (for tests and operators)."""
        return {INDEX_KIND: sorted(self._index.existing), DATA_KIND: sorted(self._data.existing)}

    def describe(self) -> str:
        return (
            f"PagedEntryStore {self.directory} live={len(self)} next={self._next} "
            f"data_pages={len(self._data.existing)} index_pages={len(self._index.existing)}"
        )

    def __enter__(self) -> PagedEntryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- inside ---------------------------------------------------------------------------

    def _index_page(self, record: int) -> mmap:
        """The map of ``record``'s index page, off the hot path (not mapped now)."""
        if self._closed:
            raise StorageError("the store is closed")
        number = record // self._slots
        if not 0 <= record < self._next or number not in self._index.existing:
            raise UnknownRecord(record)
        return self._index.get(number)

    def _unreadable(self, record: int) -> StorageError:
        if record in self._corrupt:
            return CorruptRecord(record, "its index slot failed its checksum at open")
        return UnknownRecord(record)

    # -- the tail -------------------------------------------------------------------------

    def _append_slowly(self, position: int, ticket: int, element: bytes) -> int:
        """An append that does not fit in the tail: hand the tail to the kernel, roll to
        new head pages if needed, then append (to the page directly if the element is
        bigger than the buffer)."""
        self._check_open()
        size = len(element)
        if size > self._page_bytes:
            raise element_too_big(size, self._page_bytes)
        self._flush_tail()
        if self._write_offset + size > self._page_bytes:
            self._roll_data()
        if self._next // self._slots != self._index_head:
            self._roll_index()
        self._bound_tail()
        if size <= self._buffer_bytes:
            return self.append(position, ticket, element)
        record, offset = self._next, self._write_offset
        crc = self._crc
        try:
            element_crc = crc(element)
            body = BODY.pack(record, position, ticket, self._data_head, offset, size, element_crc)
        except Exception as e:  # as in append
            raise ValueError(f"cannot store position={position} ticket={ticket}: {e}") from None
        self._data.write(self._data_head, offset, element, size)
        self._slot_buffer[BODY_OFFSET:SLOT_BYTES] = body  # the tail was flushed: slot 0
        HEAD.pack_into(self._slot_buffer, 0, LIVE, crc(body))
        self._write_offset = self._buffer_base = offset + size
        self._next = record + 1
        self._bound_tail()
        return record

    def _read_tail(self, record: int) -> bytes:
        """A record of the tail: its slot and (but for a big one) its element are still
        in the buffers.  Every record there is live: a removal flushes the tail first."""
        self._check_open()
        if record >= self._next:
            raise UnknownRecord(record)
        _, page, offset, size, element_crc = STATE_AND_ELEMENT.unpack_from(
            self._slot_buffer, (record - self._flushed) * SLOT_BYTES
        )
        at = offset - self._buffer_base  # < 0: bigger than the buffer, in the page already
        element = (
            self._buffer[at : at + size] if at >= 0 else self._data_map[offset : offset + size]
        )
        if self._crc(element) != element_crc:
            raise self._found_corrupt(record, f"its element (data page {page}) fails its crc")
        return element

    def _flush_tail(self) -> None:
        """Hand the tail to the kernel: the elements first (``pwrite``), then their slots
        (one copy into the index map), so that a process that dies at any instant leaves
        no slot whose element the kernel does not have."""
        fill = self._write_offset - self._buffer_base
        if fill:
            self._data.write(self._data_head, self._buffer_base, self._buffer, fill)
            self._buffer_base = self._write_offset
        count = self._next - self._flushed
        if count:
            at = (self._flushed % self._slots) * SLOT_BYTES
            length = count * SLOT_BYTES
            self._index_map[at : at + length] = self._slot_buffer[:length]
            self._flushed = self._next
            self._live += count
            head = self._data_head  # the tail is flushed before either head page rolls
            self._data_live[head] = self._data_live.get(head, 0) + count
            head = self._index_head
            self._index_live[head] = self._index_live.get(head, 0) + count
        self._bound_tail()

    def _bound_tail(self) -> None:
        """Where the next append stops fitting in the tail (-1 once closed: every append
        then takes the slow path, which says so)."""
        if self._closed:
            self._buffer_end = self._slot_end = -1
            return
        self._buffer_end = min(self._buffer_base + self._buffer_bytes, self._page_bytes)
        self._slot_end = min(
            self._flushed + self._pending_max, (self._index_head + 1) * self._slots
        )

    def _roll_data(self) -> None:
        """The head data page is full: later appends go to a new one."""
        old = self._data_head
        if self._write_offset > self._data_synced:
            self._data.touch(old, self._data_synced, self._write_offset)
        self._data_head = old + 1
        self._data.head = self._data_head
        self._data_map = self._data.create(self._data_head)
        self._write_offset = self._data_synced = self._buffer_base = 0
        if not self._data_live.get(old):
            self._collectable.add((DATA_KIND, old))

    def _roll_index(self) -> None:
        old = self._index_head
        end = self._slots * SLOT_BYTES
        if end > self._index_synced:
            self._index.touch(old, self._index_synced, end)
        self._index_head = old + 1
        self._index.head = self._index_head
        self._index_map = self._index.create(self._index_head)
        self._index_synced = 0
        if not self._index_live.get(old):
            self._collectable.add((INDEX_KIND, old))

    def _skip_collected_data(self) -> None:
        """A data page this sync will delete is not flushed first: none of its bytes will
        ever be read.  Its records written since the last sync were never synced, and the
        index flush below makes their removal durable before the file goes; the others'
        bytes were flushed by the sync that covered them.  (A consumer that keeps up would
        otherwise write every element to disk only to delete it.)"""
        for kind, number in self._collectable:
            if kind == DATA_KIND and not self._data_live.get(number):
                self._data.dirty.pop(number, None)

    def _collect(self) -> None:
        """Delete the pages whose records are all removed (their removals are durable)."""
        for kind, number in sorted(self._collectable):
            if kind == DATA_KIND and not self._data_live.get(number):
                self._data.delete(number)
                self._data_live.pop(number, None)
            elif kind == INDEX_KIND and not self._index_live.get(number):
                self._index.delete(number)
                self._index_live.pop(number, None)
        self._collectable.clear()

    def _found_corrupt(self, record: int, why: str) -> CorruptRecord:
        logger().error("storage.corrupt_record", directory=str(self.directory), record=record,
                       why=why)  # fmt: skip
        return CorruptRecord(record, why)

    def _release(self) -> None:
        self._closed = True
        self._flushed, self._buffer_base = self._next, self._write_offset  # abandoned
        self._bound_tail()
        self._index.close()
        self._data.close()
        self._buffer.close()
        self._slot_buffer.close()
        unlock(self._lock)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("the store is closed")


def _open_geometry(directory: Path, wanted: Geometry, explicit: bool) -> Geometry:
    """The directory's geometry (it wins over ``wanted``), or ``wanted`` for a new one."""
    meta = directory / META_NAME
    raw = read_file(meta)
    if raw is None:
        if any(p.name.endswith(".page") for p in directory.iterdir()):
            raise _refused(directory, f"{directory} holds page files but no {META_NAME}")
        write_file_durably(meta, encode_meta(wanted))
        return wanted
    try:
        found = decode_meta(raw, str(meta))
    except FormatMismatch as e:
        raise _refused(directory, str(e)) from None
    if explicit and not found.same_sizes(wanted):
        logger().warning("storage.geometry_kept", directory=str(directory),
                         page_bytes=found.page_bytes, index_page_slots=found.index_page_slots,
                         asked_page_bytes=wanted.page_bytes)  # fmt: skip
    return found


def _refused(directory: Path, why: str) -> FormatMismatch:
    logger().error("storage.format_refused", directory=str(directory), why=why)
    return FormatMismatch(why)
