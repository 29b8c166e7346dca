"""The paged engine's on-disk format: the meta file, the index slot, limits and defaults.

Pure (struct, zlib, json only): the layout can be read and tested without touching a file.
The theory of operation is in :mod:`skueue.dht.storage.paged`.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from skueue.dht.storage.interface import FormatMismatch

MAGIC = "skueue-paged-entry-store"
VERSION = 1
"""Bumped whenever a byte of the layout below changes; other versions are refused."""

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

# One index slot, little-endian, 48 bytes:
#   state u32 | slot_crc u32 | record u64 | position i64 | ticket i64 |
#   data_page u32 | offset u32 | length u32 | element_crc u32
# slot_crc is crc32 of bytes [8, 48) (the body), which never change once written; only the
# state word does (EMPTY -> LIVE -> REMOVED), one aligned 4-byte store.
SLOT = struct.Struct("<IIQqqIIII")
BODY = struct.Struct("<QqqIIII")
STATE = struct.Struct("<I")
HEAD = struct.Struct("<II")  # state, slot_crc
SLOT_BYTES = SLOT.size
BODY_OFFSET = 8
DATA_PAGE_OFFSET = BODY_OFFSET + 24  # the data_page field, read by remove()
assert SLOT_BYTES == 48 and BODY.size == SLOT_BYTES - BODY_OFFSET

EMPTY = 0
LIVE = 0x4556494C  # b"LIVE" read as little-endian u32
REMOVED = 0x44414544  # b"DEAD"

crc32 = zlib.crc32


@dataclass(frozen=True, slots=True)
class Geometry:
    """The sizes a directory was created with; they stay with the directory."""

    page_bytes: int = PAGE_BYTES_DEFAULT
    index_page_slots: int = INDEX_PAGE_SLOTS_DEFAULT

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


def encode_meta(geometry: Geometry) -> bytes:
    meta = {
        "magic": MAGIC,
        "version": VERSION,
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
    if meta.get("version") != VERSION:
        raise FormatMismatch(
            f"{where} has format version {meta.get('version')!r}; this engine reads only "
            f"version {VERSION}"
        )
    try:
        return Geometry(int(meta["page_bytes"]), int(meta["index_page_slots"]))
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
