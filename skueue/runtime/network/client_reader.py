"""A client connection's reading end: bytes in, requests out, for the owner.

:class:`ClientReader` decodes a client's bytes and turns each frame into a request for
the owner (:meth:`ClientSessions.check_frame` answers what the session can answer
itself).  It is driven one of two ways:

- by the owner (:mod:`skueue.runtime.network.reactor`) for a plaintext connection: the
  owner reads the socket when it is ready and takes the requests in the same step, while
  the session's task only watches the deadlines (:func:`read_by_owner`);
- by the session's own task (:func:`read_by_task`) under TLS, whose bytes only the
  stream may read, and where the platform has no epoll: the task reads and puts the
  requests in the inbox.

A client may have ``requests_per_client_max`` requests outstanding: at the limit the
reader stops taking frames (they wait, decoded, and the socket's further bytes wait in
the kernel) until a reply frees a slot (:meth:`ClientReader.answered`), so a fast
client slows down instead of growing our buffers.

Deadlines (:class:`ReadDeadlines`): a client with nothing outstanding that sends nothing
for ``idle_s`` is closed, and so is one that starts a frame and does not finish it within
``frame_s`` (time spent waiting for a slot is ours, not the client's).
"""

from __future__ import annotations

import socket
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from skueue.core.errors import RemoteProtocolError
from skueue.host.requests import ClientRequest
from skueue.runtime.network.connections import (
    RECEIVE_BYTES,
    check_closed_between_frames,
    read_ready,
)
from skueue.wire.framing import FrameDecoder

if TYPE_CHECKING:
    from skueue.runtime.network.reactor import Reactor


class ConnectionTimeout(RemoteProtocolError):
    """A client sent nothing for too long, or stopped inside a frame."""


@attrs.frozen
class ClientInput:
    client: int
    request: ClientRequest


@attrs.define
class ReadDeadlines:
    """The deadlines of a client connection's reading end (peer links have none).

    ``last_activity`` is the trio time of the last byte received or reply sent (the
    session's writer moves it too); ``busy`` says whether a request is outstanding;
    ``frame_started`` when the frame now arriving began (None: between frames)."""

    idle_s: float
    frame_s: float
    busy: Callable[[], bool]
    last_activity: float = attrs.field(factory=trio.current_time)
    frame_started: float | None = None

    def after_read(self, decoder: FrameDecoder, whole_frames: bool) -> None:
        now = trio.current_time()
        self.last_activity = now
        if not decoder.in_frame:
            self.frame_started = None
        elif whole_frames or self.frame_started is None:
            self.frame_started = now  # a new frame began in this read

    def next_deadline(self) -> float:
        if self.frame_started is not None:
            return self.frame_started + self.frame_s
        return self.last_activity + self.idle_s

    def passed(self, paused: bool) -> None:
        """The deadline passed: raise :class:`ConnectionTimeout` if the client is to
        blame; otherwise (busy, a reply went out meanwhile, or the reader was waiting
        for a slot) move on."""
        now = trio.current_time()
        if self.frame_started is not None:
            if paused:
                self.frame_started = now  # waiting for a slot: our time, not the client's
                return
            raise ConnectionTimeout(f"a frame did not arrive whole in time ({self.frame_s:g} s)")
        if self.busy():
            self.last_activity = now
            return
        if self.last_activity + self.idle_s > now:
            return  # a reply went out meanwhile
        raise ConnectionTimeout(f"closed after {self.idle_s:g} s idle")


