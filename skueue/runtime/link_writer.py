"""The outgoing side of one peer link: the owner writes at once when it can, a writer task
does the rest.

Theory of operation
-------------------
The owner's frames for a peer, one blob per step, used to go through a channel to the
link's writer task, which woke up and wrote them: a channel hop and a task switch per
blob on top of the send.  Now, while the writer is idle (nothing queued, nothing in its
hands) and connected, the owner sends the blob itself without waiting
(``MSG_DONTWAIT``).  Whatever the socket does not take (all of it, or the tail of a blob
cut in the middle) goes through the channel as before, so the order of bytes on the
link never changes.

A tail is the second half of a frame: it means something only on the connection that
carried the first half.  It is therefore queued as a :class:`Tail` stamped with the
connection it belongs to, and a writer that reconnected in between drops it rather than
start the new connection with half a frame.  (Frames cut off by a broken link are lost
either way until links retransmit.)
"""

from __future__ import annotations

import socket

import attrs
import trio

from skueue.runtime.connections import put, with_waiting


@attrs.frozen
class Tail:
    """The rest of a blob whose head went out on connection ``connection``."""

    blob: bytes
    connection: int


Item = bytes | Tail


@attrs.define
class LinkWriter:
    channel: trio.MemorySendChannel[Item]
    # The connected stream's socket for the owner's writes; None while (re)connecting.
    raw: socket.socket | None = None
    # Items queued or in the writer's hands, not yet written (a count, not a flag: the
    # writer's receive yields after it took an item, before the writer can say so).
    pending: int = 0
    connection: int = 0  # counts the connections this link has had

    def write_now(self, blob: bytes) -> Item | None:
        """Send ``blob`` at once if the writer is idle; what is left for the writer
        (None: everything went out)."""
        raw = self.raw
        if raw is None or self.pending:
            return blob
        try:
            sent = raw.send(blob, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        except OSError:  # full, or broken: the writer finds out and reconnects
            return blob
        if sent == len(blob):
            return None
        return Tail(blob[sent:], self.connection)

    async def serve(
        self, stream: trio.SocketStream, items: trio.MemoryReceiveChannel[Item]
    ) -> None:
        """Write everything queued on ``stream`` (a new connection) until the channel
        closes; errors of the stream propagate to the caller, which reconnects."""
        self.connection += 1
        connection = self.connection
        self.raw = socket.socket(fileno=stream.socket.fileno())
        try:
            async for item in items:
                taken = with_waiting(item, items)
                try:
                    parts = [_bytes(i) for i in taken if _belongs(i, connection)]
                    if parts:
                        await stream.send_all(b"".join(parts) if len(parts) > 1 else parts[0])
                finally:
                    self.pending -= len(taken)  # written, or lost with the connection
        finally:
            self.raw.detach()  # the descriptor is the stream's
            self.raw = None

    async def queue(self, item: Item) -> None:
        """Hand ``item`` to the writer (what :meth:`write_now` left)."""
        self.pending += 1
        try:
            await put(self.channel, item)
        except BaseException:
            self.pending -= 1
            raise


def _belongs(item: Item, connection: int) -> bool:
    return not isinstance(item, Tail) or item.connection == connection


def _bytes(item: Item) -> bytes:
    return item.blob if isinstance(item, Tail) else item
