"""A client connection as a plain asyncio ``Protocol``, for a client running under asyncio.

anyio's socket stream on asyncio pays for every chunk it reads: it resumes the
transport's reading before it waits and pauses it after (two ``epoll_ctl`` calls and the
loop's bookkeeping each), and every send ends with a shielded checkpoint (a task switch).
A client that keeps many calls in flight reads a chunk or two per operation, so this cost
is most of what it spends (``docs/performance.md``, "The client's side").  This stream
is the same ``anyio.abc.ByteStream`` for the code around it (the hello, the reconnects),
but it reads the asyncio way: the transport stays reading, and once the link
(:mod:`skueue.client.lifecycle`) asks for :meth:`deliver_to`, every chunk that arrives
is handed to it in ``data_received`` with no task woken for it; a send is one
``transport.write`` (waiting only while the transport says its buffer is full).

Used for plain TCP under asyncio (:func:`skueue.client.connection.open_connection`);
TLS and trio keep anyio's streams.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

import anyio
import anyio.abc


class ProtocolStream(asyncio.Protocol, anyio.abc.ByteStream):
    """One TCP connection, read by callbacks."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._chunks: deque[bytes] = deque()  # read before anyone took delivery
        self._readable = asyncio.Event()  # a chunk, or the end, for :meth:`receive`
        self._writable = asyncio.Event()  # cleared while the transport's buffer is full
        self._writable.set()
        self._lost: BaseException | None = None  # why the connection ended
        self._closed = asyncio.Event()  # the connection ended (either side)
        self._deliver: Callable[[bytes], None] | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        if self._deliver is not None:
            self._deliver(data)
        else:
            self._chunks.append(data)
            self._readable.set()

    def eof_received(self) -> bool:
        return False  # close the transport: a client has nothing to send after the end

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or anyio.EndOfStream()
        self._readable.set()
        self._writable.set()
        self._closed.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # -- what the link uses -------------------------------------------------------------

    def deliver_to(self, deliver: Callable[[bytes], None]) -> None:
        """From now on hand every chunk to ``deliver`` as it arrives (those read so far
        first); ``deliver`` may :meth:`abort` the connection."""
        self._deliver = deliver
        while self._chunks:
            deliver(self._chunks.popleft())

    async def wait_closed(self) -> None:
        """Until the connection ends (either side)."""
        await self._closed.wait()

    def abort(self) -> None:
        """End the connection now (a bad reply: it is out of step)."""
        if self._transport is not None:
            self._transport.abort()

    # -- anyio.abc.ByteStream -----------------------------------------------------------

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while not self._chunks:
            if self._lost is not None:
                self._raise_lost()
            self._readable.clear()
            await self._readable.wait()
        chunk = self._chunks.popleft()
        if len(chunk) > max_bytes:
            chunk, rest = chunk[:max_bytes], chunk[max_bytes:]
            self._chunks.appendleft(rest)
        return chunk

    async def send(self, item: bytes) -> None:
        if self._lost is not None or self._transport is None:
            raise anyio.BrokenResourceError
        self._transport.write(item)
        if not self._writable.is_set():
            await self._writable.wait()
            if self._lost is not None:
                raise anyio.BrokenResourceError

    async def send_eof(self) -> None:
        if self._transport is not None and self._transport.can_write_eof():
            self._transport.write_eof()

    async def aclose(self) -> None:
        if self._transport is not None:
            self._transport.close()
        if self._lost is None:
            self._lost = anyio.ClosedResourceError()

    def _raise_lost(self) -> None:
        lost = self._lost
        if isinstance(lost, anyio.EndOfStream | anyio.ClosedResourceError):
            raise lost
        raise anyio.BrokenResourceError from lost


async def connect(host: str, port: int) -> ProtocolStream:
    """A TCP connection to ``host:port`` read by a :class:`ProtocolStream` (under asyncio)."""
    loop = asyncio.get_running_loop()
    _, stream = await loop.create_connection(ProtocolStream, host, port)
    return stream


def running_asyncio() -> bool:
    """This thread runs an asyncio loop (not trio)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
