"""Client sessions: one reader and one writer task per connected client.

The reader parses requests and feeds them to the owner task through the inbox; the
writer sends the replies the owner hands over.  A client may have
``requests_per_client_max`` requests outstanding; its reader stops reading until replies
go out, so a fast client slows down instead of growing our buffers.

The owner never blocks on a client: :meth:`ClientSessions.deliver` offers a reply to the
session's bounded reply channel, and a client that does not read its replies is closed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import attrs
import structlog
import trio

from skueue.runtime.client_protocol import ClientRequest, parse_request, request_id
from skueue.runtime.connections import coalescing_writer, frames
from skueue.runtime.errors import RemoteProtocolError
from skueue.runtime.framing import FrameDecoder, pack
from skueue.runtime.limits import Limits

log = structlog.get_logger("skueued")

# An abrupt disconnect.  Inside a nursery it would arrive wrapped in an exception group
# that the connection handler does not catch, and one client's reset would stop the
# daemon; so the client session handles it where it happens.
DISCONNECTED = (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError)


@attrs.frozen
class ClientInput:
    client: int
    request: ClientRequest


@attrs.frozen
class ClientGone:
    client: int


@attrs.define
class ClientSession:
    replies: trio.MemorySendChannel[bytes]
    slots: trio.Semaphore
    closed: bool = False


class ClientSessions:
    """Every connected client; the owner task delivers replies through :meth:`deliver`."""

    def __init__(
        self,
        limits: Limits,
        inbox: trio.MemorySendChannel[Any],
        welcome: Callable[[], list[Any]],
    ) -> None:
        self.limits = limits
        self.inbox = inbox
        self.welcome = welcome
        self.clients: dict[int, ClientSession] = {}
        self.client_ids = itertools.count(1)

    async def serve(
        self, stream: trio.SocketStream, decoder: FrameDecoder, rest: list[Any]
    ) -> None:
        """Serve one client that said hello, until it disconnects or misbehaves."""
        if len(self.clients) >= self.limits.clients_max:
            raise RemoteProtocolError(f"too many clients (limit {self.limits.clients_max})")
        client = next(self.client_ids)
        send, receive = trio.open_memory_channel[bytes](self.limits.client_replies_max)
        session = ClientSession(send, trio.Semaphore(self.limits.requests_per_client_max))
        self.clients[client] = session
        send.send_nowait(pack(self.welcome()))
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_write_replies, stream, receive, nursery.cancel_scope)
                try:
                    await self._read_requests(client, session, stream, decoder, rest)
                except RemoteProtocolError as e:
                    log.warning("bad client input, closing connection", client=client, error=str(e))
                    _offer(session, pack(["error", e.rid, e.message]))
                except DISCONNECTED:
                    pass  # reset by the client: nobody is left to answer
                session.closed = True
                await send.aclose()  # the writer drains what is queued, then ends
        finally:
            session.closed = True
            del self.clients[client]
            await self.inbox.send(ClientGone(client))

    async def _read_requests(
        self,
        client: int,
        session: ClientSession,
        stream: trio.SocketStream,
        decoder: FrameDecoder,
        rest: list[Any],
    ) -> None:
        async for frame in frames(stream, decoder, rest):
            try:
                request = parse_request(frame, self.limits)
            except RemoteProtocolError as e:
                raise RemoteProtocolError(e.message, request_id(frame)) from None
            await session.slots.acquire()  # backpressure: wait for replies to go out
            await self.inbox.send(ClientInput(client, request))

    def deliver(self, client: int, frame: list[Any]) -> None:
        """Hand one reply to a client's writer; never blocks the owner."""
        session = self.clients.get(client)
        if session is None or session.closed:
            return
        if _offer(session, pack(frame)):
            session.slots.release()
        else:
            log.warning("client is not reading its replies; closing it", client=client)
            session.closed = True
            session.replies.close()


async def _write_replies(
    stream: trio.SocketStream, replies: trio.MemoryReceiveChannel[bytes], scope: trio.CancelScope
) -> None:
    """A client's writer: a client gone mid-write ends its own session, nothing else."""
    try:
        await coalescing_writer(stream, replies)
    except DISCONNECTED:
        scope.cancel()


def _offer(session: ClientSession, blob: bytes) -> bool:
    try:
        session.replies.send_nowait(blob)
        return True
    except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
        return False
