"""Reading frames from a trio stream, and the coalescing writer.

Frames bound for one connection in one step of the owner task arrive at the writer as
one blob; the writer also joins whatever else is queued before it writes, so that a
burst costs one ``send_all`` rather than one per frame.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import trio

from skueue.runtime.errors import RemoteProtocolError
from skueue.runtime.framing import FrameDecoder

RECEIVE_BYTES = 65536


async def frames(
    stream: trio.abc.ReceiveStream, decoder: FrameDecoder, already: list[Any] | None = None
) -> AsyncIterator[Any]:
    """Yield decoded frames (first those ``already`` read with the hello) until the peer
    closes; a truncated last frame is an error."""
    for frame in already or ():
        yield frame
    while True:
        data = await stream.receive_some(RECEIVE_BYTES)
        if not data:
            if decoder.pending_bytes:
                raise RemoteProtocolError(
                    f"connection closed inside a frame ({decoder.pending_bytes} bytes pending)"
                )
            return
        for frame in decoder.feed(data):
            yield frame


async def first_frame(
    stream: trio.abc.ReceiveStream, decoder: FrameDecoder, timeout_s: float
) -> tuple[Any, list[Any]]:
    """The first frame (the hello) and any frames that came in the same read."""
    with trio.move_on_after(timeout_s):
        while True:
            data = await stream.receive_some(RECEIVE_BYTES)
            if not data:
                raise RemoteProtocolError("connection closed before its hello")
            got = decoder.feed(data)
            if got:
                return got[0], got[1:]
    raise RemoteProtocolError(f"no hello within {timeout_s:g} s")


async def coalescing_writer(
    stream: trio.abc.SendStream, blobs: trio.MemoryReceiveChannel[bytes]
) -> None:
    """Write every queued blob, joining those already waiting into one write."""
    async for blob in blobs:
        parts = [blob]
        while True:
            try:
                parts.append(blobs.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                # EndOfChannel: the sender closed (e.g. after an error reply); write what
                # we have, and the ``async for`` then ends.
                break
        await stream.send_all(b"".join(parts) if len(parts) > 1 else blob)
