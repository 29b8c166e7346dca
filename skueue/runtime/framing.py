"""Length-prefixed frames: a 4-byte big-endian length, then that many bytes of msgpack.

The length is checked against ``frame_bytes_max`` before any buffer for the frame is
grown, so a hostile prefix cannot make us allocate.  The decoder is sans-IO: feed it
bytes as they arrive and take whole frames out.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

import msgpack

from skueue.runtime.errors import RemoteProtocolError

FRAME_BYTES_MAX = 16 * 1024 * 1024
_HEADER = struct.Struct(">I")
HEADER_BYTES = _HEADER.size


def pack(obj: Any) -> bytes:
    """One frame: header and msgpack payload."""
    payload = msgpack.packb(obj, use_bin_type=True)
    return _HEADER.pack(len(payload)) + payload


def pack_many(objs: Iterable[Any]) -> bytes:
    """Several frames in one buffer, for one write."""
    return b"".join(pack(o) for o in objs)


def unpack_payload(payload: bytes) -> Any:
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=True, use_list=True)
    except (ValueError, msgpack.UnpackException, TypeError) as e:
        raise RemoteProtocolError(f"malformed msgpack frame: {e}") from None


class FrameDecoder:
    def __init__(self, frame_bytes_max: int = FRAME_BYTES_MAX) -> None:
        self.frame_bytes_max = frame_bytes_max
        self._buffer = bytearray()

    def feed(self, data: bytes | bytearray) -> list[Any]:
        """Add received bytes; return every complete frame, decoded."""
        self._buffer += data
        frames = []
        while len(self._buffer) >= HEADER_BYTES:
            (length,) = _HEADER.unpack_from(self._buffer)
            if length > self.frame_bytes_max:
                raise RemoteProtocolError(
                    f"frame of {length} bytes exceeds the limit of {self.frame_bytes_max}"
                )
            end = HEADER_BYTES + length
            if len(self._buffer) < end:
                break
            payload = bytes(self._buffer[HEADER_BYTES:end])
            del self._buffer[:end]
            frames.append(unpack_payload(payload))
        return frames

    @property
    def pending_bytes(self) -> int:
        """Bytes of a frame not yet complete (a truncated frame at disconnect)."""
        return len(self._buffer)
