"""The sending side of one reliable peer link: numbered frames, kept until the peer
acknowledges them, sent again after every reconnect.

Theory of operation
-------------------
The paper assumes channels that neither lose nor duplicate messages.  TCP gives that only
while a connection lasts: what a broken connection carried may or may not have arrived.
So every frame for a peer gets the next number of the link (1, 2, ...), and one step's
frames travel as one blob opened by a header frame ``["seq", first, count]``.

- A blob stays in the outbox until the peer acknowledges its last frame
  (``["ack", n]``: every frame up to ``n`` is handled; sent back on the same
  connection, see :mod:`skueue.runtime.network.link_receiver`).
- A new connection's handshake says how many frames the peer has handled; the writer
  sends everything after that again, from the start of the blob that holds the next one.
  The peer skips numbers it has already taken, so nothing is lost and nothing is applied
  twice.

The owner writes a blob itself while the writer task is idle (connected, nothing
unwritten, no send under way), without waiting (``MSG_DONTWAIT``), so that the common
case costs no task switch.  What the socket does not take is left to the writer task.
A blob cut in the middle by a broken connection simply goes again, whole.
"""

from __future__ import annotations

import socket
import time
from collections import deque
from collections.abc import Callable

import attrs
import trio

from skueue.core.errors import RemoteProtocolError
from skueue.runtime.network.connections import frames
from skueue.wire.framing import FrameDecoder, pack, pack_many

# A writer joins what waits into one send up to about this many bytes.
SEND_CHUNK_BYTES = 1 << 20


@attrs.frozen
class Blob:
    """One step's frames for the peer, numbered ``first`` to ``last``."""

    first: int
    last: int
    data: bytes


