"""The receiving side of a reliable peer link: frame numbers checked, frames already
taken skipped, and acknowledgements sent back (the sending side is
:mod:`skueue.runtime.network.link_sender`).

Per peer, this daemon remembers two counts, which outlive its connections:

- ``accepted``: frames put into the owner's inbox.  A frame numbered at or below it was
  taken before (a resend after a reconnect) and is skipped; one above ``accepted + 1``
  means frames went missing, which a correct peer never does.
- ``handled``: frames the owner has handled.  This is what the acknowledgements and the
  handshake report, so that the sender keeps every frame this daemon could still lose
  (one still waiting in the inbox when the connection broke is simply skipped when it
  comes again).

Only one connection of a peer is read at a time (``lock``): a new one first ends the
old, so that two readers never race on the counts.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

import attrs
import trio

from skueue.core.errors import RemoteProtocolError
from skueue.host.inputs import PeerControl, PeerMessage
from skueue.runtime.network.connections import read_ready
from skueue.runtime.network.peers import parse_peer_frame
from skueue.wire.framing import FrameDecoder, pack

if TYPE_CHECKING:
    from skueue.runtime.network.reactor import Reactor


@attrs.define(eq=False)
class Inbound:
    accepted: int = 0
    handled: int = 0
    acked: int = 0  # the last count this daemon told the peer
    # The current connection's socket, written by the owner (acks only), and what of
    # the last ack the socket did not take.
    raw: socket.socket | None = None
    unsent: bytes = b""
    lock: trio.Lock = attrs.field(factory=trio.Lock)
    # A TLS connection's ack writer instead (its bytes must go through the TLS stream).
    stream_acks: StreamAcks | None = None
    # The current connection's reading end, where the owner reads it itself.
    reader: PeerReader | None = None

    def attach(self, raw: socket.socket) -> None:
        """A new connection, whose handshake reported ``handled``."""
        self.raw, self.unsent, self.acked = raw, b"", self.handled
        self.stream_acks = None

    def attach_stream(self) -> StreamAcks:
        """A new TLS connection: its acks are written by :meth:`StreamAcks.run`."""
        self.raw, self.unsent, self.acked = None, b"", self.handled
        self.stream_acks = StreamAcks()
        return self.stream_acks

    def detach(self, raw: socket.socket | None, acks: StreamAcks | None = None) -> None:
        if raw is not None and self.raw is raw:
            self.raw = None
        if acks is not None and self.stream_acks is acks:
            self.stream_acks = None

    def send_ack(self) -> None:
        """Tell the peer how far this daemon has handled its frames, if that moved.
        Never waits: an ack the socket does not take now goes with the next one, and a
        lost one is made good by the next connection's handshake."""
        if self.stream_acks is not None:
            if self.handled != self.acked:
                self.stream_acks.wake.set()
            return
        raw = self.raw
        if raw is None or (self.handled == self.acked and not self.unsent):
            return
        if self.handled != self.acked:
            self.unsent += pack(["ack", self.handled])
            self.acked = self.handled
        try:
            sent = raw.send(self.unsent, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        except OSError:
            return  # full or broken: the reader finds out
        self.unsent = self.unsent[sent:]


@attrs.define(eq=False)
class StreamAcks:
    """The ack writer of a TLS peer link: the owner cannot write into a TLS stream
    without waiting, so it wakes this task, which sends the newest count."""

    wake: trio.Event = attrs.field(factory=trio.Event)

    async def run(self, inbound: Inbound, stream: trio.abc.SendStream) -> None:
        while True:
            await self.wake.wait()
            self.wake = trio.Event()
            handled = inbound.handled
            if handled != inbound.acked:
                await stream.send_all(pack(["ack", handled]))
                inbound.acked = handled


class Numbering:
    """Follows the ``["seq", first, count]`` headers of one connection and numbers the
    frames behind them."""

    def __init__(self, peer: str, inbound: Inbound) -> None:
        self.peer = peer
        self.inbound = inbound
        self.next = 0
        self.left = 0  # frames of the current blob still to come

    def number(self, frame: Any) -> int | None:
        """The number of ``frame``, or None for a header.  Raises
        :class:`RemoteProtocolError` for a frame outside a blob, a bad header or a gap."""
        if self.left == 0:
            if not (
                isinstance(frame, list)
                and len(frame) == 3
                and frame[0] == "seq"
                and type(frame[1]) is int
                and type(frame[2]) is int
                and frame[1] >= 1
                and frame[2] >= 1
            ):
                raise RemoteProtocolError(
                    f'expected ["seq", first, count] from {self.peer}, got {frame!r:.60}'
                )
            self.next, self.left = frame[1], frame[2]
            if self.next > self.inbound.accepted + 1:
                raise RemoteProtocolError(
                    f"{self.peer} skipped frames: sent #{self.next} after #{self.inbound.accepted}"
                )
            return None
        number = self.next
        self.next += 1
        self.left -= 1
        return number


class PeerReader:
    """A peer link's frames turned into the owner's inputs, in their order; frames taken
    before (resent after a reconnect) are skipped.  Driven by the session's task
    (:meth:`take` for each frame it reads) or, on a plaintext link, by the owner's
    reactor (:meth:`on_readable`; runtime/network/reactor.py)."""

    def __init__(self, peer: str, inbound: Inbound, decoder: FrameDecoder) -> None:
        self.peer = peer
        self.inbound = inbound
        self.decoder = decoder
        self.numbering = Numbering(peer, inbound)
        self.raw: socket.socket | None = None
        self.reactor: Reactor | None = None
        self.ended = trio.Event()
        self.error: BaseException | None = None

    def take(self, frame: Any) -> tuple[int, PeerMessage | PeerControl] | None:
        """The input in ``frame`` and its number, None for a header or a frame taken
        before; raises :class:`RemoteProtocolError` for one no correct peer sends.  The
        caller moves ``inbound.accepted`` once the input is in the owner's hands."""
        number = self.numbering.number(frame)
        inbound = self.inbound
        if number is None or number <= inbound.accepted:
            return None
        try:
            parsed = parse_peer_frame(frame)
        except RemoteProtocolError:
            inbound.accepted = number  # no peer should send it: never take it again
            inbound.handled = number
            raise
        if isinstance(parsed, tuple):
            kind, message = parsed
            return number, PeerMessage(self.peer, number, kind, message, frame[2])
        return number, PeerControl(self.peer, number, parsed)

    def hand(self, frames: list[Any]) -> None:
        """The owner's: hand the frames' inputs to its next step."""
        reactor = self.reactor
        assert reactor is not None
        for frame in frames:
            taken = self.take(frame)
            if taken is not None:
                reactor.hand(taken[1])
                self.inbound.accepted = taken[0]

    def on_readable(self) -> None:
        assert self.raw is not None
        read_ready(
            self.raw, self.decoder, lambda data: self.hand(self.decoder.feed(data)), self.end
        )

    def end(self, error: BaseException | None) -> None:
        """Read no more; the session's task finds out (``error``: why, None: closed)."""
        if self.raw is not None and self.reactor is not None:
            self.reactor.unregister(self.raw.fileno(), self)
        if not self.ended.is_set():
            self.error = error
            self.ended.set()

    async def read_by_owner(self, raw: socket.socket, reactor: Reactor, rest: list[Any]) -> None:
        """Have the owner read the link from now on; returns when the peer closed it,
        raises what ended it."""
        self.raw, self.reactor = raw, reactor
        self.inbound.reader = self
        self.hand(rest)
        fd = raw.fileno()
        reactor.register(fd, self)
        try:
            await self.ended.wait()
        finally:
            reactor.unregister(fd, self)
            if self.inbound.reader is self:
                self.inbound.reader = None
        if self.error is not None:
            raise self.error
