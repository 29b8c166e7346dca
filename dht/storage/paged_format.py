"""The paged engine's on-disk format: the meta file, the index slot, limits and defaults.

Pure (struct, zlib, json only): the layout can be read and tested without touching a file.
The theory of operation is in :mod:`skueue.dht.storage.paged`.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import google_crc32c

from skueue.dht.storage.interface import FormatMismatch

MAGIC = "skueue-paged-entry-store"
VERSION = 2
"""Bumped whenever a byte of the layout below changes; new directories get this one."""
CHECKSUMS: dict[int, tuple[str, Callable[[bytes], int]]] = {
    1: ("crc32", zlib.crc32),
    # crc32c (Castagnoli, as in ext4, iSCSI and LevelDB's log records) through
    # google-crc32c's SSE4.2 code: 0.12 us per KB here against zlib's 0.39, and an element
    # is checksummed twice (append and read).
    2: ("crc32c", google_crc32c.value),
}
"""The versions this engine reads, and the checksum each one's slots and elements use;
others are refused.  A directory keeps the version it was created with."""

META_NAME = "store.meta"
LOCK_NAME = "store.lock"
INDEX_KIND = "index"
DATA_KIND = "data"

PAGE_BYTES_DEFAULT = 32 * 1024 * 1024
"""Size of one data page file; also the largest element (it must fit in one page)."""
PAGE_BYTES_MIN = 4096
PAGE_BYTES_MAX = 1 << 30
"""Offsets in a slot are 32-bit; a GiB keeps them far from overflowing."""
INDEX_PAGE_SLOTS_DEFAULT = 1 << 16
"""Slots (records) per index page file: 65536 x 48 bytes = 3 MiB."""
INDEX_PAGE_SLOTS_MIN = 16
INDEX_PAGE_SLOTS_MAX = 1 << 22
MAPPED_PAGES_MAX_DEFAULT = 16
"""Page files of each kind kept memory-mapped at once (the two head pages always are)."""
BUFFER_BYTES_MAX = 256 * 1024
"""Elements appended and not yet handed to the kernel (``pwrite``): at most this many bytes
(and at most one page); a bigger element is written to its page directly."""
PENDING_SLOTS_MAX = 4096
"""Slots of those appends not yet copied into the index map (4096 x 48 B = 192 KiB)."""

# One index slot, little-endian, 48 bytes:
#   state u32 | slot_crc u32 | record u64 | position i64 | ticket i64 |
#   data_page u32 | offset u32 | length u32 | element_crc u32
# slot_crc is the checksum (CHECKSUMS) of bytes [8, 48) (the body), which never change once
# written; only the state word does (EMPTY -> LIVE -> REMOVED), one aligned 4-byte store.
SLOT = struct.Struct("<IIQqqIIII")
BODY = struct.Struct("<QqqIIII")
STATE = struct.Struct("<I")
HEAD = struct.Struct("<II")  # state, slot_crc
SLOT_BYTES = SLOT.size
BODY_OFFSET = 8
# What read() and remove() need of a slot, in one unpack each (the hot path):
STATE_AND_ELEMENT = struct.Struct("<I28xIIII")  # state, data_page, offset, length, crc
STATE_AND_PAGE = struct.Struct("<I28xI")  # state, data_page
assert SLOT_BYTES == 48 and BODY.size == SLOT_BYTES - BODY_OFFSET == STATE_AND_ELEMENT.size - 8

EMPTY = 0
LIVE = 0x4556494C  # b"LIVE" read as little-endian u32
REMOVED = 0x44414544  # b"DEAD"


@dataclass(frozen=True, slots=True)
class Geometry:
    """The sizes and format version a directory was created with; they stay with it."""

    page_bytes: int = PAGE_BYTES_DEFAULT
    index_page_slots: int = INDEX_PAGE_SLOTS_DEFAULT
    version: int = VERSION

    def __post_init__(self) -> None:
        if not PAGE_BYTES_MIN <= self.page_bytes <= PAGE_BYTES_MAX:
            raise ValueError(
                f"page_bytes={self.page_bytes} is not in [{PAGE_BYTES_MIN}, {PAGE_BYTES_MAX}]"
            )
        if not INDEX_PAGE_SLOTS_MIN <= self.index_page_slots <= INDEX_PAGE_SLOTS_MAX:
            raise ValueError(
                f"index_page_slots={self.index_page_slots} is not in "
                f"[{INDEX_PAGE_SLOTS_MIN}, {INDEX_PAGE_SLOTS_MAX}]"
            )

    @property
    def index_page_bytes(self) -> int:
        return self.index_page_slots * SLOT_BYTES

    @property
    def checksum_name(self) -> str:
        return CHECKSUMS[self.version][0]

    @property
    def checksum(self) -> Callable[[bytes], int]:
        """The slot and element checksum of this directory's format version."""
        return CHECKSUMS[self.version][1]

    def same_sizes(self, other: Geometry) -> bool:
        return (self.page_bytes, self.index_page_slots) == (
            other.page_bytes,
            other.index_page_slots,
        )


def encode_meta(geometry: Geometry) -> bytes:
    meta = {
        "magic": MAGIC,
        "version": geometry.version,
        "page_bytes": geometry.page_bytes,
        "index_page_slots": geometry.index_page_slots,
    }
    return (json.dumps(meta, sort_keys=True) + "\n").encode()


def decode_meta(raw: bytes, where: str) -> Geometry:
    """The geometry of a directory's meta file; another magic or version is refused."""
    try:
        meta: Any = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError):
        meta = None
    if not isinstance(meta, dict) or meta.get("magic") != MAGIC:
        raise FormatMismatch(f"{where} is not a skueue paged store's meta file (no {MAGIC!r})")
    version = meta.get("version")
    if type(version) is not int or version not in CHECKSUMS:  # JSON true is no version
        readable = ", ".join(str(v) for v in CHECKSUMS)
        raise FormatMismatch(
            f"{where} has format version {version!r}; this engine reads versions {readable}"
        )
    try:
        return Geometry(int(meta["page_bytes"]), int(meta["index_page_slots"]), version)
    except (KeyError, TypeError, ValueError) as e:
        raise FormatMismatch(f"{where} has a bad geometry: {e}") from None


def page_name(kind: str, number: int) -> str:
    """File names sort in page order: ``data-000000000042.page``."""
    return f"{kind}-{number:012d}.page"


def parse_page_name(name: str) -> tuple[str, int] | None:
    kind, dash, rest = name.partition("-")
    if not dash or kind not in (INDEX_KIND, DATA_KIND) or not rest.endswith(".page"):
        return None
    digits = rest[: -len(".page")]
    return (kind, int(digits)) if digits.isdigit() else None


def element_too_big(size: int, page_bytes: int) -> ValueError:
    return ValueError(
        f"element of {size} bytes is over the paged store's element limit "
        f"page_bytes={page_bytes}: an element must fit in one data page "
        "(a new store directory can be given a larger page_bytes)"
    )
