"""A client's writer: the replies the owner hands over, written without blocking it.

Replies wait in the session's bounded channel; the writer joins those waiting into one
write.  When the writer is idle, the owner writes a step's replies itself, in one send
(:func:`write_now`), as long as the socket takes them without waiting; the rest goes
through the channel.

An element counts as delivered once the whole reply that carries it was handed to the
kernel while the connection was open, so before each write the writer (and
:func:`write_now`) looks for the client's end of stream: a client that closed its
connection is not written to and counted as served.  A client that does not take a
reply within ``reply_write_timeout_s``, or is gone mid-write, ends its own session and
nothing else.
"""

from __future__ import annotations

import itertools
import socket

import attrs
import structlog
import trio

from skueue.runtime.network.client_reader import ClientReader
from skueue.runtime.network.connections import with_waiting

log = structlog.get_logger("skueued")

# An abrupt disconnect.  Inside a nursery it would arrive wrapped in an exception group
# that the connection handler does not catch, and one client's reset would stop the
# daemon; so the client session handles it where it happens.
DISCONNECTED = (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError)


@attrs.frozen
class Reply:
    """One reply's frames, packed, and the removed elements they carry."""

    blob: bytes
    elements: int = 0


@attrs.define
class ClientSession:
    """One connected client, as its reader, its writer and the owner's replies see it."""

    replies: trio.MemorySendChannel[Reply]
    reader: ClientReader  # its reading end (what is outstanding; the deadlines)
    # From the hello: the client's own request timeout (None: the daemon's), and whether
    # this is an administrative connection.
    request_timeout_s: float | None = None
    admin: bool = False
    version: int = 1
    # The client's session id (its requests may come again: host/retries.py).
    session: str | None = None
    role: str = "admin"  # its token's (runtime/security/client_auth.py); without tokens, anything
    closed: bool = False
    queued_elements: int = 0  # elements in replies offered and not yet handed over
    scope: trio.CancelScope | None = None
    # The connection's socket for writes that must not wait (None: not a socket, tests).
    raw: socket.socket | None = None
    # Replies queued or in the writer's hands, not yet written (a count, not a flag: the
    # writer's receive yields after it took a reply, before the writer can say so).
    pending: int = 0


def write_now(session: ClientSession, replies: list[Reply]) -> list[Reply]:
    """Write a step's ``replies`` for one client from the owner, in one send, when the
    writer is idle (nothing queued, nothing in its hands): they then cost one syscall
    instead of a trip through the channel and a wake-up of the writer task.  Returns
    what is left for the writer (the rest of a reply cut short, and those after it: each
    reply's elements count as delivered only once all of it went out); anything unusual
    (a full socket, a closed client, an error) is left to the writer, which handles it
    as it always did."""
    raw = session.raw
    if raw is None or session.pending or session.closed or _peer_closed(raw):
        return replies
    blob = replies[0].blob if len(replies) == 1 else b"".join(r.blob for r in replies)
    try:
        sent = raw.send(blob, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
    except OSError:  # BlockingIOError included
        return replies
    session.reader.deadlines.last_activity = trio.current_time()
    if sent == len(blob):
        return []
    for i, reply in enumerate(replies):
        if sent < len(reply.blob):
            return [Reply(reply.blob[sent:], reply.elements), *replies[i + 1 :]]
        sent -= len(reply.blob)
    return []  # (not reached: sent < len(blob))


async def write_replies(
    session: ClientSession,
    stream: trio.abc.SendStream,
    replies: trio.MemoryReceiveChannel[Reply],
    timeout_s: float,
) -> None:
    """A client's writer: joins the replies waiting into one write; a client gone
    mid-write or not reading ends its own session, nothing else."""
    session.raw = _raw_socket(stream)
    try:
        async for reply in replies:
            taken = with_waiting(reply, replies)
            try:
                await _send(session, stream, session.raw, taken, timeout_s)
            finally:
                session.pending -= len(taken)
    except (*DISCONNECTED, OSError):
        close(session)
    except trio.TooSlowError:
        log.warning("client is not reading its replies; closing it")
        close(session)
    finally:
        if session.raw is not None:
            session.raw.detach()  # the fd belongs to the stream
            session.raw = None


async def _send(
    session: ClientSession,
    stream: trio.abc.SendStream,
    raw: socket.socket | None,
    batch: list[Reply],
    timeout_s: float,
) -> None:
    """Write ``batch``; each reply's elements count as delivered once its last byte
    is handed to the kernel."""
    blob = b"".join(r.blob for r in batch) if len(batch) > 1 else batch[0].blob
    if raw is None:  # not a socket (tests): all or nothing
        with trio.fail_after(timeout_s):
            await stream.send_all(blob)
        session.queued_elements -= sum(r.elements for r in batch)
        return
    ends = list(itertools.accumulate(len(r.blob) for r in batch))
    view = memoryview(blob)
    sent = done = 0
    await trio.lowlevel.checkpoint()
    while sent < len(blob):
        # No checkpoint between the look and the write: what was written went to a
        # client that had not closed its connection (as far as this host knows).
        if _peer_closed(raw):
            raise trio.BrokenResourceError("the client closed its connection")
        try:
            sent += raw.send(view[sent:], socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        except BlockingIOError:
            with trio.fail_after(timeout_s):
                await trio.lowlevel.wait_writable(raw)
            continue
        while done < len(batch) and ends[done] <= sent:
            session.queued_elements -= batch[done].elements
            done += 1
        session.reader.deadlines.last_activity = trio.current_time()


def offer(session: ClientSession, reply: Reply) -> bool:
    """Queue ``reply`` for the writer; False when the queue is full or closed."""
    try:
        session.replies.send_nowait(reply)
    except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
        return False
    session.pending += 1
    return True


def close(session: ClientSession) -> None:
    """End the session: its reader and writer stop (the owner reads its socket no more,
    from now: the session's task closes it later)."""
    session.closed = True
    session.reader.end(None)
    if session.scope is not None:
        session.scope.cancel()


def _raw_socket(stream: trio.abc.SendStream) -> socket.socket | None:
    """A plain socket object on the stream's descriptor, for a peek that must not wait
    (detach it when done: the descriptor is the stream's).  None under TLS, whose bytes
    only the stream may write: then every reply goes through the writer task."""
    if not isinstance(stream, trio.SocketStream):
        return None
    return socket.socket(fileno=stream.socket.fileno())


def _peer_closed(raw: socket.socket) -> bool:
    """The client's end of stream (or a reset) is next in line to read."""
    try:
        return raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
