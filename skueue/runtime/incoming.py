"""Incoming connections: greet each one, then serve it as a client or as a peer.

A connection's first frame says what it is.  A client's goes to the client sessions; a
peer's is checked (the handshake: who it is, where it listens, and that it is the same
incarnation the cluster knows), answered with our hello, and then every frame it sends
becomes an input for the owner.  Bad input closes that connection with one error frame.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Coroutine
from typing import Any

import trio

from skueue.core.errors import RemoteProtocolError
from skueue.host.address import Address
from skueue.host.replies import REFUSED, UNAVAILABLE, ErrorReply
from skueue.runtime.failover import served_at
from skueue.runtime.inbox import ChannelFrame, CopyWanted, LinkClosed, PeerHello
from skueue.runtime.network.connections import ConnectionClosed, frames, next_frame
from skueue.runtime.network.daemon_channel import ALIVE, parse_channel_frame
from skueue.runtime.network.handshake import (
    PeerGreeting,
    PeerProtocolMismatch,
    parse_peer_hello,
    reachable,
    replicas_mismatch,
)
from skueue.runtime.network.link_receiver import Inbound, PeerReader, StreamAcks
from skueue.runtime.network.sessions import DISCONNECTED
from skueue.runtime.restore import copy_frames
from skueue.runtime.security.peer_auth import AUTH_FRAME, mismatch, new_challenge
from skueue.runtime.security.tls import DaemonTls, looks_like_tls, peek, tls_failure
from skueue.runtime.state import DaemonContext, log, not_a_member_message, removed_message
from skueue.wire.client_codec import encode_reply
from skueue.wire.client_hello import parse_client_hello
from skueue.wire.framing import FrameDecoder, pack

# Closing a connection (a TLS goodbye, an error line) waits no longer than this for a
# client or peer that does not read.
CLOSE_S = 1.0
PLAINTEXT_REFUSAL = (
    "this daemon speaks TLS only (a member or client without TLS? start every member "
    "with the same --tls-* options; clients: skueue --tls-ca, $SKUEUE_TLS_CA or "
    "connect(tls=...))"
)


class Refusal(RemoteProtocolError):
    """A connection refused for a reason the log has said already: it gets the reason
    (with ``code``, where the opener must not try again) and is closed."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class IncomingConnections:
    """Accepts connections and serves each: a client's to the sessions, a peer's as its
    link's reading end (its frames become the owner's inputs)."""

    def __init__(self, ctx: DaemonContext) -> None:
        self.ctx = ctx

    async def on_connection(self, tcp: trio.SocketStream) -> None:
        stream: trio.abc.Stream = tcp
        try:
            if self.ctx.config.tls is not None:
                wrapped = await self._start_tls(tcp, self.ctx.config.tls)
                if wrapped is None:
                    return
                stream = wrapped
            await self._serve_connection(stream)
        except RemoteProtocolError as e:  # too many strangers: this one was closed
            log.warning("bad input, closing connection", error=str(e))
        finally:
            # Bounded: a TLS close says goodbye first, to a peer that may not read.
            with trio.move_on_after(CLOSE_S):
                await stream.aclose()
            await trio.aclose_forcefully(tcp)

    async def _serve_connection(self, stream: trio.abc.Stream) -> None:
        decoder = FrameDecoder(self.ctx.limits.frame_bytes_max)
        try:
            hello, rest = await self.ctx.sessions.greet(stream, decoder)
            if isinstance(hello, list) and hello[:1] == ["hello-peer"]:
                await self._peer_session(stream, decoder, hello, rest)
            elif isinstance(hello, list) and hello[:1] == ["hello-client"]:
                await self.ctx.ready.wait()
                wanted = parse_client_hello(hello).process
                if wanted is not None and (wanted != self.ctx.process_id or self.ctx.backup):
                    raise Refusal(*served_at(self.ctx, wanted))  # (runtime/failover.py)
                if self.ctx.backup is not None:  # a client with a seed list tries the next
                    raise Refusal(self.ctx.backup, UNAVAILABLE)
                role, shown = None, False
                if self.ctx.config.tls is not None and isinstance(stream, trio.SSLStream):
                    role = self.ctx.config.tls.client_role(stream)
                    shown = bool(stream.getpeercert())  # {} when none was asked or shown
                await self.ctx.sessions.serve(stream, decoder, rest, hello, role, shown)
            else:
                raise RemoteProtocolError(f"expected a hello, got {hello!r:.60}")
        except Refusal as e:  # said in the log already, in its own words
            await _try_send(stream, pack(encode_reply(ErrorReply(None, str(e), e.code))))
        except RemoteProtocolError as e:
            log.warning("bad input, closing connection", error=str(e))
            await _try_send(stream, pack(encode_reply(ErrorReply(None, str(e)))))
        except DISCONNECTED as e:
            # An abrupt disconnect: nothing to answer.  Under TLS it may also be a record
            # that failed its MAC (changed or replayed on the path): that is worth a line.
            if isinstance(e.__cause__, ssl.SSLError):
                log.warning("a TLS connection failed; closing it", error=tls_failure(e))

    async def _start_tls(
        self, tcp: trio.SocketStream, tls: DaemonTls
    ) -> trio.SSLStream[Any] | None:
        """The TLS handshake of a connection just accepted, within the handshake deadline
        and counted as a stranger; None (and one warning) when it fails.  A connection
        that speaks plaintext is told so in plaintext, so that a member or client started
        without TLS prints why it was refused."""
        source = _source(tcp)
        timeout_s = self.ctx.limits.handshake_timeout_s
        with self.ctx.sessions.unknown(tcp), trio.move_on_after(timeout_s):
            try:
                first = await peek(tcp, 1)
            except OSError:  # reset before a word
                return None
            if not first:
                return None  # gone before a word
            if not looks_like_tls(first):
                log.warning(PLAINTEXT_REFUSAL + "; closing", source=source)
                with contextlib.suppress(*DISCONNECTED):
                    # Its hello is read first: closing with unread bytes would reset
                    # the connection, and the reset could overtake our answer.
                    await tcp.receive_some(self.ctx.limits.hello_bytes_max)
                await _try_send(tcp, pack(encode_reply(ErrorReply(None, PLAINTEXT_REFUSAL))))
                return None
            stream = trio.SSLStream(tcp, tls.server, server_side=True)
            try:
                await stream.do_handshake()
            except DISCONNECTED as e:
                log.warning("a TLS handshake failed; closing", source=source, error=tls_failure(e))
                return None
            return stream
        log.warning(
            "no TLS handshake in time; closing",
            source=source,
            handshake_timeout_s=self.ctx.limits.handshake_timeout_s,
        )
        return None

    async def _peer_session(
        self, stream: trio.abc.Stream, decoder: FrameDecoder, hello: Any, rest: list[Any]
    ) -> None:
        assert self.ctx.links is not None  # peers are served once the links exist
        try:
            greeting = parse_peer_hello(hello)
        except PeerProtocolMismatch as e:
            log.warning("refused a daemon of another release", error=str(e))
            raise Refusal(str(e), REFUSED) from None
        peer = greeting.process
        address = reachable(greeting.address, stream)
        tls = self.ctx.config.tls
        if tls is not None and isinstance(stream, trio.SSLStream):
            refusal = tls.peer_refusal(stream)
            if refusal is not None:  # logged once, as bad input, by the caller
                raise RemoteProtocolError(f"refused the TLS certificate of peer {peer}: {refusal}")
        refusal = self._refusal(greeting)
        if refusal is None and peer != self.ctx.process_id:
            refusal = replicas_mismatch(self.ctx.process_id, self.ctx.config.replicas, greeting)
            if refusal is not None:
                log.warning("refused a daemon with another --replicas", error=refusal)
        if refusal is not None:
            raise Refusal(refusal, REFUSED)
        keys = self.ctx.config.cluster_keys
        if keys is not None or greeting.auth is not None:
            # Before anything of ours changes (a peer's previous session is ended below
            # only for a peer that proved it holds the key).
            rest = await self._authenticate(stream, decoder, greeting, rest)
        if peer == self.ctx.process_id:
            await self._answer_own_hello(stream, greeting)
            return
        if greeting.copy:  # a member lost with its disk, started anew: any incarnation
            await self._copy_session(stream, decoder, peer, address, rest)
            return
        if not self.ctx.links.same_incarnation(peer, greeting.nonce):
            if self.ctx.directory is not None and peer in self.ctx.directory.departed:
                raise RemoteProtocolError(
                    f"{peer} left this cluster, and a daemon cannot join again under the "
                    "process id of one that left: start it with another --id (and an "
                    "empty data directory)"
                )
            if self.ctx.config.replicas > 1:
                raise RemoteProtocolError(
                    f"{peer} restarted without its state (another data directory): start "
                    "it with its data directory, or, if that is lost, with an empty one "
                    "and --restore-from-copies (the other members keep its process)"
                )
            raise RemoteProtocolError(
                f"{peer} restarted without its state (in memory, or with another data "
                "directory); the cluster cannot take it back: start it with its data "
                "directory, or restart the whole cluster"
            )
        if greeting.channel:
            await self._channel_session(stream, decoder, peer, rest)
            return
        if self.ctx.backup is not None:  # its link tries again, where the leader said
            raise Refusal(self.ctx.backup)
        inbound = self.ctx.inbound.setdefault(peer, Inbound())
        session = next(self.ctx.session_numbers)
        raw: socket.socket | None = None
        acks: StreamAcks | None = None
        with trio.CancelScope() as scope:
            # A peer's links are read one at a time: a new connection ends the one before
            # (which may be half open and never end by itself), then takes its turn.
            previous = self.ctx.peer_sessions.get(peer)
            self.ctx.peer_sessions[peer] = (session, scope)
            if previous is not None:
                previous[1].cancel()
            try:
                async with inbound.lock:
                    if keys is None:  # with a key, our hello went with the handshake
                        await stream.send_all(pack(self.ctx.links.hello(inbound.handled)))
                    log.debug("peer connected", peer=peer, handled=inbound.handled)
                    if isinstance(stream, trio.SocketStream):
                        raw = socket.socket(fileno=stream.socket.fileno())
                        inbound.attach(raw)
                    else:  # TLS: acks go through the stream, from a task of their own
                        acks = inbound.attach_stream()
                    # A durable daemon takes frames only once its log is replayed; its
                    # hello said 0 before that, which makes the peer send all it has.
                    await self.ctx.links.ready.wait()
                    hello = PeerHello(peer, address, session, greeting.static, greeting.nonce)
                    await self.ctx.to_owner(hello)
                    reader = PeerReader(peer, inbound, decoder)
                    if raw is not None and self.ctx.reactor.available:
                        await reader.read_by_owner(raw, self.ctx.reactor, rest)
                    elif acks is None:
                        await self._read_peer(reader, stream, rest)
                    else:
                        reading = self._read_peer(reader, stream, rest)
                        await _both(reading, acks.run(inbound, stream))
            finally:
                if self.ctx.peer_sessions.get(peer, (0,))[0] == session:
                    del self.ctx.peer_sessions[peer]
                if raw is not None or acks is not None:
                    inbound.detach(raw, acks)
                    if raw is not None:
                        raw.detach()  # the descriptor is the stream's
                    self.ctx.to_owner_nowait(LinkClosed(peer, session))  # the inbox is large

    async def _channel_session(
        self, stream: trio.abc.Stream, decoder: FrameDecoder, peer: str, rest: list[Any]
    ) -> None:
        """Read a member's daemon channel (runtime/network/daemon_channel.py): each frame
        goes to the owner as it is, unlogged.  A member's newer channel ends its older
        one, which may be half open."""
        assert self.ctx.links is not None
        if self.ctx.config.cluster_keys is None:  # with a key, our hello went with the handshake
            await stream.send_all(pack(self.ctx.links.hello(0)))
        channels = self.ctx.channels
        assert channels is not None
        await channels.ready.wait()
        sessions = self.ctx.channel_sessions
        with trio.CancelScope() as scope:
            previous = sessions.get(peer)
            sessions[peer] = scope
            if previous is not None:
                previous.cancel()
            try:
                async for frame in frames(stream, decoder, rest):
                    frame = parse_channel_frame(frame)
                    channels.hearing.heard(peer, trio.current_time())
                    if frame != ALIVE:
                        await self.ctx.to_owner(ChannelFrame(peer, frame))
            finally:
                if sessions.get(peer) is scope:
                    del sessions[peer]

    async def _copy_session(
        self,
        stream: trio.abc.Stream,
        decoder: FrameDecoder,
        peer: str,
        address: Address,
        rest: list[Any],
    ) -> None:
        """A member restoring its process asks for our copy of it (runtime/restore.py):
        the owner writes it between two steps (runtime/copies.py), and it goes in parts
        of at most half a frame; then the connection closes."""
        ctx = self.ctx
        assert ctx.links is not None
        if ctx.config.cluster_keys is None:  # with a key, our hello went with the handshake
            await stream.send_all(pack(ctx.links.hello(0)))
        frame, _ = await next_frame(stream, decoder, rest, ctx.limits.handshake_timeout_s)
        if frame != ["copy-wanted"]:
            raise RemoteProtocolError(f'expected ["copy-wanted"], got {frame!r:.60}')
        await ctx.ready.wait()  # the owner runs
        wanted = CopyWanted(peer, address)
        await ctx.to_owner(wanted)
        await wanted.done.wait()
        part_bytes = min(ctx.limits.snapshot_chunk_bytes, ctx.limits.frame_bytes_max // 2)
        for blob in copy_frames(wanted.data, part_bytes):
            await stream.send_all(blob)

    def _refusal(self, greeting: PeerGreeting) -> str | None:
        """Why a peer is refused for good before anything of ours changes (None: it is
        not): it was removed (``skueue remove-member``), or it starts a static cluster
        taking us for a member while this daemon knows its members and it is none of
        them.  (A daemon still meeting its own peers cannot tell yet: the owner checks
        once it can: the host, at the hello.)"""
        directory, peer = self.ctx.directory, greeting.process
        if directory is None or peer == self.ctx.process_id:
            return None
        if peer in directory.removed:
            log.warning("refused a member that was removed from the cluster", peer=peer)
            return removed_message(peer)
        if peer in directory.departed:
            return None  # refused below, as one that left
        # Before the cluster-key check, so that the opener gets this line at its
        # handshake; nothing is recorded for a peer not authenticated yet.
        if directory.is_refused(peer, greeting.nonce) or (
            greeting.static and self.ctx.members_known and not directory.is_member(peer)
        ):
            log.warning(
                "refused a daemon that is not a member of this cluster (started with "
                "--peers; told to start with --join)",
                peer=peer,
                address=greeting.address,
            )
            return not_a_member_message(peer, self.ctx.address)
        return None

    async def _answer_own_hello(self, stream: trio.abc.Stream, greeting: PeerGreeting) -> None:
        """A hello with our own id: this daemon's own address in its ``--peers``
        (``PeerLinks.connect_all`` tells it by our nonce), or another daemon given our id,
        which learns so from our hello and stops.  Either way no peer came or goes: the
        owner is not told (it would report this daemon down, and count it as a peer),
        and nothing more is read, so the opener's close is no failure of ours."""
        assert self.ctx.links is not None
        if greeting.nonce != self.ctx.links.nonce:
            log.warning("a daemon with this daemon's process id said hello; refusing it",
                        process=self.ctx.process_id, address=greeting.address)  # fmt: skip
        if self.ctx.config.cluster_keys is None:  # with a key, our hello went with the handshake
            await stream.send_all(pack(self.ctx.links.hello(0)))

    async def _authenticate(
        self, stream: trio.abc.Stream, decoder: FrameDecoder, greeting: Any, rest: list[Any]
    ) -> list[Any]:
        """The acceptor's half of the cluster-key handshake (runtime/security/peer_auth.py): our
        hello with our challenge and proof, then the opener's proof, checked.  Returns
        the frames that came after it.  ``handled`` in our hello is read without waiting
        for the peer's previous session: it can only be lower than the truth, which makes
        the peer send again frames this daemon then skips."""
        assert self.ctx.links is not None
        keys, peer = self.ctx.config.cluster_keys, greeting.process
        theirs = None if greeting.auth is None else greeting.auth.get("challenge")
        if keys is None or theirs is None:
            raise RemoteProtocolError(mismatch(keys, peer))
        challenge = new_challenge()
        proof = keys.proof("accept", theirs, challenge, peer, self.ctx.process_id)
        handled = self.ctx.inbound[peer].handled if peer in self.ctx.inbound else 0
        auth = {"challenge": challenge, "proof": proof}
        with self.ctx.sessions.unknown(stream):  # still a stranger: it counts as one
            await stream.send_all(pack(self.ctx.links.hello(handled, auth)))
            try:
                frame, rest = await next_frame(
                    stream, decoder, rest, self.ctx.limits.handshake_timeout_s
                )
            except (ConnectionClosed, *DISCONNECTED):
                # The opener checks our proof first, and hangs up when it fails: it
                # holds another key.  (Under TLS its hang-up reads as a TLS failure.)
                log.warning(
                    "a peer failed the cluster-key check: it closed the link on this "
                    "daemon's proof (it holds another key)",
                    claimed=peer,
                )
                raise Refusal("peer authentication failed") from None
        if not (
            isinstance(frame, list)
            and len(frame) == 2
            and frame[0] == AUTH_FRAME
            and keys.verify(frame[1], "open", challenge, theirs, peer, self.ctx.process_id)
        ):
            log.warning("a peer failed the cluster-key check; closing", claimed=peer)
            raise Refusal("peer authentication failed")
        return rest

    async def _read_peer(
        self, reader: PeerReader, stream: trio.abc.Stream, rest: list[Any]
    ) -> None:
        """Read the peer's link in this task (TLS, or no epoll): its new frames go to the
        inbox, in their order."""
        async for frame in frames(stream, reader.decoder, rest):
            taken = reader.take(frame)
            if taken is not None:
                await self.ctx.to_owner(taken[1])
                reader.inbound.accepted = taken[0]  # only now: a cancelled put delivered nothing


async def _try_send(stream: trio.abc.Stream, blob: bytes) -> None:
    try:
        with trio.move_on_after(CLOSE_S):
            await stream.send_all(blob)
    except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError,
            ConnectionError):  # fmt: skip
        pass


async def _both(reader: Coroutine[Any, Any, None], acks: Coroutine[Any, Any, None]) -> None:
    """Read a TLS peer link and write its acks until either ends; the first error of
    either is raised as it is (not in an exception group, which the connection handler
    would not catch)."""
    failures: list[BaseException] = []

    async def guarded(job: Coroutine[Any, Any, None]) -> None:
        try:
            await job
        except (RemoteProtocolError, *DISCONNECTED) as e:
            failures.append(e)
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(guarded, reader)
        nursery.start_soon(guarded, acks)
    if failures:
        raise failures[0]


def _source(tcp: trio.SocketStream) -> str:
    try:
        return str(tcp.socket.getpeername()[0])
    except OSError:
        return "?"
