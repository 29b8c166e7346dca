"""Connections to the other daemons: handshake, address book, one writer each
(:mod:`skueue.runtime.link_writer`: the owner writes itself while the writer is idle).

Each daemon opens one outgoing connection per peer and only writes on it; it reads what
peers send on the connections they opened to it.  A link that breaks is reopened; a peer
that stays unreachable (it left the cluster) is dropped with its queued messages, which
the protocol sends to departed processes only where losing them is harmless.

Process ids are not addresses: where a process listens comes from the member directory
(:mod:`skueue.runtime.directory`), which the daemons spread by gossip.  A link to a
process met in a message is opened on first use at the directory's address; frames for
a process whose address has not arrived yet are held (within ``held_bytes_max``) until
it does.  The links also remember since when each peer is down, for error replies and
``skueue stats``.
"""

from __future__ import annotations

import os
from typing import Any

import structlog
import trio

from skueue.core.messages.membership import MembershipMessage
from skueue.core.messages.stages import Message
from skueue.overlay.labels import Kind
from skueue.runtime.address import Address
from skueue.runtime.connections import first_frame
from skueue.runtime.directory import Directory
from skueue.runtime.errors import DaemonError
from skueue.runtime.limits import Limits
from skueue.runtime.link_writer import Item, LinkWriter
from skueue.wire.errors import RemoteProtocolError
from skueue.wire.framing import FrameDecoder, pack
from skueue.wire.peer import decode_message

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
    if isinstance(frame, list) and len(frame) == 3 and frame[0] in ("member", "members"):
        return frame
    if isinstance(frame, list) and len(frame) == 4 and frame[0] == "departed":
        return frame
    raise RemoteProtocolError(f"unknown peer frame {frame!r:.60}")


