"""The snapshot file of a data directory (``snapshot.bin``): a daemon's whole state as of
a log position, checksummed, written to a temporary file, fsynced and renamed into place
(runtime/durability/input_log.py compacts its log into one; runtime/durability/snapshots.py
says what is in it)."""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from skueue.runtime.errors import DaemonError

SNAPSHOT_FILE = "snapshot.bin"
_SNAPSHOT_MAGIC = b"SKQSNAP1"
_SNAPSHOT_HEADER = struct.Struct(">8sIQI")  # magic, first segment after it, length, crc32
_SNAPSHOT_CHUNK_BYTES = 1 << 20


def read_snapshot(directory: Path) -> tuple[int, Path | None]:
    """The segment that follows the snapshot, and its file (0, None: no snapshot); its
    checksum is verified here, reading it in pieces (it may be tens of MB)."""
    path = directory / SNAPSHOT_FILE
    if not path.exists():
        return 0, None
    with path.open("rb") as f:
        header = f.read(_SNAPSHOT_HEADER.size)
        if len(header) == _SNAPSHOT_HEADER.size:
            magic, segment, length, crc = _SNAPSHOT_HEADER.unpack(header)
            seen, seen_crc = 0, 0
            while chunk := f.read(_SNAPSHOT_CHUNK_BYTES):
                seen += len(chunk)
                seen_crc = zlib.crc32(chunk, seen_crc)
            if magic == _SNAPSHOT_MAGIC and (seen, seen_crc) == (length, crc):
                return segment, path
    raise DaemonError(
        f"{path} is damaged (its checksum does not match); the log it replaced is gone, "
        "so this daemon cannot come back from it"
    )


def open_snapshot(path: Path) -> BinaryIO:
    """The snapshot's payload as a file, after its header (read_snapshot checked it)."""
    f = path.open("rb")
    f.seek(_SNAPSHOT_HEADER.size)
    return f


def write_snapshot(directory: Path, segment: int, dump: Callable[[BinaryIO], None]) -> int:
    """Write what ``dump`` writes as the snapshot, durably and atomically (a temporary
    file renamed into place); returns its size.  Streamed, so that a snapshot never
    needs its size again in memory."""
    temporary = directory / (SNAPSHOT_FILE + ".tmp")
    with open(temporary, "w+b") as f:
        f.write(bytes(_SNAPSHOT_HEADER.size))
        sink = _Checksummed(f)
        dump(sink)  # type: ignore[arg-type]  # a file as far as pickle is concerned
        f.seek(0)
        f.write(_SNAPSHOT_HEADER.pack(_SNAPSHOT_MAGIC, segment, sink.length, sink.crc))
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, directory / SNAPSHOT_FILE)
    fsync_directory(directory)
    return sink.length


class _Checksummed:
    """Writes through to a file, keeping the length and crc32 of what went through."""

    def __init__(self, f: BinaryIO) -> None:
        self.f, self.length, self.crc = f, 0, 0

    def write(self, data: bytes) -> int:
        self.length += len(data)
        self.crc = zlib.crc32(data, self.crc)
        return self.f.write(data)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
