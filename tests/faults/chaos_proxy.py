"""A TCP proxy that breaks its connections on purpose (for the fault tests).

Each daemon advertises a proxy port instead of its own (``skueued --advertise``), so every
peer link between daemons goes through here.  :meth:`ChaosProxy.break_one` aborts one live
connection at a random moment with a reset: whatever was in flight in it (in the kernel's
buffers or in the proxy's hands, often the middle of a frame) is lost, as when a network
path fails.  :meth:`ChaosProxy.tamper_one` instead changes what one connection carries
(a bit flipped, a recorded chunk replayed), as an attacker on the path would.
"""

from __future__ import annotations

import random
import socket
import struct
from typing import Any

import trio

from skueue.host.address import Address

COPY_BYTES = 65536


class Pair:
    """One proxied connection: the accepted side and the upstream side."""

    def __init__(self, down: trio.SocketStream, up: trio.SocketStream) -> None:
        self.down = down
        self.up = up
        self.scope = trio.CancelScope()
        # Per direction (the sink): a change to make to the next chunk copied, and the
        # last chunk copied (what a replay sends again).
        self.pending: dict[trio.SocketStream, str] = {}
        self.last: dict[trio.SocketStream, bytes] = {}
        self.rng = random.Random()

    def alter(self, sink: trio.SocketStream, data: bytes) -> bytes:
        """``data`` as the proxy passes it on: changed if a tamper is pending."""
        how = self.pending.pop(sink, None)
        before, self.last[sink] = self.last.get(sink), data
        if how == "flip":
            i = self.rng.randrange(len(data))
            return data[:i] + bytes([data[i] ^ (1 << self.rng.randrange(8))]) + data[i + 1 :]
        if how == "replay" and before is not None:
            return before + data  # a chunk recorded earlier, inserted again
        if how == "replay":
            self.pending[sink] = how  # nothing recorded yet: the next chunk
        return data

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
        self.tampered = 0

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
        pair.rng = self.rng  # one seed replays the run
        self.pairs.append(pair)
        try:
            with pair.scope:
                async with down, up, trio.open_nursery() as nursery:
                    nursery.start_soon(_copy, down, up, nursery.cancel_scope, pair)
                    nursery.start_soon(_copy, up, down, nursery.cancel_scope, pair)
        finally:
            self.pairs.remove(pair)

    def tamper_one(self, how: str) -> bool:
        """Change the next chunk one live connection carries, in one direction picked at
        random: ``flip`` one bit of it, or ``replay`` a chunk it carried before in front
        of it (False: there was no connection)."""
        if not self.pairs:
            return False
        pair = self.rng.choice(self.pairs)
        pair.pending[self.rng.choice([pair.down, pair.up])] = how
        self.tampered += 1
        return True

    def break_one(self) -> bool:
        """Abort one live connection, picked at random (False: there was none)."""
        if not self.pairs:
            return False
        self.rng.choice(self.pairs).abort()
        self.broken += 1
        return True


async def _copy(
    source: trio.SocketStream, sink: trio.SocketStream, scope: trio.CancelScope, pair: Pair
) -> None:
    try:
        while data := await source.receive_some(COPY_BYTES):
            await sink.send_all(pair.alter(sink, data) if pair.pending else data)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    scope.cancel()  # one side ended: end both, as a network path would
