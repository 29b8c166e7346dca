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
from typing import Any

import attrs
import trio

from skueue.core.errors import RemoteProtocolError
from skueue.wire.framing import pack


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
                    f"{self.peer} skipped frames: sent #{self.next} after "
                    f"#{self.inbound.accepted}"
                )
            return None
        number = self.next
        self.next += 1
        self.left -= 1
        return number
