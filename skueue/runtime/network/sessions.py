"""Client sessions: a reading end and a writer per connected client.

The reading end (:mod:`skueue.runtime.network.client_reader`) turns the client's frames
into requests for the owner: on a plaintext connection the owner reads the socket
itself when it is ready (:mod:`skueue.runtime.network.reactor`), and the session's task
only watches its deadlines; under TLS the session's task reads and puts the requests in
the inbox.  A client may have ``requests_per_client_max`` requests outstanding; at the
limit its frames wait unread, so a fast client slows down instead of growing our
buffers.  The writer sends the replies the owner hands over.

The owner never blocks on a client: :meth:`ClientSessions.deliver` offers a reply to the
session's bounded reply channel, and a client that does not read its replies is closed.
A reply larger than ``frame_bytes_max`` goes out in pieces (``more`` frames, then
``done``), each within the limit.

Resources (issue 8, item 10), each with a limit in :class:`~skueue.runtime.limits.Limits`:

- a connection that has not said hello is one of at most ``hello_pending_max``, holds
  at most ``hello_bytes_max`` and says hello within ``handshake_timeout_s``
  (:meth:`ClientSessions.greet`);
- ``clients_max`` clients, and ``admin_clients_max`` more that said ``admin`` in their
  hello and may only ask for stats, join, leave and remove-member: an operator can always
  get in;
- a client with nothing outstanding that sends nothing for ``idle_connection_timeout_s``
  is closed, and so is one that starts a frame and does not finish it within
  ``frame_read_timeout_s``, or does not take a reply within ``reply_write_timeout_s``;
- bytes held for frames not yet whole: at most ``frame_bytes_max`` per connection (a
  larger frame is skipped, not buffered) and ``partial_frame_bytes_total_max`` for all
  clients together; the connection that would go over is closed, with one warning.

Delivery (issue 8, item 9): an element counts as delivered once the whole reply that
carries it was handed to the kernel while the connection was open.  Every other removed
element of a reply that reached :meth:`~ClientSessions.deliver` is counted in
:attr:`ClientSessions.dropped_results`: replies still queued when the session ends, the
one whose write failed, and those that arrive after the reader saw the client go.  The
writer looks for the client's end of stream before each write, so that a client that
closed its connection is not written to and counted as served.  (A client that has
closed only its sending side is gone too, as far as the reader is concerned.)
"""

from __future__ import annotations

import contextlib
import itertools
import socket
from collections.abc import Callable, Iterator
from typing import Any

import structlog
import trio

from skueue.core.errors import RemoteProtocolError
from skueue.host.inputs import ClientGone
from skueue.host.replies import (
    INVALID,
    TIMEOUT,
    TOO_LARGE,
    UNAUTHORIZED,
    UNAVAILABLE,
    Done,
    ErrorReply,
    Welcome,
)
from skueue.host.replies import Reply as ClientReply
from skueue.host.requests import ADMIN_REQUESTS, ADMIN_ROLE_REQUESTS, ClientRequest
from skueue.runtime.limits import Limits
from skueue.runtime.network.client_reader import (
    ClientReader,
    ConnectionTimeout,
    read_by_owner,
    read_by_task,
)
from skueue.runtime.network.connections import first_frame, put
from skueue.runtime.network.reactor import Reactor
from skueue.runtime.network.reply_writer import (
    DISCONNECTED,
    ClientSession,
    Reply,
    close,
    offer,
    write_now,
    write_replies,
)
from skueue.runtime.security.client_auth import ClientTokens, refusal_message
from skueue.runtime.security.tls import socket_of
from skueue.wire.client_codec import decode_request, encode_reply, reply_elements, reply_frames
from skueue.wire.client_hello import parse_client_hello
from skueue.wire.client_protocol import oversized_request_id, request_id
from skueue.wire.framing import (
    HEADER_BYTES,
    BufferBudget,
    BufferBudgetExceeded,
    FrameDecoder,
    Oversized,
    pack,
    pack_many,
)

log = structlog.get_logger("skueued")

