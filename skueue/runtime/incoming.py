"""Incoming connections: greet each one, then serve it as a client or as a peer.

A connection's first frame says what it is.  A client's goes to the client sessions; a
peer's is checked (the handshake: who it is, where it listens, and that it is the same
incarnation the cluster knows), answered with our hello, and then every frame it sends
becomes an input for the owner.  Bad input closes that connection with one error frame.
"""

from __future__ import annotations

from typing import Any

import trio

from skueue.runtime.connections import frames, put
from skueue.runtime.handshake import parse_peer_hello, reachable
from skueue.runtime.inputs import PeerControl, PeerGone, PeerHello, PeerInput
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
        peer, advertised, nonce = parse_peer_hello(hello)
        address = reachable(advertised, stream)
        if not self.links.same_incarnation(peer, nonce):
            raise RemoteProtocolError(
                f"{peer} restarted without its state; the cluster cannot take it back "
                "(no durable storage yet): restart the whole cluster"
            )
        await stream.send_all(pack(self.links.hello()))
        log.debug("peer connected", peer=peer)
        session = next(self.session_numbers)
        with trio.CancelScope() as scope:
            self.peer_sessions[peer] = (session, scope)
            await self.inbox_send.send(PeerHello(peer, address, session))
            try:
                async for frame in frames(stream, decoder, rest):
                    parsed = parse_peer_frame(frame)
                    if isinstance(parsed, tuple):
                        kind, message = parsed
                        await put(self.inbox_send, PeerInput(peer, kind, message))
                    else:
                        await put(self.inbox_send, PeerControl(peer, parsed))
            finally:
                if self.peer_sessions.get(peer, (0,))[0] == session:
                    del self.peer_sessions[peer]
                self.inbox_send.send_nowait(PeerGone(peer, session))  # the inbox is large


async def _try_send(stream: trio.SocketStream, blob: bytes) -> None:
    try:
        with trio.move_on_after(1):
            await stream.send_all(blob)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass
