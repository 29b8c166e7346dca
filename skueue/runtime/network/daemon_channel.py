"""The daemon channel: one connection from this daemon to each other member, for what
concerns the daemons and not their processes' queues (docs/replication.md §6.2).

A process link (:mod:`skueue.runtime.network.peers`) is numbered, acknowledged and
resent after every reconnect, and each frame on it is an input of the host: logged,
replayed, and counted in ``handled``.  That is what the protocol's messages need, and
too much for a question about the daemon itself: ``skueue stats`` asking a member for
its counters, or ``skueue remove-member`` asking what a member's core still holds.  Those
go here instead: unnumbered, never logged, never resent, and lost with the connection
(the one who asked times out and says so).  The replication messages of stage 2b will
go here too: Raft takes loss, duplication and reordering in its stride.

A channel is opened with the process links' handshake (TLS, the cluster key, the
incarnation check), its hello marked ``{"channel": true}``; the accepting daemon answers
with its hello and then only reads.  What waits for a member that cannot be reached is
bounded by ``channel_frames_max``: the oldest frames go first.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import structlog
import trio

from skueue.core.errors import RemoteProtocolError
from skueue.host.address import Address
from skueue.runtime.errors import DaemonError, RefusedForGood
from skueue.runtime.member_silence import Hearing
from skueue.runtime.network.peers import RETRY_MAX_S, PeerLinks
from skueue.wire.framing import pack

log = structlog.get_logger("skueued")

# The daemons' questions and answers (runtime/requests.py, runtime/member_removal.py),
# and what goes to one process's replicas (runtime/replicas.py): a replication message
# (``["raft", process, message]``, the message as skueue/replication/codec.py writes
# it), a leader's watermarks, its checks, the parts of its snapshot, and a home's word
# that a copy of its group is dropped (runtime/re_replication.py): kind -> the frame's
# length.
CHANNEL_FRAMES = {
    "stats-query": 2, "stats-answer": 3, "remove-check": 3, "remove-answer": 3, "raft": 3,
    "acked": 3, "check": 4, "snapshot-part": 7, "leader": 4, "host-lost": 2, "dropped": 2,
    "alive": 1,
}
# With failover, each member says it is alive every few seconds (runtime/member_silence.py):
# heard on arrival, never the owner's business, and stale once its channel is down.
ALIVE = ["alive"]


# What goes to a process's replicas (runtime/replicas.py).  Not kept for a member whose
# channel is down: Raft takes their loss (the leader's next heartbeat finds where the
# follower stands), and kept they would be appends of up to a MiB each, stale by the
# time it is back.
REPLICATION_FRAMES = ("raft", "acked", "check", "snapshot-part", "dropped")
# What the owner takes at once whether its process's group leads or not: a member that
# waits for its election, or a backup of its process (runtime/failover.py), still answers
# the others' questions and takes a leader's word.  Answers to its own questions wait
# until it leads (they may step the host).
TAKEN_ALWAYS = (*REPLICATION_FRAMES, "stats-query", "remove-check", "leader", "host-lost")
# Except the elections' messages: a few bytes each, they wait like the questions and
# answers.  A member that restarts stands at once, and its voters' channels to it may
# still be reconnecting (up to a second); dropped, their votes would leave it waiting
# out a whole election timeout (3 to 6 s) before it asked again.
ELECTION_MESSAGES = ("vote", "vote_reply", "timeout_now")


def kept_while_down(frame: list[Any]) -> bool:
    """Whether ``frame`` waits for a member whose channel is down (else it is dropped)."""
    if frame[0] == "raft":
        message = frame[2]
        return isinstance(message, list) and bool(message) and message[0] in ELECTION_MESSAGES
    return frame[0] not in REPLICATION_FRAMES and frame != ALIVE


def parse_channel_frame(frame: Any) -> list[Any]:
    """A frame read from a daemon channel, checked for its kind and length (a
    replication message's fields are checked by its codec, where it is taken)."""
    if not (isinstance(frame, list) and frame and type(frame[0]) is str
            and CHANNEL_FRAMES.get(frame[0]) == len(frame)):  # fmt: skip
        raise RemoteProtocolError(f"unknown daemon-channel frame {frame!r:.60}")
    if frame[0] == "raft" and not (type(frame[1]) is str and isinstance(frame[2], list)):
        raise RemoteProtocolError("raft: expected [\"raft\", process id, message]")
    if frame[0] in REPLICATION_FRAMES and type(frame[1]) is not str:
        raise RemoteProtocolError(f"{frame[0]}: expected a process id, not {frame[1]!r:.60}")
    return frame


class ChannelSender:
    """The frames waiting for one member's channel, and whether it was closed."""

    def __init__(self) -> None:
        self.waiting: deque[list[Any]] = deque()
        self.wake = trio.Event()
        self.closed = False
        self.dropped = 0  # frames that went for want of room, since the last warning
        # Since when it lost its connection, or could not make one, and has not made
        # one since (None: up); with --failover, long enough makes its host lost for
        # good (runtime/re_replication.py).
        self.down_since: float | None = None

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def went_down(self, now: float) -> None:
        if self.down_since is None:
            self.down_since = now

    def lost(self, now: float) -> None:
        """Down: the replication frames that wait go, but for elections' (the others
        wait on)."""
        self.went_down(now)
        self.waiting = deque(f for f in self.waiting if kept_while_down(f))


class DaemonChannels:
    """This daemon's channels to the other members, each opened on first use."""

    def __init__(self, links: PeerLinks) -> None:
        self.links = links
        self.frames_max = links.limits.channel_frames_max
        # Set once the owner can take what channels carry (its replicas exist): before
        # the links (runtime/startup.py), whose replayed frames may wait for an election.
        self.ready = trio.Event()
        self.senders: dict[str, ChannelSender] = {}
        # Channels whose member's address has not arrived yet (no writer task yet).
        self.unaddressed: set[str] = set()
        # When each member's channel to this daemon last brought a frame (its readers,
        # runtime/incoming.py, say so).
        self.hearing = Hearing()

    def open(self, peer: str) -> ChannelSender | None:
        """``peer``'s channel, connecting from now if it was never used (None: the
        member departed)."""
        sender = self.senders.get(peer)
        if sender is None:
            if peer in self.links.directory.departed:
                return None
            sender = self.senders[peer] = ChannelSender()
            self.unaddressed.add(peer)
            self.start_addressed()
            sender.wake.set()
        return sender

    def send(self, peer: str, frame: list[Any]) -> None:
        """Queue ``frame`` for ``peer`` (dropped if it departed)."""
        sender = self.open(peer)
        if sender is None:
            return
        if sender.down and not kept_while_down(frame):
            sender.wake.set()  # dropped, but the writer tries to connect again
            return
        sender.waiting.append(frame)
        if len(sender.waiting) > self.frames_max:
            sender.waiting.popleft()
            if not sender.dropped:
                log.warning("a member's channel is full; dropping its oldest frames",
                            peer=peer, channel_frames_max=self.frames_max)  # fmt: skip
            sender.dropped += 1
        sender.wake.set()

    def start_addressed(self) -> None:
        for peer in [p for p in self.unaddressed if self.links.directory.address(p) is not None]:
            self.unaddressed.discard(peer)
            address = self.links.directory.address(peer)
            assert address is not None
            self.links.nursery.start_soon(self._writer, peer, address, self.senders[peer])

    def forget(self, peer: str) -> None:
        """A member left or was removed: close its channel, dropping what waits."""
        sender = self.senders.pop(peer, None)
        if sender is not None:
            sender.closed = True
            sender.wake.set()
        self.unaddressed.discard(peer)

    async def _writer(self, peer: str, address: Address, sender: ChannelSender) -> None:
        """Keep ``peer``'s channel connected while frames wait for it, until closed."""
        links = self.links
        await self.ready.wait()
        while not sender.closed:
            await sender.wake.wait()
            if sender.closed:
                return
            try:
                stream, greeting = await links.open_channel(address)
            except RefusedForGood as e:
                # The process link says so too, and stops the daemon: nothing to add.
                log.debug("a member refused this daemon's channel", peer=peer, error=str(e))
                return
            except DaemonError as e:
                log.info("a member's channel cannot connect; what waits for it goes",
                         peer=peer, frames=len(sender.waiting), error=str(e))  # fmt: skip
                sender.waiting.clear()
                sender.went_down(trio.current_time())
                sender.wake = trio.Event()
                continue
            if greeting.process != peer or not links.same_incarnation(peer, greeting.nonce):
                await trio.aclose_forcefully(stream)
                sender.lost(trio.current_time())
                await trio.sleep(RETRY_MAX_S)
                continue
            sender.down_since = None
            try:
                async with stream:
                    await _write_while_open(stream, sender)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                log.info("lost a member's channel; reconnecting", peer=peer, error=str(e))
                sender.lost(trio.current_time())


async def _write_while_open(stream: trio.abc.Stream, sender: ChannelSender) -> None:
    """Write what waits, as it comes, until the channel is closed (returns) or the
    connection fails (raises)."""
    while not sender.closed:
        if not sender.waiting:
            sender.wake = trio.Event()
            await sender.wake.wait()
            continue
        batch = list(sender.waiting)
        sender.waiting.clear()
        sender.dropped = 0
        await stream.send_all(b"".join(pack(frame) for frame in batch))
