"""Reading frames from a trio stream, and what the writers share.

Frames bound for one connection in one step of the owner task arrive at a writer as one
blob; a writer also joins whatever else is queued before it writes
(:func:`with_waiting`), so that a burst costs one send rather than one per frame.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import trio

from skueue.core.errors import RemoteProtocolError
from skueue.runtime.security.tls import looks_like_tls
from skueue.wire.framing import HEADER_BYTES, FrameDecoder

T = TypeVar("T")

RECEIVE_BYTES = 65536
# The first frame of a connection (a hello) is small; until it is in, a connection we do
# not know yet holds no more than this.
HELLO_BYTES_MAX = 4096
TLS_REFUSAL = (
    "this connection speaks TLS and this daemon does not (start it with --tls-cert and "
    "--tls-key, or connect without TLS)"
)


class ConnectionClosed(RemoteProtocolError):
    """The other end closed the connection in the middle of a handshake."""


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
            check_closed_between_frames(decoder)
            return
        for frame in decoder.feed(data):
            yield frame


def check_closed_between_frames(decoder: FrameDecoder) -> None:
    """The other end closed: an error if it did so inside a frame."""
    if decoder.pending_bytes:
        raise RemoteProtocolError(
            f"connection closed inside a frame ({decoder.pending_bytes} bytes pending)"
        )


def read_ready(
    raw: socket.socket,
    decoder: FrameDecoder,
    received: Callable[[bytes], None],
    end: Callable[[BaseException | None], None],
) -> None:
    """A ready socket, read by the owner without waiting: its bytes go to ``received``;
    its end (None), a broken connection or the other end's fault (what ``received``
    raises as :class:`RemoteProtocolError`) go to ``end``, and that connection alone."""
    try:
        data = raw.recv(RECEIVE_BYTES, socket.MSG_DONTWAIT)
    except BlockingIOError:
        return
    except OSError as e:
        end(e)
        return
    try:
        if not data:
            check_closed_between_frames(decoder)
            end(None)
            return
        received(data)
    except RemoteProtocolError as e:
        end(e)


async def next_frame(
    stream: trio.abc.ReceiveStream, decoder: FrameDecoder, rest: list[Any], timeout_s: float
) -> tuple[Any, list[Any]]:
    """The next frame of a handshake (from ``rest``, the frames already decoded, or the
    stream) and the frames decoded after it.  Like the hello it may take no more than
    ``HELLO_BYTES_MAX`` bytes: a peer not yet authenticated holds little memory; one that
    sends none in ``timeout_s`` is an error."""
    rest = list(rest)
    received = 0
    with trio.move_on_after(timeout_s):
        while not rest:
            if received > HELLO_BYTES_MAX:
                raise RemoteProtocolError(
                    f"a handshake frame exceeds the limit of {HELLO_BYTES_MAX} bytes"
                )
            data = await stream.receive_some(HELLO_BYTES_MAX)
            if not data:
                raise ConnectionClosed("connection closed in the handshake")
            received += len(data)
            rest.extend(decoder.feed(data))
        return rest[0], rest[1:]
    raise RemoteProtocolError(f"no handshake frame within {timeout_s:g} s")


async def first_frame(
    stream: trio.abc.ReceiveStream,
    decoder: FrameDecoder,
    timeout_s: float,
    first_bytes_max: int = HELLO_BYTES_MAX,
) -> tuple[Any, list[Any]]:
    """The first frame (the hello) and any frames that came in the same read.

    The first frame may be no larger than ``first_bytes_max`` and reads are that small,
    so a connection that has not said who it is holds little memory."""
    head = bytearray()
    with trio.move_on_after(timeout_s):
        while True:
            data = await stream.receive_some(first_bytes_max)
            if not data:
                raise RemoteProtocolError("connection closed before its hello")
            if not head and looks_like_tls(data):
                raise RemoteProtocolError(TLS_REFUSAL)
            if len(head) < HEADER_BYTES:
                head += data[: HEADER_BYTES - len(head)]
                length = int.from_bytes(head, "big") if len(head) == HEADER_BYTES else 0
                if length > first_bytes_max:
                    raise RemoteProtocolError(
                        f"a first frame of {length} bytes exceeds the limit of "
                        f"{first_bytes_max} for a hello"
                    )
            got = decoder.feed(data)
            if got:
                return got[0], got[1:]
    raise RemoteProtocolError(f"no hello within {timeout_s:g} s")


async def put(channel: trio.MemorySendChannel[T], item: T) -> None:
    """``channel.send(item)`` without its two scheduling points when there is room.

    ``send`` always yields to the scheduler, which costs a trip through trio's run loop
    per frame; the channels between readers, the owner and the writers almost never
    fill up, so the common case stays inline and only a full channel waits."""
    try:
        channel.send_nowait(item)
    except trio.WouldBlock:
        await channel.send(item)


def with_waiting(first: T, channel: trio.MemoryReceiveChannel[T]) -> list[T]:
    """``first`` and every item already waiting behind it, so that a writer joins them
    into one write.  A closed channel (the sender ended, e.g. after an error reply)
    stops the gathering; the writer's ``async for`` then ends."""
    items = [first]
    while True:
        try:
            items.append(channel.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return items
