"""Length-prefixed frames: a 4-byte big-endian length, then that many bytes of msgpack.

The length is checked against ``frame_bytes_max`` before any buffer for the frame is
grown, so a hostile prefix cannot make us allocate.  The decoder is sans-IO: feed it
bytes as they arrive and take whole frames out.

A frame over the limit is an error (peer links), or, for a decoder made with
``skip_oversized`` (client sessions), an :class:`Oversized` item in the output: the
first bytes of its payload (enough for the caller to find a request id in) and then
nothing, since the rest of it is skipped as it arrives, never buffered.

Bytes held for frames not yet whole may be charged to a :class:`BufferBudget` shared by
many decoders; a feed that would take more than is left raises
:class:`BufferBudgetExceeded`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

import attrs
import msgpack

from skueue.core.errors import RemoteProtocolError

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


class BufferBudget:
    """Bytes that many decoders together may hold for frames not yet whole."""

    def __init__(self, bytes_max: int) -> None:
        self.bytes_max = bytes_max
        self.used = 0

    def take(self, n: int) -> bool:
        if self.used + n > self.bytes_max:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used -= n


class BufferBudgetExceeded(RemoteProtocolError):
    pass


@attrs.frozen
class Oversized:
    """A frame over the limit, skipped: its length and the first bytes of its payload."""

    length: int
    prefix: bytes


# How much of an oversized frame's payload is kept for the caller to look into.
OVERSIZED_PREFIX_BYTES = 64


class FrameDecoder:
    def __init__(
        self,
        frame_bytes_max: int = FRAME_BYTES_MAX,
        *,
        skip_oversized: bool = False,
    ) -> None:
        self.frame_bytes_max = frame_bytes_max
        self.skip_oversized = skip_oversized
        self._buffer = bytearray()
        self._skip = 0  # bytes of an oversized frame still to discard
        self._budget: BufferBudget | None = None
        self._charged = 0  # bytes of the buffer charged to the budget

    def feed(self, data: bytes | bytearray | memoryview) -> list[Any]:
        """Add received bytes; return every complete frame, decoded (and an
        :class:`Oversized` for each frame skipped, when skipping)."""
        if self._skip:
            skipped = min(self._skip, len(data))
            self._skip -= skipped
            data = memoryview(data)[skipped:]
        self._buffer += data
        frames: list[Any] = []
        while len(self._buffer) >= HEADER_BYTES:
            (length,) = _HEADER.unpack_from(self._buffer)
            if length > self.frame_bytes_max:
                if not self.skip_oversized:
                    raise RemoteProtocolError(
                        f"frame of {length} bytes exceeds the limit of {self.frame_bytes_max}"
                    )
                peek = min(OVERSIZED_PREFIX_BYTES, length)
                if len(self._buffer) < HEADER_BYTES + peek:
                    break
                prefix = bytes(self._buffer[HEADER_BYTES : HEADER_BYTES + peek])
                frames.append(Oversized(length, prefix))
                have = len(self._buffer) - HEADER_BYTES
                if have >= length:
                    del self._buffer[: HEADER_BYTES + length]
                    continue
                self._skip = length - have
                self._buffer.clear()
                break
            end = HEADER_BYTES + length
            if len(self._buffer) < end:
                break
            payload = bytes(self._buffer[HEADER_BYTES:end])
            del self._buffer[:end]
            frames.append(unpack_payload(payload))
        self._account()
        return frames

    def attach(self, budget: BufferBudget) -> None:
        """Charge the bytes held from now on (and those held already) to ``budget``."""
        self.release()
        self._budget = budget
        self._account()

    def release(self) -> None:
        """Give back what is charged to the budget (the connection is done)."""
        if self._budget is not None:
            self._budget.give(self._charged)
        self._charged = 0
        self._budget = None

    def _account(self) -> None:
        if self._budget is None:
            return
        more = len(self._buffer) - self._charged
        if more > 0 and not self._budget.take(more):
            raise BufferBudgetExceeded(
                f"partial frames of all clients would hold more than {self._budget.bytes_max} bytes"
            )
        if more < 0:
            self._budget.give(-more)
        self._charged += more

    @property
    def pending_bytes(self) -> int:
        """Bytes of a frame not yet complete (a truncated frame at disconnect)."""
        return len(self._buffer)

    @property
    def in_frame(self) -> bool:
        """Inside a frame: some of it arrived (or is being skipped), not all."""
        return bool(self._buffer) or self._skip > 0
