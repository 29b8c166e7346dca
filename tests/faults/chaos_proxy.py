"""A TCP proxy that breaks its connections on purpose (for the fault tests).

Each daemon advertises a proxy port instead of its own (``skueued --advertise``), so every
peer link between daemons goes through here.  :meth:`ChaosProxy.break_one` aborts one live
connection at a random moment with a reset: whatever was in flight in it (in the kernel's
buffers or in the proxy's hands, often the middle of a frame) is lost, as when a network
path fails.
"""

from __future__ import annotations

import random
import socket
import struct
from typing import Any

import trio

from skueue.runtime.address import Address

COPY_BYTES = 65536


class Pair:
    """One proxied connection: the accepted side and the upstream side."""

    def __init__(self, down: trio.SocketStream, up: trio.SocketStream) -> None:
        self.down = down
        self.up = up
        self.scope = trio.CancelScope()

    def abort(self) -> None:
        for stream in (self.down, self.up):
            # Linger 0: close sends a reset, and unsent data is thrown away.
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.scope.cancel()


class ChaosProxy:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pairs: list[Pair] = []
        self.broken = 0

    async def serve(
        self, listen_port: int, target: Address, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        listeners = await trio.open_tcp_listeners(listen_port, host="127.0.0.1")
        task_status.started()
        await trio.serve_listeners(lambda s: self._pipe(s, target), listeners)

    async def _pipe(self, down: trio.SocketStream, target: Address) -> None:
        try:
            up = await trio.open_tcp_stream(target.host, target.port)
        except OSError:
            await down.aclose()  # the daemon is not listening yet: the peer retries
            return
        pair = Pair(down, up)
        self.pairs.append(pair)
        try:
            with pair.scope:
                async with down, up, trio.open_nursery() as nursery:
                    nursery.start_soon(_copy, down, up, nursery.cancel_scope)
                    nursery.start_soon(_copy, up, down, nursery.cancel_scope)
        finally:
            self.pairs.remove(pair)

    def break_one(self) -> bool:
        """Abort one live connection, picked at random (False: there was none)."""
        if not self.pairs:
            return False
        self.rng.choice(self.pairs).abort()
        self.broken += 1
        return True


async def _copy(
    source: trio.SocketStream, sink: trio.SocketStream, scope: trio.CancelScope
) -> None:
    try:
        while data := await source.receive_some(COPY_BYTES):
            await sink.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    scope.cancel()  # one side ended: end both, as a network path would
