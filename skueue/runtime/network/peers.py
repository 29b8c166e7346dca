"""Connections to the other daemons: handshake, address book, and one reliable link each
(:mod:`skueue.runtime.network.link_sender`: numbered frames, an outbox until acknowledged, a resend
after every reconnect).

Each daemon opens one outgoing connection per peer and writes its frames there; the peer
sends back only acknowledgements on it.  It reads what peers send on the connections they
opened to it (:mod:`skueue.runtime.incoming`).  A link that breaks is reopened and loses
nothing; a peer that stays unreachable past ``connect_timeout_s`` is reported down, and
its frames wait in the outbox (up to ``outbox_bytes_max``) while the link keeps trying.
A peer that left the cluster is forgotten with its outbox: the protocol sends to departed
processes only what losing is harmless.

Process ids are not addresses: where a process listens comes from the member directory
(:mod:`skueue.host.directory`), which the daemons spread by gossip.  A link to a
process met in a message is opened on first use at the directory's address; frames for
a process whose address has not arrived yet wait in its outbox until it does.  The links
also remember since when each peer is down, for error replies and ``skueue stats``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import structlog
import trio

from skueue.core.errors import RemoteProtocolError
from skueue.core.messages.membership import MembershipMessage
from skueue.core.messages.stages import Message
from skueue.host.address import Address
from skueue.host.directory import Directory
from skueue.host.replies import REFUSED
from skueue.overlay.labels import Kind
from skueue.runtime.errors import DaemonError, RefusedForGood
from skueue.runtime.limits import Limits
from skueue.runtime.network.connections import first_frame
from skueue.runtime.network.handshake import (
    PEER_PROTOCOL,
    REPLICAS_AUTO,
    PeerGreeting,
    PeerProtocolMismatch,
    parse_peer_hello,
    replicas_mismatch,
)
from skueue.runtime.network.link_sender import LinkSender, read_acks, watch_acks
from skueue.runtime.security.peer_auth import AUTH_FRAME, ClusterKeys, mismatch, new_challenge
from skueue.runtime.security.tls import DaemonTls, refused_for_good, tls_failure
from skueue.wire.framing import FrameDecoder, pack
from skueue.wire.peer import decode_message

log = structlog.get_logger("skueued")

RETRY_START_S = 0.05
REMOVAL_QUESTIONS = ("remove-check", "remove-answer")  # runtime/member_removal.py
RETRY_MAX_S = 1.0


def parse_peer_frame(frame: Any) -> tuple[Kind, Message | MembershipMessage] | list[Any]:
    """A protocol message for one of our nodes, or a control frame (gossip).  Stats
    and removal checks go on the daemon channel (daemon_channel.py) since peer protocol
    3; a link still takes them, as inputs the daemon ignores, because the outbox a
    member's log kept from an earlier release may hold some, numbered."""
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
    if isinstance(frame, list) and len(frame) == 3 and frame[0] in REMOVAL_QUESTIONS:
        return frame
    if isinstance(frame, list) and len(frame) == 2 and frame[0] == "removed":
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
        keys: ClusterKeys | None = None,
        tls: DaemonTls | None = None,
    ) -> None:
        self.process_id = process_id
        self.keys = keys  # the cluster key(s): every link proves both ends hold one
        self.tls = tls  # TLS on every link (runtime/security/tls.py); None: plaintext
        self.address = address
        self.limits = limits
        self.nursery = nursery
        self.directory = directory
        self.senders: dict[str, LinkSender] = {}
        # Links whose frames wait for the process's address (no writer task yet).
        self.unaddressed: set[str] = set()
        # Links given up because their outbox outgrew outbox_bytes_max.
        self.failed: set[str] = set()
        self.down_since: dict[str, float] = {}
        # Peers our link is connected to right now (a writer is serving it).
        self.connected: set[str] = set()
        # Sent in every hello: a hello that comes back with it was our own (an address of
        # this daemon in its own --peers), one with our id but another nonce is a clash.
        self.nonce = os.urandom(8).hex()
        self.replicas = 1  # --replicas, said in every hello (set at start)
        self.failover = False  # another replica may lead our process (set at start)
        self.seed: str | None = None  # the process a joiner joins through, once it answered
        # The nonce each peer first said hello with.  A durable daemon keeps its nonce in
        # its data directory; one that comes back with a new nonce came back without its
        # state (in memory, or another directory), and serving it as if it were the same
        # member would corrupt the queue: it is refused.
        self.incarnations: dict[str, str] = {}
        self.restarted: set[str] = set()
        # A durable daemon keeps each nonce it learns in its data directory (and fills
        # ``incarnations`` from there before any hello), or a restart would take a peer
        # that lost its state for the one whose frames it counted.
        self.remember_incarnation: Callable[[str, str], None] | None = None
        # With failover: where each process whose leader said so serves, and that
        # leader's term (runtime/stand_in.py); a link goes there from its next connection.
        self.led_at: dict[str, tuple[int, Address]] = {}
        # The links of the stand-ins this daemon runs: they take the same word, for a
        # stand-in links to the processes other stand-ins serve (runtime/stand_in.py).
        self.stand_ins: list[PeerLinks] = []
        # The writers trying to connect, and those connected: how to end each, and where.
        self.connecting: dict[str, tuple[trio.CancelScope, Address]] = {}
        self.serving: dict[str, tuple[trio.CancelScope, Address]] = {}
        # Set once the links' outboxes are what they must be: at once for an in-memory
        # daemon, after the replay of its input log for a durable one.  Writers wait for
        # it, or they would take a peer's count of our frames for a mistake.
        self.ready = trio.Event()

    def relocate(self, peer: str, term: int, address: Address) -> None:
        """``peer``'s replication group elected a leader in ``term`` that serves it at
        ``address``: the link goes there from its next connection (an older term's word
        is stale).  (A link still connected to the old leader, paused or cut off, ends
        when its acknowledgements stop: ``peer_ack_timeout_s``.)"""
        known = self.led_at.get(peer)
        if known is not None and known[0] >= term:
            return
        self.led_at[peer] = (term, address)
        if address != self.directory.address(peer):
            log.info("a process is served elsewhere now (failover)", peer=peer, term=term,
                     address=str(address))  # fmt: skip
        for scopes in (self.connecting, self.serving):
            scope, target = scopes.get(peer, (None, address))
            if scope is not None and target != address:  # start over at the new one
                scope.cancel()
        for links in self.stand_ins:
            if links.process_id != peer:
                links.relocate(peer, term, address)

    def where(self, peer: str, address: Address) -> Address:
        """Where to connect the link to ``peer``, found at ``address`` in the directory."""
        led = self.led_at.get(peer)
        return address if led is None else led[1]

    def mark_down(self, peer: str) -> None:
        if peer in self.directory.addresses and peer not in self.down_since:
            self.down_since[peer] = trio.current_time()
            log.info("peer is down", peer=peer)

    def mark_up(self, peer: str) -> None:
        since = self.down_since.pop(peer, None)
        if since is not None:
            log.info("peer is back", peer=peer, down_s=round(trio.current_time() - since, 1))

    def down(self) -> dict[str, float]:
        """Members whose link is down, with the seconds since it went down."""
        now = trio.current_time()
        return {p: now - t for p, t in sorted(self.down_since.items()) if p != self.process_id}

    def unacknowledged(self) -> int:
        """Frames sent to peers that they have not acknowledged yet."""
        return sum(link.unacknowledged() for link in self.senders.values())

    async def connect_seed(self, address: Address, timeout_s: float) -> str:
        """Handshake with one daemon of the cluster to join; its process id (asked once:
        a joiner not given ``--replicas`` asks before it opens its data directory)."""
        if self.seed is None:
            stream, greeting = await self._open(address, timeout_s)
            if not await self._adopt(address, stream, greeting):
                raise DaemonError(f"{address} is this daemon itself, not another cluster")
            self.seed = greeting.process
        return self.seed

    async def connect_all(self, addresses: tuple[Address, ...]) -> dict[Address, str]:
        """Handshake with every peer (in parallel); their process ids.  An address that
        turns out to be this daemon itself (listed in its own ``--peers``) is left out."""
        ids: dict[Address, str] = {}
        done: set[Address] = set()

        async def one(address: Address) -> None:
            # Static: a member that knows its cluster and not us refuses us for good.
            stream, greeting = await self._open(
                address, self.limits.connect_timeout_s, static=True
            )
            done.add(address)
            if await self._adopt(address, stream, greeting):
                ids[address] = greeting.process
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
        self, address: Address, stream: trio.abc.Stream, greeting: PeerGreeting
    ) -> bool:
        """Keep a link just opened to a peer as a member's (True), or close it because
        it reached this daemon itself (False); another daemon with our id is an error."""
        peer = greeting.process
        if peer == self.process_id:
            await trio.aclose_forcefully(stream)
            if greeting.nonce == self.nonce:
                return False
            raise DaemonError(
                f"the daemon at {address} has this daemon's process id {peer!r}; "
                "give each daemon its own --id"
            )
        self.same_incarnation(peer, greeting.nonce)
        # (The directory learns the address from the caller: at start-up, or through
        # the host's JoinStart input; this task is not the host's owner.)
        link = self.senders.setdefault(peer, LinkSender())
        self.nursery.start_soon(self._writer, peer, address, link, (stream, greeting.handled))
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
        first = self.incarnations.get(peer)
        if first is None:
            self.incarnations[peer] = first = nonce
            if self.remember_incarnation is not None:
                self.remember_incarnation(peer, nonce)
        if first == nonce:
            return True
        if peer not in self.restarted:
            self.restarted.add(peer)
            log.error(
                "a member restarted and lost its state; refusing it (this cluster cannot "
                "take it back: it must start with its data directory)",
                peer=peer,
            )
        self.mark_down(peer)
        return False

    def hello(
        self,
        handled: int | None = None,
        auth: dict[str, str] | None = None,
        static: bool = False,
        channel: bool = False,
        copy: bool = False,
    ) -> list[Any]:
        """Our hello; in answer to a peer's, with how many of its frames we handled; with a
        cluster key, our challenge (and, answering, our proof); ``static``: we start a
        static cluster and take the peer for a member of it (runtime/network/handshake.py);
        ``channel``: this connection is our daemon channel, not a link
        (runtime/network/daemon_channel.py); ``copy``: this connection asks for the
        peer's copy of our process (runtime/restore.py)."""
        hello: list[Any] = ["hello-peer", self.process_id, str(self.address), self.nonce]
        if handled is not None:
            hello.append(handled)
        options: dict[str, Any] = {
            "protocol": PEER_PROTOCOL,
            **(auth or {}),
            **({"static": True} if static else {}),
            **({"channel": True} if channel else {}),
            **({"copy": True} if copy else {}),
            **({"replicas": self.replicas} if self.replicas != 1 else {}),
        }
        return [*hello, options]

    async def open_channel(self, address: Address) -> tuple[trio.abc.Stream, PeerGreeting]:
        """Connect our daemon channel to the member at ``address`` (the links' handshake)."""
        return await self._open(address, self.limits.connect_timeout_s, channel=True)

    async def open_copy(self, address: Address) -> tuple[trio.abc.Stream, PeerGreeting]:
        """Connect to ask the member at ``address`` for its copy of our process (the
        links' handshake; runtime/restore.py)."""
        return await self._open(address, self.limits.connect_timeout_s, copy=True)

    async def _open(
        self,
        address: Address,
        timeout_s: float,
        static: bool = False,
        channel: bool = False,
        copy: bool = False,
    ) -> tuple[trio.abc.Stream, PeerGreeting]:
        """Connect and shake hands: the stream and what the peer's hello said.  A peer
        that refuses us for good (:class:`RefusedForGood`) is not asked again."""
        delay = RETRY_START_S
        last_error = "no attempt"
        with trio.move_on_after(timeout_s):
            while True:
                try:
                    stream = await self._connect(address)
                    challenge = new_challenge() if self.keys is not None else None
                    auth = None if challenge is None else {"challenge": challenge}
                    ours = self.hello(auth=auth, static=static, channel=channel, copy=copy)
                    await stream.send_all(pack(ours))
                    decoder = FrameDecoder(self.limits.frame_bytes_max)
                    hello, _ = await first_frame(stream, decoder, self.limits.handshake_timeout_s)
                    if isinstance(hello, list) and len(hello) >= 3 and hello[0] == "error":
                        # Refused on purpose (e.g. we restarted without our state):
                        # trying again cannot help.
                        await trio.aclose_forcefully(stream)
                        why = f"{address} refused this daemon: {hello[2]!s:.400}"
                        if hello[3:4] == [REFUSED]:
                            raise RefusedForGood(why)
                        raise DaemonError(why)
                    try:
                        greeting = parse_peer_hello(hello)
                    except PeerProtocolMismatch as e:
                        await trio.aclose_forcefully(stream)
                        raise RefusedForGood(f"{address}: {e}") from None
                    except RemoteProtocolError:
                        await trio.aclose_forcefully(stream)
                        raise RemoteProtocolError(f"{address} is not a skueued peer") from None
                    await self._prove(stream, address, greeting, challenge)
                    if self.replicas == REPLICAS_AUTO and greeting.process != self.process_id:
                        # A joiner not given --replicas takes its seed's
                        # (runtime/replica_count.py): its first link is to the seed.
                        self.replicas = greeting.replicas
                    mismatch_ = replicas_mismatch(self.process_id, self.replicas, greeting)
                    if mismatch_ is not None and greeting.process != self.process_id:
                        await trio.aclose_forcefully(stream)
                        raise RefusedForGood(f"{address}: {mismatch_}")
                    return stream, greeting
                except trio.BrokenResourceError as e:
                    last_error = tls_failure(e)
                    hopeless = None if self.tls is None else refused_for_good(last_error)
                    if hopeless is not None:
                        raise DaemonError(
                            f"the daemon at {address} {hopeless}: start every member with "
                            "the same --tls-* options and certificates of one CA"
                        ) from None
                except (OSError, RemoteProtocolError) as e:
                    last_error = str(e)
                await trio.sleep(delay)
                delay = min(RETRY_MAX_S, delay * 2)
        raise DaemonError(f"cannot reach peer {address} within {timeout_s:g} s: {last_error}")

    async def _connect(self, address: Address) -> trio.abc.Stream:
        """A new connection to ``address``; with TLS, its handshake done in time and the
        other end's certificate checked (runtime/security/tls.py)."""
        tcp = await trio.open_tcp_stream(address.host, address.port)
        if self.tls is None:
            return tcp
        stream = trio.SSLStream(tcp, self.tls.opener, server_hostname=None)
        try:
            with trio.fail_after(self.limits.handshake_timeout_s):
                await stream.do_handshake()
        except trio.TooSlowError:
            await trio.aclose_forcefully(tcp)
            raise RemoteProtocolError(
                f"no TLS handshake with {address} within {self.limits.handshake_timeout_s:g} s"
            ) from None
        except BaseException:
            await trio.aclose_forcefully(tcp)
            raise
        refusal = self.tls.peer_refusal(stream)
        if refusal is not None:
            await trio.aclose_forcefully(stream)
            raise DaemonError(f"the daemon at {address} is not a member: {refusal}")
        return stream

    async def _prove(
        self,
        stream: trio.abc.Stream,
        address: Address,
        greeting: PeerGreeting,
        challenge: str | None,
    ) -> None:
        """With a cluster key: check the acceptor's proof, then send ours (peer_auth.py).
        A peer with no key, another key or a key where we have none is refused for good:
        trying again cannot help."""
        keys = self.keys
        if keys is None and greeting.auth is None:
            return
        if keys is None or greeting.auth is None or challenge is None:
            await trio.aclose_forcefully(stream)
            raise DaemonError(mismatch(keys, f"the daemon at {address}"))
        theirs, proof = greeting.auth.get("challenge"), greeting.auth.get("proof")
        opener, acceptor = self.process_id, greeting.process
        if theirs is None or not keys.verify(proof, "accept", challenge, theirs, opener, acceptor):
            await trio.aclose_forcefully(stream)
            raise DaemonError(
                f"the daemon at {address} failed the cluster-key check: it holds another key"
            )
        proof = keys.proof("open", theirs, challenge, opener, acceptor)
        await stream.send_all(pack([AUTH_FRAME, proof]))

    async def _writer(
        self,
        peer: str,
        address: Address,
        link: LinkSender,
        connected: tuple[trio.abc.Stream, int] | None = None,
    ) -> None:
        """Keep the link to ``peer`` connected and written until it is closed (the peer
        left).  A peer unreachable for ``connect_timeout_s`` is reported down; the link
        keeps trying, and its outbox waits."""
        await self.ready.wait()
        while not link.closed:
            target = self.where(peer, address) if connected is None else address
            if connected is None:
                try:
                    with trio.CancelScope() as scope:
                        self.connecting[peer] = scope, target
                        connected = await self._reconnect(peer, target)
                except RefusedForGood:
                    raise  # not a member (any more): the daemon stops with the reason
                except DaemonError as e:
                    log.warning("peer unreachable; its frames wait", peer=peer, error=str(e))
                    self.mark_down(peer)
                    await trio.sleep(RETRY_MAX_S)
                    continue
                finally:
                    self.connecting.pop(peer, None)
                if connected is None:
                    if not scope.cancelled_caught:  # (relocated: at once, to the new place)
                        await trio.sleep(RETRY_MAX_S)
                    continue
            stream, handled = connected
            connected = None
            if link.closed:  # while it connected (a backup's links close: failover.py)
                await trio.aclose_forcefully(stream)
                return
            if handled >= link.next_number:
                await trio.aclose_forcefully(stream)
                if self.failover:
                    # Another replica of our process led it while this daemon did not
                    # run, and sent these frames: our group tells us we are a backup
                    # now, or were replaced, and that closes the link (failover.py).
                    log.info("a peer took more of this process's frames than this daemon "
                             "sent: another replica led it meanwhile (failover)",
                             peer=peer, handled=handled, sent=link.next_number - 1)  # fmt: skip
                    await trio.sleep(RETRY_MAX_S)
                    continue
                # The peer counted more of our frames than this daemon ever sent: it
                # knows an earlier life of ours, whose state this one does not have.
                # Every reconnect would end the same way; say so once and stop.
                raise DaemonError(
                    f"{peer} has handled {handled} frames from this daemon, which sent "
                    f"only {link.next_number - 1}: this daemon restarted without its state "
                    "(in memory, or with another data directory) and the cluster cannot "
                    "take it back; start it with its data directory"
                )
            self.mark_up(peer)
            self.connected.add(peer)
            try:
                async with stream:
                    with trio.CancelScope() as scope:
                        self.serving[peer] = scope, target
                        await _serve_connection(stream, link, handled, self.limits)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError,
                    RemoteProtocolError) as e:
                if not link.closed:
                    # A TLS record that fails its MAC (changed or replayed on the path)
                    # arrives as a broken stream caused by an ssl error: name that.
                    error = tls_failure(e) if self.tls is not None else str(e)
                    log.warning("lost the link to a peer; reconnecting", peer=peer, error=error)
                    self.mark_down(peer)
            finally:
                self.connected.discard(peer)
                self.serving.pop(peer, None)

    async def _reconnect(self, peer: str, address: Address) -> tuple[trio.abc.Stream, int] | None:
        """A new connection to ``peer`` and how much of our frames it handled (None: it is
        another incarnation, refused)."""
        stream, greeting = await self._open(address, self.limits.connect_timeout_s)
        if greeting.process != peer or not self.same_incarnation(peer, greeting.nonce):
            await trio.aclose_forcefully(stream)
            return None
        return stream, greeting.handled

    @staticmethod
    async def answers(address: Address, timeout_s: float) -> bool:
        """Whether anything accepts a connection at ``address`` within ``timeout_s`` (a
        bare TCP connection, closed at once: no hello, so the peer's state is untouched)."""
        with trio.move_on_after(timeout_s):
            try:
                stream = await trio.open_tcp_stream(address.host, address.port)
            except OSError:
                return False
            await trio.aclose_forcefully(stream)
            return True
        return False

    def forget(self, peer: str) -> None:
        """A member left: close its link, dropping its outbox, and forget that it was down."""
        link = self.senders.pop(peer, None)
        if link is not None:
            link.close()
        self.unaddressed.discard(peer)
        self.down_since.pop(peer, None)

    def send(self, peer: str, frames: list[Any]) -> None:
        """Queue one step's frames for ``peer`` on its link (opened on first use)."""
        link = self.senders.get(peer)
        if link is None:
            if peer in self.directory.departed:
                log.debug("message for a departed process dropped", peer=peer)
                return
            if peer in self.failed:
                return  # said once, loudly, when it failed
            link = self.senders[peer] = LinkSender()
            self.unaddressed.add(peer)
            self.start_addressed()
        link.add(frames)
        if link.outbox_bytes > self.limits.outbox_bytes_max:
            self._fail(peer, link)

    def start_addressed(self) -> None:
        """Start the links of processes whose address has arrived.  Their frames waited
        in their outboxes, so they keep their place in line."""
        for peer in [p for p in self.unaddressed if self.directory.address(p) is not None]:
            self.unaddressed.discard(peer)
            address = self.directory.address(peer)
            assert address is not None
            log.debug("opening a link", peer=peer, address=str(address))
            self.nursery.start_soon(self._writer, peer, address, self.senders[peer])

    def _fail(self, peer: str, link: LinkSender) -> None:
        """The outbox outgrew its limit: the peer has been unreachable far longer than any
        request can wait.  Give the link up (what it held is lost) rather than the
        daemon's memory."""
        log.error(
            "a peer's outbox outgrew outbox_bytes_max; giving its link up and dropping "
            "the frames it held",
            peer=peer,
            outbox_bytes=link.outbox_bytes,
            frames=link.unacknowledged(),
            outbox_bytes_max=self.limits.outbox_bytes_max,
        )
        self.forget(peer)
        self.failed.add(peer)
        self.mark_down(peer)


async def _serve_connection(
    stream: trio.abc.Stream, link: LinkSender, handled: int, limits: Limits
) -> None:
    """Write the link on ``stream`` and take the peer's acks from it, until the link is
    closed (returns) or the connection fails or stops carrying acks (raises)."""
    failures: list[BaseException] = []

    async def guarded(job: Any) -> None:
        try:
            await job()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError,
                RemoteProtocolError) as e:
            failures.append(e)
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(guarded, lambda: link.serve(stream, handled))
        nursery.start_soon(guarded, lambda: read_acks(stream, link, limits.frame_bytes_max))
        nursery.start_soon(guarded, lambda: watch_acks(link, limits.peer_ack_timeout_s))
    if failures:
        raise failures[0]