@attrs.define(eq=False)
class LinkSender:
    outbox: deque[Blob] = attrs.field(factory=deque)
    outbox_bytes: int = 0
    next_number: int = 1  # the number of the next frame
    # Blobs ever dropped from the front of the outbox (acknowledged): outbox[i] is blob
    # number ``base + i`` of this link, which keeps the writer's place stable while acks
    # trim the front under it.
    base: int = 0
    # The writer's place on the current connection: blobs before ``next_blob`` went out
    # whole, and ``offset`` bytes of blob ``next_blob``.
    next_blob: int = 0
    offset: int = 0
    sending: bool = False  # the writer task is inside a send
    # The connected socket for the owner's own writes; None while (re)connecting.
    raw: socket.socket | None = None
    wake: trio.Event = attrs.field(factory=trio.Event)
    closed: bool = False
    # For the metrics: connections made, the last frame number written on any of them,
    # and frames written again on a new connection (retransmits).
    connections: int = 0
    written_last: int = 0
    frames_resent: int = 0
    # When the peer last acknowledged something, or frames last started to wait for an
    # ack (the outbox was empty, or a new connection): see stuck().  A plain clock, so
    # that the owner may add frames outside trio too (a replay, the tests).
    progress_at: float = 0.0
    clock: Callable[[], float] = time.monotonic

    def add(self, frames: list[object]) -> None:
        """Number ``frames``, keep them in the outbox, and send them if the writer is idle."""
        first = self.next_number
        if not self.outbox:
            self.progress_at = self.clock()
        self.next_number += len(frames)
        data = pack(["seq", first, len(frames)]) + pack_many(frames)
        self.outbox.append(Blob(first, self.next_number - 1, data))
        self.outbox_bytes += len(data)
        self._write_now()
        if self.unwritten():
            self.wake.set()

    def unwritten(self) -> bool:
        return self.next_blob < self.base + len(self.outbox)

    def unacknowledged(self) -> int:
        """Frames sent or queued that the peer has not acknowledged yet."""
        return sum(b.last - b.first + 1 for b in self.outbox)

    def acked_through(self) -> int:
        """The last frame the peer acknowledged."""
        return self.outbox[0].first - 1 if self.outbox else self.next_number - 1

    def acknowledged(self, number: int) -> None:
        """The peer handled every frame up to ``number``: forget those blobs."""
        if not 0 <= number < self.next_number:
            raise RemoteProtocolError(
                f"ack of frame {number}, but only {self.next_number - 1} were sent"
            )
        if self.outbox and self.outbox[0].last <= number:
            self.progress_at = self.clock()
        while self.outbox and self.outbox[0].last <= number:
            self.outbox_bytes -= len(self.outbox.popleft().data)
            self.base += 1
        self.next_blob = max(self.next_blob, self.base)

    def stuck(self, now: float, timeout_s: float) -> bool:
        """Frames went out on this connection and nothing was acknowledged for
        ``timeout_s``: the connection carries nothing any more, though it is open (a
        half-open connection, a peer that is paused, or a record cut on the path that
        the peer waits to complete)."""
        waiting = bool(self.outbox) and self.written_last >= self.outbox[0].first
        return waiting and now - self.progress_at > timeout_s

    def close(self) -> None:
        """The peer is gone for good: stop the writer; the outbox is dropped with us."""
        self.closed = True
        self.wake.set()

    def _write_now(self) -> None:
        raw = self.raw
        if raw is None or self.sending or self.next_blob != self.base + len(self.outbox) - 1:
            return
        data = self.outbox[-1].data
        try:
            sent = raw.send(data, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        except OSError:  # full, or broken: the writer finds out and reconnects
            return
        if sent == len(data):
            self.next_blob += 1
        else:
            self.offset = sent
        self.written_last = self.outbox[-1].last

    async def serve(self, stream: trio.abc.Stream, handled: int) -> None:
        """Write the outbox on ``stream``, a new connection whose peer said it handled
        every frame up to ``handled``, and then whatever comes, until :meth:`close`.
        The stream's errors propagate to the caller, which reconnects."""
        self.acknowledged(handled)
        self.next_blob, self.offset = self.base, 0
        self.connections += 1
        self.progress_at = self.clock()
        self.frames_resent += sum(
            min(b.last, self.written_last) - b.first + 1
            for b in self.outbox
            if b.first <= self.written_last
        )
        # The owner's own writes go straight to the socket: not under TLS, whose bytes
        # only the stream may write (there every write goes through the writer task).
        if isinstance(stream, trio.SocketStream):
            self.raw = socket.socket(fileno=stream.socket.fileno())
        try:
            while not self.closed:
                if not self.unwritten():
                    self.wake = trio.Event()
                    await self.wake.wait()
                    continue
                start = self.next_blob - self.base
                parts = [self.outbox[start].data[self.offset :]]
                size, end = len(parts[0]), start + 1
                while end < len(self.outbox) and size < SEND_CHUNK_BYTES:
                    parts.append(self.outbox[end].data)
                    size += len(parts[-1])
                    end += 1
                end_blob = self.base + end
                last = self.outbox[end - 1].last
                self.sending = True
                try:
                    await stream.send_all(b"".join(parts))
                finally:
                    self.sending = False
                self.next_blob, self.offset = max(end_blob, self.base), 0
                self.written_last = max(self.written_last, last)
        finally:
            if self.raw is not None:
                self.raw.detach()  # the descriptor is the stream's
            self.raw = None


async def watch_acks(link: LinkSender, timeout_s: float) -> None:
    """End the connection (raise) once :meth:`LinkSender.stuck`: the caller reconnects
    and sends again what was not acknowledged.  Without it such a link stalls the
    cluster for as long as TCP keeps the connection open, which may be for ever."""
    while True:
        await trio.sleep(timeout_s / 4)
        if link.stuck(link.clock(), timeout_s):
            raise trio.BrokenResourceError(
                f"nothing acknowledged for {timeout_s:g} s while frames wait for it; "
                "the connection is stuck"
            )


async def read_acks(stream: trio.abc.ReceiveStream, link: LinkSender, frames_max: int) -> None:
    """Take the peer's acknowledgements from a link's connection until it closes (which
    ends the connection: the caller reconnects)."""
    async for frame in frames(stream, FrameDecoder(frames_max)):
        if isinstance(frame, list) and len(frame) >= 3 and frame[0] == "error":
            raise RemoteProtocolError(f"the peer closed the link: {frame[2]!s:.300}")
        if not (
            isinstance(frame, list)
            and len(frame) == 2
            and frame[0] == "ack"
            and type(frame[1]) is int
        ):
            raise RemoteProtocolError(f"expected an ack on a peer link, got {frame!r:.60}")
        link.acknowledged(frame[1])
    raise trio.BrokenResourceError("the peer closed the link")