class ClientReader:
    """One client connection's bytes turned into requests, at most ``outstanding_max``
    of them unanswered (see the module docstring)."""

    def __init__(
        self,
        client: int,
        decoder: FrameDecoder,
        check_frame: Callable[[Any], ClientRequest | None],
        outstanding_max: int,
        idle_s: float,
        frame_s: float,
    ) -> None:
        self.client = client
        self.decoder = decoder
        self.check_frame = check_frame  # a request for the owner, or None (answered)
        self.outstanding = 0  # requests handed to the owner and not answered yet
        self.outstanding_max = outstanding_max
        self.deadlines = ReadDeadlines(idle_s, frame_s, lambda: self.outstanding > 0)
        self.waiting: deque[Any] = deque()  # frames decoded and not taken yet
        self.paused = False
        self.resumed = trio.Event()
        # Driven by the owner: the socket, the reactor and where requests go.
        self.raw: socket.socket | None = None
        self.reactor: Reactor | None = None
        self.hand: Callable[[ClientInput], None] | None = None
        # The session's task watches the deadlines: woken when reading ended (``ended``,
        # with ``error``: why) or a frame began, which brings the deadline closer.
        self.ended = False
        self.error: BaseException | None = None
        self.wakeup = trio.Event()

    # -- bytes to requests --------------------------------------------------------------

    def feed(self, data: bytes | bytearray, more: Sequence[Any] = ()) -> list[ClientInput]:
        """The requests the bytes ``data`` complete (``more``: frames decoded already,
        first); raises what ends the connection."""
        got = self.decoder.feed(data) if data else []
        if data:
            self.deadlines.after_read(self.decoder, bool(got))
        self.waiting.extend(more)
        self.waiting.extend(got)
        return self.take()

    def take(self) -> list[ClientInput]:
        """The waiting frames' requests, up to the limit of outstanding ones."""
        out: list[ClientInput] = []
        waiting = self.waiting
        while waiting and self.outstanding < self.outstanding_max:
            request = self.check_frame(waiting.popleft())
            if request is not None:
                out.append(ClientInput(self.client, request))
                self.outstanding += 1
        self.paused = bool(waiting)
        return out

    def at_end(self) -> None:
        """The client closed its sending side."""
        check_closed_between_frames(self.decoder)

    def answered(self) -> None:
        """The owner answered one of the client's requests: a paused reader takes frames
        again."""
        self.outstanding -= 1
        if not self.paused:
            return
        if self.hand is None:  # a task reads: it takes them
            self.resumed.set()
            return
        started = self.deadlines.frame_started
        try:
            items = self.take()
        except RemoteProtocolError as e:  # the client's fault, found in the owner's flush
            self.end(e)
            return
        for item in items:
            self.hand(item)
        if not self.paused and self.raw is not None and self.reactor is not None:
            if started is not None:
                self.deadlines.frame_started = max(started, trio.current_time())
            self.reactor.resume(self.raw.fileno())

    # -- driven by the owner ------------------------------------------------------------

    def on_readable(self) -> None:
        """The owner's reactor: read what the socket holds and hand its requests on."""
        assert self.raw is not None
        read_ready(self.raw, self.decoder, self._received, self.end)

    def _received(self, data: bytes) -> None:
        raw, hand = self.raw, self.hand
        assert raw is not None and hand is not None
        between_frames = self.deadlines.frame_started is None
        items = self.feed(data)
        if between_frames and self.deadlines.frame_started is not None:
            self.wakeup.set()
        for item in items:
            hand(item)
        if self.paused and self.reactor is not None:
            self.reactor.pause(raw.fileno())

    def end(self, error: BaseException | None) -> None:
        """Read no more; the session's task finds out (``error``: why, None: the client
        closed)."""
        if self.raw is not None and self.reactor is not None:
            self.reactor.unregister(self.raw.fileno(), self)
        if not self.ended:
            self.ended, self.error = True, error
            self.wakeup.set()


async def read_by_owner(
    reader: ClientReader, raw: socket.socket, reactor: Reactor, hand: Callable[[Any], None],
    rest: list[Any],
) -> None:  # fmt: skip
    """Serve the reading end from the owner's reactor; this task only watches the
    deadlines.  Returns when the client closed; raises what ended the connection."""
    reader.raw, reader.reactor, reader.hand = raw, reactor, hand
    for item in reader.feed(b"", rest):
        hand(item)
    fd = raw.fileno()
    reactor.register(fd, reader)
    if reader.paused:
        reactor.pause(fd)
    try:
        while not reader.ended:
            with trio.move_on_at(reader.deadlines.next_deadline()) as waiting:
                await reader.wakeup.wait()
                reader.wakeup = trio.Event()
            if waiting.cancelled_caught and not reader.ended:
                reader.deadlines.passed(reader.paused)
    finally:
        reactor.unregister(fd, reader)
    if reader.error is not None:
        raise reader.error


async def read_by_task(
    reader: ClientReader,
    stream: trio.abc.ReceiveStream,
    put: Callable[[Any], Any],
    rest: list[Any],
) -> None:
    """Serve the reading end from this task (``put``: hands a request to the owner,
    awaitable).  Returns when the client closed; raises what ended the connection."""
    deadlines = reader.deadlines
    items = reader.feed(b"", rest)
    while True:
        for item in items:
            await put(item)
        while reader.paused:
            await reader.resumed.wait()
            reader.resumed = trio.Event()
            for item in reader.take():
                await put(item)
        if items and deadlines.frame_started is not None:
            # The owner may have made us wait (backpressure): not the client's time.
            deadlines.frame_started = max(deadlines.frame_started, trio.current_time())
        with trio.move_on_at(deadlines.next_deadline()):
            data = await stream.receive_some(RECEIVE_BYTES)
            if not data:
                reader.at_end()
                return
            items = reader.feed(data)
            continue
        items = []
        deadlines.passed(False)
