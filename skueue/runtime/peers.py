"""Connections to the other daemons: handshake, address book, one coalescing writer each.

Each daemon opens one outgoing connection per peer and only writes on it; it reads what
peers send on the connections they opened to it.  A link that breaks is reopened; a peer
that stays unreachable (it left the cluster) is dropped with its queued messages, which
the protocol sends to departed processes only where losing them is harmless.

With dynamic membership a daemon learns of processes from the messages it handles, so a
link to a process it has not met yet is opened on first use, with the process id as the
address: clusters that change their members use the default ids (the listen address).
"""

from __future__ import annotations

from typing import Any

import structlog
import trio

from overlay.labels import Kind
from skueue.membership_messages import MembershipMessage
from skueue.messages import Message
from skueue.runtime.address import Address, AddressError, parse_address
from skueue.runtime.connections import coalescing_writer, first_frame
from skueue.runtime.errors import DaemonError, RemoteProtocolError
from skueue.runtime.framing import FrameDecoder, pack
from skueue.runtime.limits import Limits
from skueue.runtime.wire import decode_message

log = structlog.get_logger("skueued")

RETRY_START_S = 0.05
RETRY_MAX_S = 1.0


def parse_peer_frame(frame: Any) -> tuple[Kind, Message | MembershipMessage] | list[Any]:
    """A protocol message for one of our nodes, or a control frame (stats)."""
    if isinstance(frame, list) and len(frame) == 3 and frame[0] == "msg":
        kind = frame[1]
        if type(kind) is not int or not 0 <= kind < 3:
            raise RemoteProtocolError(f"msg: bad node kind {kind!r:.20}")
        return Kind(kind), decode_message(frame[2])
    if isinstance(frame, list) and len(frame) == 2 and frame[0] == "stats-query":
        return frame
    if isinstance(frame, list) and len(frame) == 3 and frame[0] == "stats-answer":
        return frame
    raise RemoteProtocolError(f"unknown peer frame {frame!r:.60}")


class PeerLinks:
    def __init__(
        self, process_id: str, address: Address, limits: Limits, nursery: trio.Nursery
    ) -> None:
        self.process_id = process_id
        self.address = address
        self.limits = limits
        self.nursery = nursery
        self.channels: dict[str, trio.MemorySendChannel[bytes]] = {}
        self.addresses: dict[str, Address] = {}

    def peer_ids(self) -> list[str]:
        return sorted(self.channels)

    async def connect_seed(self, address: Address, timeout_s: float) -> str:
        """Handshake with one daemon of the cluster to join; its process id."""
        stream, peer = await self._open(address, timeout_s)
        self._start_writer(peer, address, stream)
        return peer

    async def connect_all(self, addresses: tuple[Address, ...]) -> list[str]:
        """Handshake with every peer (in parallel); their process ids."""
        ids: dict[Address, str] = {}

        async def one(address: Address) -> None:
            stream, peer = await self._open(address, self.limits.connect_timeout_s)
            ids[address] = peer
            self._start_writer(peer, address, stream)

        async with trio.open_nursery() as n:
            for address in addresses:
                n.start_soon(one, address)
        return [ids[a] for a in addresses]

    async def _open(self, address: Address, timeout_s: float) -> tuple[trio.SocketStream, str]:
        delay = RETRY_START_S
        last_error = "no attempt"
        with trio.move_on_after(timeout_s):
            while True:
                try:
                    stream = await trio.open_tcp_stream(address.host, address.port)
                    await stream.send_all(pack(["hello-peer", self.process_id, str(self.address)]))
                    decoder = FrameDecoder(self.limits.frame_bytes_max)
                    hello, _ = await first_frame(stream, decoder, self.limits.handshake_timeout_s)
                    if (
                        not isinstance(hello, list)
                        or len(hello) != 3
                        or hello[0] != "hello-peer"
                        or type(hello[1]) is not str
                    ):
                        raise RemoteProtocolError(f"{address} is not a skueued peer")
                    return stream, hello[1]
                except (OSError, trio.BrokenResourceError, RemoteProtocolError) as e:
                    last_error = str(e)
                await trio.sleep(delay)
                delay = min(RETRY_MAX_S, delay * 2)
        raise DaemonError(f"cannot reach peer {address} within {timeout_s:g} s: {last_error}")

    def _start_writer(
        self, peer: str, address: Address, stream: trio.SocketStream | None
    ) -> trio.MemorySendChannel[bytes]:
        send, receive = trio.open_memory_channel[bytes](self.limits.peer_writes_max)
        self.channels[peer] = send
        self.addresses[peer] = address
        self.nursery.start_soon(self._writer, peer, address, stream, receive)
        return send

    async def _writer(
        self,
        peer: str,
        address: Address,
        stream: trio.SocketStream | None,
        blobs: trio.MemoryReceiveChannel[bytes],
    ) -> None:
        try:
            while True:
                if stream is None:
                    stream, _ = await self._open(address, self.limits.connect_timeout_s)
                try:
                    async with stream:
                        await coalescing_writer(stream, blobs)
                    return
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                    log.warning("lost the link to a peer; reconnecting", peer=peer, error=str(e))
                    stream = None
        except DaemonError as e:
            log.warning("peer unreachable; dropping its link", peer=peer, error=str(e))
            if self.channels.get(peer) is not None:
                del self.channels[peer]
            blobs.close()

    async def send(self, peer: str, blob: bytes) -> None:
        channel = self.channels.get(peer)
        if channel is None:
            try:
                address = parse_address(peer)
            except AddressError:
                log.error("no link to process and its id is no address; dropped", peer=peer)
                return
            channel = self._start_writer(peer, address, None)
        try:
            await channel.send(blob)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            log.warning("link to a departed peer is closed; message dropped", peer=peer)
