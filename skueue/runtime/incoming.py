"""Incoming connections: greet each one, then serve it as a client or as a peer.

A connection's first frame says what it is.  A client's goes to the client sessions; a
peer's is checked (the handshake: who it is, where it listens, and that it is the same
incarnation the cluster knows), answered with our hello, and then every frame it sends
becomes an input for the owner.  Bad input closes that connection with one error frame.
"""

from __future__ import annotations

import socket
from typing import Any

import trio

from skueue.runtime.connections import frames, next_frame, put
from skueue.runtime.handshake import parse_peer_hello, reachable
from skueue.runtime.inputs import PeerControl, PeerGone, PeerHello, PeerInput
from skueue.runtime.link_receiver import Inbound, Numbering
from skueue.runtime.peer_auth import AUTH_FRAME, mismatch, new_challenge
from skueue.runtime.peers import parse_peer_frame
from skueue.runtime.sessions import DISCONNECTED
from skueue.runtime.state import DaemonState, log
from skueue.wire.client_replies import ErrorReply
from skueue.wire.errors import RemoteProtocolError
from skueue.wire.framing import FrameDecoder, pack


class IncomingConnections(DaemonState):
    async def _on_connection(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder(self.limits.frame_bytes_max)
        async with stream:  # the error reply below must go out before the stream closes
            try:
                hello, rest = await self.sessions.greet(stream, decoder)
                if isinstance(hello, list) and hello[:1] == ["hello-peer"]:
                    await self._peer_session(stream, decoder, hello, rest)
                elif isinstance(hello, list) and hello[:1] == ["hello-client"]:
                    await self.ready.wait()
                    await self.sessions.serve(stream, decoder, rest, hello)
                else:
                    raise RemoteProtocolError(f"expected a hello, got {hello!r:.60}")
            except RemoteProtocolError as e:
                log.warning("bad input, closing connection", error=str(e))
                await _try_send(stream, pack(ErrorReply(None, str(e)).frame()))
            except DISCONNECTED:
                pass  # an abrupt disconnect: nothing to answer

    async def _peer_session(
        self, stream: trio.SocketStream, decoder: FrameDecoder, hello: Any, rest: list[Any]
    ) -> None:
        assert self.links is not None  # peers are served once the links exist
        greeting = parse_peer_hello(hello)
        peer = greeting.process
        address = reachable(greeting.address, stream)
        keys = self.config.cluster_keys
        if keys is not None or greeting.auth is not None:
            # Before anything of ours changes (a peer's previous session is ended below
            # only for a peer that proved it holds the key).
            rest = await self._authenticate(stream, decoder, greeting, rest)
        if not self.links.same_incarnation(peer, greeting.nonce):
            raise RemoteProtocolError(
                f"{peer} restarted without its state (in memory, or with another data "
                "directory); the cluster cannot take it back: start it with its data "
                "directory, or restart the whole cluster"
            )
        inbound = self.inbound.setdefault(peer, Inbound())
        session = next(self.session_numbers)
        raw: socket.socket | None = None
        with trio.CancelScope() as scope:
            # A peer's links are read one at a time: a new connection ends the one before
            # (which may be half open and never end by itself), then takes its turn.
            previous = self.peer_sessions.get(peer)
            self.peer_sessions[peer] = (session, scope)
            if previous is not None:
                previous[1].cancel()
            try:
                async with inbound.lock:
                    if keys is None:  # with a key, our hello went with the handshake
                        await stream.send_all(pack(self.links.hello(inbound.handled)))
                    log.debug("peer connected", peer=peer, handled=inbound.handled)
                    raw = socket.socket(fileno=stream.socket.fileno())
                    inbound.attach(raw)
                    # A durable daemon takes frames only once its log is replayed; its
                    # hello said 0 before that, which makes the peer send all it has.
                    await self.links.ready.wait()
                    await self.inbox_send.send(PeerHello(peer, address, session))
                    await self._read_peer(peer, inbound, stream, decoder, rest)
            finally:
                if self.peer_sessions.get(peer, (0,))[0] == session:
                    del self.peer_sessions[peer]
                if raw is not None:
                    inbound.detach(raw)
                    raw.detach()  # the descriptor is the stream's
                    self.inbox_send.send_nowait(PeerGone(peer, session))  # the inbox is large

    async def _authenticate(
        self, stream: trio.SocketStream, decoder: FrameDecoder, greeting: Any, rest: list[Any]
    ) -> list[Any]:
        """The acceptor's half of the cluster-key handshake (runtime/peer_auth.py): our
        hello with our challenge and proof, then the opener's proof, checked.  Returns
        the frames that came after it.  ``handled`` in our hello is read without waiting
        for the peer's previous session: it can only be lower than the truth, which makes
        the peer send again frames this daemon then skips."""
        assert self.links is not None
        keys, peer = self.config.cluster_keys, greeting.process
        theirs = None if greeting.auth is None else greeting.auth.get("challenge")
        if keys is None or theirs is None:
            raise RemoteProtocolError(mismatch(keys, peer))
        challenge = new_challenge()
        proof = keys.proof("accept", theirs, challenge, peer, self.process_id)
        handled = self.inbound[peer].handled if peer in self.inbound else 0
        auth = {"challenge": challenge, "proof": proof}
        with self.sessions.unknown(stream):  # still a stranger: it counts as one
            await stream.send_all(pack(self.links.hello(handled, auth)))
            frame, rest = await next_frame(stream, decoder, rest, self.limits.handshake_timeout_s)
        if not (
            isinstance(frame, list)
            and len(frame) == 2
            and frame[0] == AUTH_FRAME
            and keys.verify(frame[1], "open", challenge, theirs, peer, self.process_id)
        ):
            log.warning("a peer failed the cluster-key check; closing", claimed=peer)
            raise RemoteProtocolError("peer authentication failed")
        return rest

    async def _read_peer(
        self,
        peer: str,
        inbound: Inbound,
        stream: trio.SocketStream,
        decoder: FrameDecoder,
        rest: list[Any],
    ) -> None:
        """Put the peer's new frames in the inbox, in their order; skip those taken
        before (resent after a reconnect)."""
        numbering = Numbering(peer, inbound)
        async for frame in frames(stream, decoder, rest):
            number = numbering.number(frame)
            if number is None or number <= inbound.accepted:
                continue
            try:
                parsed = parse_peer_frame(frame)
            except RemoteProtocolError:
                inbound.accepted = number  # no peer should send it: never take it again
                inbound.handled = number
                raise
            if isinstance(parsed, tuple):
                kind, message = parsed
                await put(self.inbox_send, PeerInput(peer, kind, message, number, frame[2]))
            else:
                await put(self.inbox_send, PeerControl(peer, parsed, number))
            inbound.accepted = number  # only now: a cancelled put delivered nothing


async def _try_send(stream: trio.SocketStream, blob: bytes) -> None:
    try:
        with trio.move_on_after(1):
            await stream.send_all(blob)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass
