"""Helpers for the limits and dropped-results tests: an in-process daemon and a raw client.

:func:`inproc_daemon` runs one real :class:`~skueue.runtime.daemon.Daemon` (a one-process
cluster) in the test's own trio loop on an OS-chosen loopback port, so a test can read
its counters directly (``daemon.sessions``, ``daemon.host``).  :class:`RawClient` speaks
the client protocol frame by frame over a plain socket, to see every frame the daemon
sends and to misbehave on purpose (stall mid-frame, reset, never read).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgpack
import trio

from skueue.host.address import Address
from skueue.runtime.daemon import Daemon, DaemonConfig
from skueue.runtime.limits import Limits
from skueue.wire.client_hello import PROTOCOL_VERSION
from skueue.wire.framing import HEADER_BYTES, pack

HOST = "127.0.0.1"
REPLY_TIMEOUT_S = 10.0


@asynccontextmanager
async def inproc_daemon(limits: Limits) -> AsyncIterator[Daemon]:
    """One daemon serving on loopback until the block ends."""
    daemon = Daemon(DaemonConfig(Address(HOST, 0), limits=limits))
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.run)
        try:
            yield daemon
        finally:
            nursery.cancel_scope.cancel()


def address(daemon: Daemon) -> tuple[str, int]:
    return daemon.address.host, daemon.address.port


def reset_on_close(stream: trio.SocketStream) -> None:
    """Make the coming close an abrupt RST instead of an orderly FIN."""
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


class RawClient:
    """One connection, frame by frame.  It splits the byte stream into frames itself
    (no size limit), keeping every frame's payload size in ``sizes``."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.sizes: list[int] = []
        self.closed = False

    @classmethod
    async def connect(cls, daemon: Daemon) -> RawClient:
        host, port = address(daemon)
        return cls(await trio.open_tcp_stream(host, port))

    async def hello(self, *rest: Any) -> Any:
        """Say hello (``["hello-client", *rest]``, default this version); return the answer."""
        await self.send(["hello-client", *(rest or (PROTOCOL_VERSION,))])
        return await self.receive()

    async def send(self, frame: Any) -> None:
        await self.stream.send_all(pack(frame))

    async def receive(self, timeout_s: float = REPLY_TIMEOUT_S) -> Any:
        """The next frame; None once the daemon closed the connection."""
        with trio.fail_after(timeout_s):
            while True:
                if len(self.buffer) >= HEADER_BYTES:
                    (length,) = struct.unpack_from(">I", self.buffer)
                    if len(self.buffer) >= HEADER_BYTES + length:
                        payload = bytes(self.buffer[HEADER_BYTES : HEADER_BYTES + length])
                        del self.buffer[: HEADER_BYTES + length]
                        self.sizes.append(length)
                        return msgpack.unpackb(payload, raw=False)
                try:
                    data = await self.stream.receive_some(1 << 20)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    self.closed = True
                    return None
                self.buffer += data

    async def until_closed(self, timeout_s: float = REPLY_TIMEOUT_S) -> list[Any]:
        """Every frame until the daemon closes the connection (bounded in time)."""
        got = []
        while (frame := await self.receive(timeout_s)) is not None:
            got.append(frame)
        return got

    async def aclose(self) -> None:
        await self.stream.aclose()


def records(frame: Any) -> list[Any]:
    """The results of a ``more`` or ``done`` frame as records (each the list of its fields),
    without the kind they travel with (``[KIND, record, ...]``: skueue/host/results.py)."""
    results = frame[2]
    return list(results[1:])