REFUSAL_SEND_S = 1.0


class _Ending(RemoteProtocolError):
    """The connection ends with this error line (``code``) after what is queued."""

    def __init__(self, message: str, rid: int | None, code: str) -> None:
        super().__init__(message, rid)
        self.code = code


def _source(stream: trio.abc.Stream) -> str:
    try:
        return str(socket_of(stream).getpeername()[0])
    except OSError:
        return "?"


class ClientSessions:
    """Every connected client; the owner task delivers replies through :meth:`deliver`."""

    def __init__(
        self,
        limits: Limits,
        inbox: trio.MemorySendChannel[Any],
        reactor: Reactor,
        welcome: Callable[[], Welcome],
        tokens: ClientTokens | None = None,
        client_certs: bool = False,
        tls: bool = False,
    ) -> None:
        self.limits = limits
        self.tokens = tokens  # None: clients need no token (runtime/security/client_auth.py)
        # Clients may show a TLS certificate instead (--tls-client-ca, runtime/security/tls.py).
        self.client_certs = client_certs
        self.tls = tls  # every connection is TLS (a client could have shown a certificate)
        self.inbox = inbox
        # The owner reads plaintext clients itself (runtime/network/reactor.py); a task
        # that puts something in the inbox wakes it.
        self.reactor = reactor
        self.welcome = welcome
        self.clients: dict[int, ClientSession] = {}
        self.client_ids = itertools.count(1)
        self.admins = 0
        # Connections that have not said hello yet, oldest first, and how to end each.
        self.hello_waiting: dict[int, trio.CancelScope] = {}
        self.hello_numbers = itertools.count()
        self.pending_from: dict[str, dict[int, None]] = {}  # ... by address, oldest first
        # Bytes of client frames not yet whole, all connections together.
        self.buffers = BufferBudget(limits.partial_frame_bytes_total_max)
        # Removed elements whose reply never reached a client (see the module docstring).
        self.dropped_results = 0
        self.accepted = 0  # clients served so far (the metrics' connections counter)

    async def greet(
        self, stream: trio.abc.Stream, decoder: FrameDecoder
    ) -> tuple[Any, list[Any]]:
        """The first frame of a new connection (peer or client), within the limits of a
        connection that has not said who it is yet."""
        with self.unknown(stream):  # raises if it closes this connection for a newer one
            first = await first_frame(
                stream, decoder, self.limits.handshake_timeout_s, self.limits.hello_bytes_max
            )
        return first

    @contextlib.contextmanager
    def unknown(self, stream: trio.abc.Stream) -> Iterator[None]:
        """A connection that has not said who it is yet (its hello; a peer's cluster-key
        proof): one of at most ``hello_pending_max``, and of ``hello_pending_per_source_max``
        from its address; past either, the oldest of them is closed."""
        # Full (from this address, or in all): the oldest goes, not the newcomer.  A real
        # peer or client says who it is at once, so it is rarely the oldest; refusing
        # newcomers instead would let a few silent connections lock everyone out (and,
        # per address, everyone behind the same NAT).
        source = _source(stream)
        mine = self.pending_from.setdefault(source, {})
        if len(mine) >= self.limits.hello_pending_per_source_max:
            oldest = next(iter(mine))
            del mine[oldest]
            closing = self.hello_waiting.pop(oldest, None)  # None: closed for the total
            if closing is not None:
                closing.cancel()
        if len(self.hello_waiting) >= self.limits.hello_pending_max:
            oldest = next(iter(self.hello_waiting))
            self.hello_waiting.pop(oldest).cancel()
        number = next(self.hello_numbers)
        mine[number] = None
        try:
            with trio.CancelScope() as scope:
                self.hello_waiting[number] = scope
                try:
                    yield
                finally:
                    self.hello_waiting.pop(number, None)
        finally:
            mine.pop(number, None)
            if not mine:
                self.pending_from.pop(source, None)
        if scope.cancelled_caught:
            raise RemoteProtocolError(
                f"too many connections waiting to say who they are (limits "
                f"{self.limits.hello_pending_max}, {self.limits.hello_pending_per_source_max} "
                f"from {source}); this, the oldest, is closed"
            )

    @property
    def hello_pending(self) -> int:
        return len(self.hello_waiting)

    def _refusal(self, admin: bool) -> str | None:
        regular = len(self.clients) - self.admins
        if admin and self.admins >= self.limits.admin_clients_max:
            return f"too many admin clients (limit {self.limits.admin_clients_max})"
        if not admin and regular >= self.limits.clients_max:
            return (
                f"too many clients (limit {self.limits.clients_max}); administrative "
                "commands have slots of their own"
            )
        return None

    async def serve(
        self,
        stream: trio.abc.Stream,
        decoder: FrameDecoder,
        rest: list[Any],
        hello: Any,
        cert_role: str | None = None,
        cert_shown: bool = False,
    ) -> None:
        """Serve one client that said ``hello``, until it disconnects or misbehaves.
        ``cert_role``: what
        its TLS client certificate makes it (None: it showed none that counts);
        ``cert_shown``: it showed one (that counts or not), for the refusal's words."""
        greeting = parse_client_hello(hello)
        role = cert_role
        if role is None and self.tokens is not None:
            role = self.tokens.role_of(greeting.token)
        elif role is None and not self.client_certs:
            role = "admin"  # neither tokens nor certificates: anyone reaching the port
        if role is None:
            message = refusal_message(
                tokens=self.tokens is not None,
                certificates=self.client_certs,
                token_sent=greeting.token is not None,
                certificate_sent=cert_shown,
                tls=self.tls,
            )
            log.warning("refused a client without a good token or certificate", why=message)
            with trio.move_on_after(REFUSAL_SEND_S), contextlib.suppress(*DISCONNECTED):
                await stream.send_all(pack(encode_reply(ErrorReply(None, message, UNAUTHORIZED))))
            return
        refusal = self._refusal(greeting.admin)
        if refusal is not None:
            log.warning("refused a client", error=refusal)
            with trio.move_on_after(REFUSAL_SEND_S), contextlib.suppress(*DISCONNECTED):
                await stream.send_all(pack(encode_reply(ErrorReply(None, refusal, UNAVAILABLE))))
            return
        client = next(self.client_ids)
        self.accepted += 1
        send, receive = trio.open_memory_channel[Reply](self.limits.client_replies_max)
        limits = self.limits
        reader = ClientReader(
            client,
            decoder,
            lambda frame: self.check_frame(session, frame),
            limits.requests_per_client_max,
            limits.idle_connection_timeout_s,
            limits.frame_read_timeout_s,
        )
        session = ClientSession(
            send,
            reader,
            greeting.request_timeout_s,
            greeting.admin,
            greeting.version,
            greeting.session,
            role=role,
        )
        self.clients[client] = session
        self.admins += session.admin
        offer(session, Reply(pack(encode_reply(self.welcome()))))  # a fresh channel: room
        decoder.skip_oversized = True
        try:
            async with trio.open_nursery() as nursery:
                session.scope = nursery.cancel_scope
                nursery.start_soon(
                    write_replies, session, stream, receive, self.limits.reply_write_timeout_s
                )
                ending = await self._read_until_the_end(client, session, stream, rest)
                session.closed = True
                if ending is None:
                    nursery.cancel_scope.cancel()  # gone: nobody is left to write to
                else:
                    # Closing: what is queued goes out first, then the error line.
                    offer(session, Reply(pack(encode_reply(ending))))
                    await send.aclose()
        finally:
            decoder.release()
            session.closed = True
            self.dropped_results += session.queued_elements
            session.queued_elements = 0
            del self.clients[client]
            self.admins -= session.admin
            await self.to_owner(ClientGone(client))

    async def _read_until_the_end(
        self, client: int, session: ClientSession, stream: trio.abc.Stream, rest: list[Any]
    ) -> ErrorReply | None:
        """Read requests until the client goes (None) or must go (the error line)."""
        reader = session.reader
        try:
            reader.decoder.attach(self.buffers)
            if isinstance(stream, trio.SocketStream) and self.reactor.available:
                raw = socket.socket(fileno=stream.socket.fileno())
                try:
                    await read_by_owner(reader, raw, self.reactor, self.reactor.hand, rest)
                finally:
                    raw.detach()  # the descriptor is the stream's
            else:
                await read_by_task(reader, stream, self.to_owner, rest)
        except ConnectionTimeout as e:
            log.debug("closing a client connection", client=client, reason=e.message)
            return ErrorReply(None, e.message, TIMEOUT)
        except BufferBudgetExceeded as e:
            log.warning("closing a client connection", client=client, reason=e.message)
            return ErrorReply(None, e.message, UNAVAILABLE)
        except _Ending as e:
            log.warning("bad client input, closing connection", client=client, error=e.message)
            return ErrorReply(e.rid, e.message, e.code)
        except RemoteProtocolError as e:
            log.warning("bad client input, closing connection", client=client, error=e.message)
            return ErrorReply(e.rid, e.message, INVALID)
        except DISCONNECTED:
            pass  # reset by the client: nobody is left to answer
        return None

    async def to_owner(self, item: Any) -> None:
        """Put ``item`` in the owner's inbox (waiting while it is full) and wake it."""
        await put(self.inbox, item)
        self.reactor.wake()

    def check_frame(self, session: ClientSession, frame: Any) -> ClientRequest | None:
        """The request in a client's ``frame`` for the owner, or None when the session
        answered it itself (too large, refused); raises what ends the connection."""
        limits = self.limits
        if isinstance(frame, Oversized):
            message = (
                f"a frame of {frame.length} bytes exceeds the limit of {limits.frame_bytes_max}"
            )
            rid = oversized_request_id(frame.prefix)
            if rid is None:
                raise _Ending(message, None, TOO_LARGE)
            self._answer(session, ErrorReply(rid, message, TOO_LARGE))
            return None
        try:
            request = decode_request(frame, limits)
        except RemoteProtocolError as e:
            raise _Ending(e.message, request_id(frame), INVALID) from None
        if isinstance(request, ErrorReply):
            self._answer(session, request)
            return None
        if isinstance(request, ADMIN_ROLE_REQUESTS) and session.role != "admin":
            message = "join, leave, remove-member and deleting a queue need an admin token"
            self._answer(session, ErrorReply(request.rid, message, UNAUTHORIZED))
            return None
        if session.admin and not isinstance(request, ADMIN_REQUESTS):
            message = "an admin connection may only ask for stats, join, leave and remove-member"
            self._answer(session, ErrorReply(request.rid, message, INVALID))
            return None
        return request

    def deliver(self, client: int, replies: list[ClientReply]) -> None:
        """Hand a step's replies for one client to it (in one write where the socket
        takes them); never blocks the owner."""
        session = self.clients.get(client)
        if session is None or session.closed:
            self.dropped_results += sum(reply_elements(r) for r in replies)
            return
        self._queue(session, [Reply(self._encode(r), reply_elements(r)) for r in replies])
        for _ in replies:
            session.reader.answered()

    def _answer(self, session: ClientSession, reply: ClientReply) -> None:
        """An answer of the session's own (no request went to the owner)."""
        self._queue(session, [Reply(pack(encode_reply(reply)))])

    def _encode(self, reply: ClientReply) -> bytes:
        blob = pack(encode_reply(reply))
        if len(blob) - HEADER_BYTES <= self.limits.frame_bytes_max or not isinstance(reply, Done):
            return blob
        pieces = reply_frames(reply, self.limits.frame_bytes_max)
        return pack_many(encode_reply(part) for part in pieces)

    def _queue(self, session: ClientSession, replies: list[Reply]) -> None:
        for reply in write_now(session, replies):  # what the socket did not take
            if offer(session, reply):
                session.queued_elements += reply.elements
                continue
            self.dropped_results += reply.elements
            if not session.closed:
                log.warning("client is not reading its replies; closing it")
                close(session)