class PeerLinks:
    def __init__(
        self,
        process_id: str,
        address: Address,
        limits: Limits,
        nursery: trio.Nursery,
        directory: Directory,
    ) -> None:
        self.process_id = process_id
        self.address = address
        self.limits = limits
        self.nursery = nursery
        self.directory = directory
        self.channels: dict[str, LinkWriter] = {}
        self.down_since: dict[str, float] = {}
        # Sent in every hello: a hello that comes back with it was our own (an address of
        # this daemon in its own --peers), one with our id but another nonce is a clash.
        self.nonce = os.urandom(8).hex()
        # The nonce each peer first said hello with.  A daemon that restarts comes back
        # with a new one and without its state (there is no durable storage yet), and
        # serving it as if it were the same member would corrupt the queue; it is refused.
        self.incarnations: dict[str, str] = {}
        self.restarted: set[str] = set()
        # Frames for processes whose address has not arrived yet, oldest first.
        self.held: dict[str, list[bytes]] = {}
        self.held_bytes = 0

    def mark_down(self, peer: str) -> None:
        if peer in self.directory.addresses:
            self.down_since.setdefault(peer, trio.current_time())

    def mark_up(self, peer: str) -> None:
        if self.down_since.pop(peer, None) is not None:
            log.info("peer is back", peer=peer)

    def down(self) -> dict[str, float]:
        """Members whose link is down, with the seconds since it went down."""
        now = trio.current_time()
        return {p: now - t for p, t in sorted(self.down_since.items()) if p != self.process_id}

    async def connect_seed(self, address: Address, timeout_s: float) -> str:
        """Handshake with one daemon of the cluster to join; its process id."""
        stream, peer, nonce = await self._open(address, timeout_s)
        if not await self._adopt(address, stream, peer, nonce):
            raise DaemonError(f"{address} is this daemon itself, not another cluster")
        return peer

    async def connect_all(self, addresses: tuple[Address, ...]) -> dict[Address, str]:
        """Handshake with every peer (in parallel); their process ids.  An address that
        turns out to be this daemon itself (listed in its own ``--peers``) is left out."""
        ids: dict[Address, str] = {}
        done: set[Address] = set()

        async def one(address: Address) -> None:
            stream, peer, nonce = await self._open(address, self.limits.connect_timeout_s)
            done.add(address)
            if await self._adopt(address, stream, peer, nonce):
                ids[address] = peer
            else:
                log.info("left this daemon's own address out of its peers", address=str(address))

        async with trio.open_nursery() as outer:
            outer.start_soon(self._report_waiting, addresses, done)
            async with trio.open_nursery() as n:
                for address in addresses:
                    n.start_soon(one, address)
            outer.cancel_scope.cancel()
        return ids

    async def _adopt(
        self, address: Address, stream: trio.SocketStream, peer: str, nonce: str | None
    ) -> bool:
        """Keep a link just opened to ``peer`` as a member's (True), or close it because
        it reached this daemon itself (False); another daemon with our id is an error."""
        if peer == self.process_id:
            await stream.aclose()
            if nonce == self.nonce:
                return False
            raise DaemonError(
                f"the daemon at {address} has this daemon's process id {peer!r}; "
                "give each daemon its own --id"
            )
        self.same_incarnation(peer, nonce)
        self.directory.learn(peer, address)
        self._start_writer(peer, address, stream)
        return True

    async def _report_waiting(self, addresses: tuple[Address, ...], done: set[Address]) -> None:
        """Say now and then whom start-up still waits for, so that it is not silent."""
        while True:
            await trio.sleep(self.limits.peers_wait_report_s)
            missing = [str(a) for a in addresses if a not in done]
            log.info("waiting for peers", missing=missing)

    def same_incarnation(self, peer: str, nonce: str | None) -> bool:
        """False for a member that came back from a restart (its nonce changed)."""
        if nonce is None or peer == self.process_id:
            return True
        first = self.incarnations.setdefault(peer, nonce)
        if first == nonce:
            return True
        if peer not in self.restarted:
            self.restarted.add(peer)
            log.error(
                "a member restarted and lost its state; refusing it (this cluster cannot "
                "take it back until daemons keep their data on disk)",
                peer=peer,
            )
        self.mark_down(peer)
        return False

    def hello(self) -> list[Any]:
        return ["hello-peer", self.process_id, str(self.address), self.nonce]

    async def _open(
        self, address: Address, timeout_s: float
    ) -> tuple[trio.SocketStream, str, str | None]:
        """Connect and shake hands: the stream, the peer's id and its nonce."""
        delay = RETRY_START_S
        last_error = "no attempt"
        with trio.move_on_after(timeout_s):
            while True:
                try:
                    stream = await trio.open_tcp_stream(address.host, address.port)
                    await stream.send_all(pack(self.hello()))
                    decoder = FrameDecoder(self.limits.frame_bytes_max)
                    hello, _ = await first_frame(stream, decoder, self.limits.handshake_timeout_s)
                    if isinstance(hello, list) and len(hello) >= 3 and hello[0] == "error":
                        # Refused on purpose (e.g. we restarted without our state):
                        # trying again cannot help.
                        await stream.aclose()
                        raise DaemonError(f"{address} refused this daemon: {hello[2]!s:.300}")
                    if (
                        not isinstance(hello, list)
                        or len(hello) not in (3, 4)
                        or hello[0] != "hello-peer"
                        or type(hello[1]) is not str
                    ):
                        raise RemoteProtocolError(f"{address} is not a skueued peer")
                    return stream, hello[1], hello[3] if len(hello) == 4 else None
                except (OSError, trio.BrokenResourceError, RemoteProtocolError) as e:
                    last_error = str(e)
                await trio.sleep(delay)
                delay = min(RETRY_MAX_S, delay * 2)
        raise DaemonError(f"cannot reach peer {address} within {timeout_s:g} s: {last_error}")

    def _start_writer(
        self, peer: str, address: Address, stream: trio.SocketStream | None
    ) -> LinkWriter:
        send, receive = trio.open_memory_channel[Item](self.limits.peer_writes_max)
        link = self.channels[peer] = LinkWriter(send)
        self.nursery.start_soon(self._writer, peer, address, stream, link, receive)
        return link

    async def _writer(
        self,
        peer: str,
        address: Address,
        stream: trio.SocketStream | None,
        link: LinkWriter,
        blobs: trio.MemoryReceiveChannel[Item],
    ) -> None:
        try:
            while True:
                if stream is None:
                    stream, _, nonce = await self._open(address, self.limits.connect_timeout_s)
                    if not self.same_incarnation(peer, nonce):
                        await stream.aclose()
                        stream = None
                        await trio.sleep(RETRY_MAX_S)
                        continue
                self.mark_up(peer)
                try:
                    async with stream:
                        await link.serve(stream, blobs)
                    return
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                    log.warning("lost the link to a peer; reconnecting", peer=peer, error=str(e))
                    self.mark_down(peer)
                    stream = None
        except DaemonError as e:
            log.warning("peer unreachable; dropping its link", peer=peer, error=str(e))
            self.mark_down(peer)
            if self.channels.get(peer) is not None:
                del self.channels[peer]
            blobs.close()

    def forget(self, peer: str) -> None:
        """A member left: close its link and forget that it was down."""
        link = self.channels.pop(peer, None)
        if link is not None:
            link.channel.close()
        self.down_since.pop(peer, None)
        self.held_bytes -= sum(len(b) for b in self.held.pop(peer, []))

    async def send(self, peer: str, blob: bytes) -> None:
        link = self.channels.get(peer)
        if link is None:
            if peer in self.directory.departed:
                log.debug("message for a departed process dropped", peer=peer)
                return
            address = self.directory.address(peer)
            if address is None:
                self._hold(peer, blob)
                return
            link = self._start_writer(peer, address, None)
        left = link.write_now(blob)
        if left is None:
            return
        try:
            await link.queue(left)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            log.warning("link to a departed peer is closed; message dropped", peer=peer)

    def _hold(self, peer: str, blob: bytes) -> None:
        if self.held_bytes + len(blob) > self.limits.held_bytes_max:
            log.error(
                "no address for a process and the held frames are full; message dropped",
                peer=peer,
                held_bytes=self.held_bytes,
            )
            return
        if peer not in self.held:
            log.info("no address for a process yet; holding its messages", peer=peer)
        self.held.setdefault(peer, []).append(blob)
        self.held_bytes += len(blob)

    async def release_held(self) -> None:
        """Send what was held for processes whose address has arrived.  The owner calls
        this before it sends a step's frames, so held frames keep their place in line."""
        for peer in [p for p in self.held if self.directory.address(p) is not None]:
            blobs = self.held.pop(peer)
            self.held_bytes -= sum(len(b) for b in blobs)
            for blob in blobs:
                await self.send(peer, blob)
