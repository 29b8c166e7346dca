"""The owner's own readiness loop: the plaintext connections whose frames it reads itself.

Theory of operation
-------------------
A frame used to cost two trio task switches before the host saw it: the connection's
reader task woke for the bytes, decoded them and put the frames in the inbox, and the
owner task woke to take them.  With a few frames per wake-up that was most of the
daemon's CPU per operation (docs/performance.md).  An asyncio ``Protocol`` avoids both:
its ``data_received`` runs straight from the loop's poll.  This module does the same
inside trio: the owner keeps an epoll set of its own, with the sockets of plaintext
client sessions and peer links once their handshake is done, and waits for that set's
descriptor (itself pollable) in trio.  When it wakes, it reads every ready socket
without waiting (:meth:`Readable.on_readable`), decodes the frames and steps the host
with them in the same step: one wake-up for all the frames of all the connections that
are ready, no task per frame, no channel in between.

Everything else stays a trio task: accepting, TLS (whose bytes only the stream may
read), handshakes, the writers' fallback when a socket is full, timeouts.  A
connection's task still owns its stream and waits for its end (:attr:`Readable.ended`);
the owner stops reading a socket (:meth:`Reactor.pause`) when its client has as many
requests outstanding as it may, and the task unregisters it before it closes the
stream, so that the descriptor is never read after it was closed.

Where the platform has no epoll, :attr:`Reactor.available` is False and every connection
keeps its reader task, as every TLS connection does.
"""

from __future__ import annotations

import select
from typing import Any, Protocol

import trio

# Events taken from the epoll set per wake-up (the rest are taken at the next one).
EVENTS_PER_WAKE_MAX = 1024


class Readable(Protocol):
    """A connection the owner reads: ``on_readable`` reads what the socket holds, without
    waiting, and hands its frames to the owner."""

    def on_readable(self) -> None: ...


class Reactor:
    def __init__(self, owner_reads: bool = True) -> None:
        """``owner_reads=False``: no connection is read by the owner (every one keeps
        its reader task), as where the platform has no epoll."""
        self._epoll = select.epoll() if owner_reads and hasattr(select, "epoll") else None
        self._readers: dict[int, Readable] = {}
        self._sleep: trio.CancelScope | None = None
        # What the readers read for the owner since it last took them, in order.
        self.items: list[Any] = []

    def hand(self, item: Any) -> None:
        """A reader's input for the owner's next step."""
        self.items.append(item)

    def take(self) -> list[Any]:
        items, self.items = self.items, []
        return items

    @property
    def available(self) -> bool:
        return self._epoll is not None

    def register(self, fd: int, reader: Readable) -> None:
        assert self._epoll is not None
        self._epoll.register(fd, select.EPOLLIN)
        self._readers[fd] = reader

    def unregister(self, fd: int, reader: Readable) -> None:
        """Let ``reader`` read ``fd`` no more (before its stream is closed: a descriptor
        closed while in the set would be reused by the next connection under the old
        reader).  Only ``reader``'s own registration goes, should the descriptor already
        belong to another connection."""
        if self._readers.get(fd) is reader:
            del self._readers[fd]
            if self._epoll is not None:
                self._epoll.unregister(fd)

    def pause(self, fd: int) -> None:
        """Stop reading ``fd`` for now (backpressure); its bytes wait in the kernel."""
        if fd in self._readers and self._epoll is not None:
            self._epoll.modify(fd, 0)

    def resume(self, fd: int) -> None:
        if fd in self._readers and self._epoll is not None:
            self._epoll.modify(fd, select.EPOLLIN)

    def __len__(self) -> int:
        return len(self._readers)

    async def wait(self, timeout_s: float) -> None:
        """Until a registered socket is readable, :meth:`wake` is called, or
        ``timeout_s`` passes."""
        with trio.move_on_after(timeout_s) as scope:
            self._sleep = scope
            try:
                if self._epoll is None:
                    await trio.sleep_forever()
                else:
                    await trio.lowlevel.wait_readable(self._epoll.fileno())
            finally:
                self._sleep = None

    def wake(self) -> None:
        """End the owner's :meth:`wait` (an inbox item arrived from a task)."""
        if self._sleep is not None:
            self._sleep.cancel()

    def read_ready(self) -> int:
        """Let every ready connection read; how many there were."""
        if self._epoll is None or not self._readers:
            return 0
        events = self._epoll.poll(0, EVENTS_PER_WAKE_MAX)
        readers = self._readers
        for fd, _ in events:
            reader = readers.get(fd)
            if reader is not None:  # (unregistered by an earlier reader of this wake-up)
                reader.on_readable()
        return len(events)

    def close(self) -> None:
        if self._epoll is not None:
            self._epoll.close()
        self._readers.clear()
