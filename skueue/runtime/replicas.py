"""The daemon's replicas (docs/replication.md §6.2): the group of its own process, which
it leads, and its follower slots, one per group of the ``k − 1`` processes before it in
ring order (skueue/host/placement.py).

This is where their messages meet the daemon channel (runtime/network/daemon_channel.py):
each goes as ``["raft", process, message]`` to the member that hosts the replica, and
what comes back is decoded by the replication codec and stepped into the replica of
that process.  A message that does not decode is its sender's fault: that channel is
closed, and Raft takes the loss.  Time comes as one tick per ``heartbeat_interval_s``
to every replica: the leader beats for its followers with it; the follower slots stand
for election only with ``--failover`` (runtime/stand_in.py), but their timers must run
anyway, for they tell a stray's vote request (ignored while their leader was heard
lately) from the one of a leader that went quiet.

More frames go from the leader to its followers, for the state they apply
(runtime/applied_state.py): ``["acked", P, {peer: number}]``, what each peer
acknowledged of P's links, with the ticks when it changed; ``["check", P, index,
digest]``, the digest of P's state at each of its snapshots; and the parts of a
snapshot too large for one message (runtime/snapshot_transfer.py).  Each is taken only
from the replica the follower knows as its leader.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from skueue.core.errors import RemoteProtocolError
from skueue.core.ops import Structure
from skueue.host.address import Address
from skueue.host.directory import Directory
from skueue.host.host import Host
from skueue.host.placement import groups_followed_by, ring_order, voters_of
from skueue.replication.codec import ReplicationCodecError, decode_message, encode_message
from skueue.replication.config import Config, HostId
from skueue.replication.messages import Message
from skueue.runtime.applied_state import state_digest
from skueue.runtime.durability.entry_store import SnapshotEntryStore
from skueue.runtime.durability.input_log import InputLog
from skueue.runtime.failover import lost_while_away
from skueue.runtime.follower_slot import FollowerSlot, MakeHost, copies_on_disk
from skueue.runtime.group import ProcessGroup
from skueue.runtime.homecoming import hand_back_if_due
from skueue.runtime.limits import Limits
from skueue.runtime.network.daemon_channel import ALIVE, REPLICATION_FRAMES, DaemonChannels
from skueue.runtime.network.link_receiver import Inbound
from skueue.runtime.network.peers import PeerLinks
from skueue.runtime.new_host import new_host
from skueue.runtime.re_replication import reconfigure
from skueue.runtime.replica_driver import ReplicaDriver
from skueue.runtime.snapshot_transfer import take_part
from skueue.runtime.state import DaemonContext

# A leader sends its links' watermarks at least this often (ticks), changed or not.
WATERMARK_TICKS_MAX = 10
# With --failover, a leader says where it serves its process at its election and at
# least this often (ticks) after, for members that were down or restarted meanwhile.
ANNOUNCE_TICKS = 10
# Why a member's host is taken for lost when its process left (skueue leave).
LEFT = "it left the cluster"

log = structlog.get_logger("skueued")


def channel_sender(channels: DaemonChannels, process: str) -> Callable[[HostId, Message], None]:
    """How the replicas of ``process``'s group send: on the daemon channel."""

    def send(to: HostId, message: Message) -> None:
        channels.send(to, ["raft", process, encode_message(message)])

    return send


class DaemonReplicas:
    def __init__(
        self,
        own: str,
        group: ProcessGroup,
        slots: dict[str, FollowerSlot],
        channels: DaemonChannels,
        links: PeerLinks,
        limits: Limits,
        now: float,
    ) -> None:
        self.own = own
        self.limits = limits
        self.group = group
        self.slots = slots
        self.channels = channels
        self.links = links  # whose acks the followers hear of (module docstring)
        self.next_tick = now + limits.heartbeat_interval_s
        self.marks_sent: dict[str, int] = {}
        self.ticks_since_marks = 0
        # With --failover (runtime/stand_in.py): the slots stand for election, the
        # group's leader says where it serves (``listening``: not at the process's own
        # address, for a stand-in), the frames for a process this daemon stands in for
        # go to its stand-in (``forward``), and ``elected`` starts one.
        self.failover = False
        self.listening: Address | None = None
        self.announced: tuple[tuple[int, str], int] = ((0, ""), 0)  # ((term, role), ticks since)
        self.forward: dict[str, Callable[[str, list[Any]], None]] = {}
        self.standing: dict[str, str] = {}  # process -> where its stand-in here listens
        self.elected: Callable[[FollowerSlot], None] | None = None
        self.home_caught_up = 0  # a stand-in's: ticks its process's home kept up (homecoming.py)
        # Re-replication and growth (runtime/re_replication.py): every member in ring
        # order (the ones this daemon started with, and those it met since: a home's
        # is kept up to date from its directory at each tick, in place, for its
        # stand-ins share it), the hosts lost for good (shared with the stand-ins),
        # how a leader's snapshot is asked for (a new copy starts from one), and how a
        # copy is opened for a group whose leader added this daemon (None: a
        # stand-in's, which keeps no copies).
        self.ring: list[str] = []
        self.founders: frozenset[str] | None = None  # a home's: the members it started with
        self._ring_of: frozenset[str] = frozenset()
        self.want_snapshot: Callable[[], None] | None = None
        # The hosts a home's committed configuration named at its last tick: one it no
        # longer names is told its copy is dropped.
        self._copies_named: frozenset[str] = frozenset()
        self.lost: set[str] = set()
        self.remember_lost: Callable[[list[str]], None] | None = None  # in the data directory
        self.remember_dropped: Callable[[list[str]], None] | None = None  # copies moved away
        # A home's: what it does once its own group replaced it (runtime/failover.py).
        self.lost_while_away: Callable[[str], None] | None = None
        self.voters_per_group = 1  # --replicas
        self.open_copy: Callable[[str], FollowerSlot] | None = None
        # A joiner's: what it does once its group has a second voter (runtime/startup.py:
        # it joins then), until it says it is done.
        self.when_replicated: Callable[[], bool] | None = None

    def receive(self, peer: str, frame: list[Any]) -> None:
        """A replication frame from ``peer``'s channel (daemon_channel.REPLICATION_FRAMES)."""
        kind, process = frame[0], frame[1]  # their lengths are checked (daemon_channel.py)
        if kind == "dropped":
            self._dropped(peer, process)
            return
        forward = self.forward.get(process)
        if forward is not None:
            forward(peer, frame)
            return
        replica = self.group if process == self.own else self.slots.get(process)
        if replica is None:
            replica = self._copy_for(peer, process, frame)
        if replica is None or (peer not in replica.node.config.members and not _joining(replica)):
            # A group this daemon holds no replica of, or a sender that holds none
            # (a member's placement differs from ours, which only a bug or a forged
            # frame makes): Raft takes the loss.
            if replica is not None and self._removed(replica, peer, process):
                self.channels.send(peer, ["dropped", process])
                return
            log.warning("a replication message from outside its group; dropped",
                        peer=peer, process=process)  # fmt: skip
            return
        if kind == "raft":
            try:
                message = decode_message(frame[2])
            except ReplicationCodecError as e:
                raise RemoteProtocolError(f"raft message for {process}: {e}") from None
            replica.receive(peer, message)
        elif isinstance(replica, FollowerSlot) and peer == replica.node.leader:
            _to_follower(replica, kind, frame, self.limits)

    def _copy_for(self, peer: str, process: str, frame: list[Any]) -> FollowerSlot | None:
        """A new copy of ``process``'s group, for the first append or snapshot of a
        leader that added this daemon to it (runtime/re_replication.py); None for any
        other frame, or past ``replica_copies_max``."""
        open_copy = self.open_copy
        if open_copy is None or frame[0] != "raft" or process == self.own:
            return None
        message = frame[2]
        if not (message and message[0] in ("append", "snapshot")):
            return None
        if process not in self.ring and process != peer:  # (a home leads its own group)
            return None
        if len(self.slots) >= self.limits.replica_copies_max:
            log.warning("a leader adds this daemon to its group, and it keeps as many copies "
                        "as it may (replica_copies_max); refused", process=process,
                        peer=peer, copies=len(self.slots))  # fmt: skip
            return None
        log.info("this daemon keeps a new copy of a process's log, for its group's "
                 "leader added it", process=process, leader=peer)  # fmt: skip
        slot = self.slots[process] = open_copy(process)
        return slot

    def host_lost(self, hosts: list[str], why: str = "skueue remove-member") -> None:
        """``hosts`` were lost for good, or left: the groups this daemon leads replace
        them (runtime/re_replication.py)."""
        me = self.channels.links.process_id  # (a stand-in's own is the process it serves)
        new = [h for h in hosts
               if h in self.ring and h not in self.lost and h not in (self.own, me)]
        if new:
            say = log.info if why == LEFT else log.warning
            say("hosts lost for good: the groups led here replace them", hosts=new, why=why)
            self.lost.update(new)
            if self.remember_lost is not None:
                self.remember_lost(new)

    def _committed_members(self) -> frozenset[str]:
        node = self.group.node
        return frozenset(node.log.config_at(node.commit).members)

    def _removed(self, replica: ReplicaDriver, peer: str, process: str) -> bool:
        """Whether ``peer``, which speaks for ``process``'s group, is told it was removed
        from it (runtime/re_replication.py): a copy its home removed, told by the home's
        leader; or the home itself, taken for lost while it was away, told by any copy
        whose committed configuration no longer names it (runtime/failover.py)."""
        node = replica.node
        if node.commit == 0 or peer in node.log.config_at(node.commit).members:
            return False
        return peer == process or (replica is self.group and self.group.leading)

    def _tell_dropped(self) -> None:
        """A home tells the hosts its committed configuration no longer names that their
        copy of its group is dropped (runtime/re_replication.py)."""
        if self.group.node.host != self.own:
            return  # (a stand-in's group: its home does it, back home)
        members = self._committed_members()
        for host in self._copies_named - members - self.lost - {self.own}:
            self.channels.send(host, ["dropped", self.own])
        self._copies_named = members

    def _dropped(self, peer: str, process: str) -> None:
        """``["dropped", P]``: P's home removed this daemon's copy from its group, and the
        removal is committed; the copy goes."""
        if process == self.own == self.group.node.host:
            if not self.group.leading and self.lost_while_away is not None:
                self.lost_while_away(peer)  # (a home's own group: it stops)
            return
        slot = self.slots.get(process)
        if slot is None or peer != process:
            return  # (only the home says so: no copy here, or a stand-in's copy)
        del self.slots[process]
        slot.discard()
        if self.remember_dropped is not None:
            self.remember_dropped([process])
        log.info("the home of a process moved its copy from this daemon; the copy here "
                 "is gone", process=process)  # fmt: skip

    def departed(self, process: str) -> None:
        """``process`` left the cluster (``skueue leave``), its daemon with it: the
        groups led here replace its host as a lost one, and this daemon's copy of its
        group goes."""
        self.host_lost([process], LEFT)  # (in the ring still: it is refreshed at ticks)
        slot = self.slots.pop(process, None)
        if slot is not None:
            slot.discard()
            log.info("a member left: its process's copy here is gone", process=process)

    def _silent_for_good(self, now: float) -> None:
        """With failover, a member this daemon has not heard from for
        ``member_lost_after_s`` is lost for good, as if an operator said so
        (runtime/member_silence.py)."""
        after = self.limits.member_lost_after_s
        if after <= 0:
            return
        daemon = self.channels.links  # (this daemon's, a stand-in's too: not the process's)
        me, departed = daemon.process_id, daemon.directory.departed
        others = [m for m in self.ring if m != me and m not in self.lost and m not in departed]
        silent = self.channels.hearing.silent(others, now, after)
        if silent:
            self.host_lost(silent, f"nothing heard from it for {after:g} s "
                                   "(member_lost_after_s)")  # fmt: skip

    def seconds_to_tick(self, now: float) -> float:
        return max(0.0, self.next_tick - now)

    def tick_if_due(self, now: float) -> None:
        if now >= self.next_tick:
            self.group.tick()
            if self.failover:
                self._silent_for_good(now)
            if self.failover and self.group.node.host != self.own:  # a stand-in's
                hand_back_if_due(self)
            self.update_ring()
            if self.group.leading:
                reconfigure(self.group, self.lost, self.ring, self.voters_per_group,
                            self.reaches, self.want_snapshot)  # fmt: skip
                self._tell_dropped()
                self._join_if_replicated()
            for process, slot in self.slots.items():
                # A stand-in says hello with the process's nonce: a copy that does not
                # know it could not serve the process (runtime/stand_in.py).
                slot.failover = self.failover and process in self.links.incarnations
                slot.tick()
            self.next_tick = now + self.limits.heartbeat_interval_s
            self._send_watermarks()
            if self.failover:
                self._announce()

    def _join_if_replicated(self) -> None:
        node = self.group.node
        then = self.when_replicated
        if then is not None and len(node.log.config_at(node.commit).voters) >= min(
            2, self.voters_per_group
        ) and then():
            self.when_replicated = None

    def update_ring(self) -> None:
        """A home's ring: the members it started with and every member its directory
        has met since (joiners), in ring order.  A copy of a process that left while
        this daemon was away (it heard in the directory gossip) goes now."""
        if self.founders is None:
            return
        directory = self.links.directory
        met = frozenset(directory.addresses) | self.founders
        if met != self._ring_of:
            for process in [p for p in self.slots if p in directory.departed]:
                self.departed(process)
            self._ring_of = met
            self.ring[:] = ring_order(met)

    def reaches(self, host: str) -> bool:
        """Whether ``host``'s daemon channel is up (a new replica must be reachable):
        one never used before connects from now on, and is up once it did."""
        known = host in self.channels.senders
        sender = self.channels.open(host)
        return known and sender is not None and not sender.down

    def _announce(self) -> None:
        """With failover, the leader says where it serves its process (module
        docstring of runtime/stand_in.py), to every member but this daemon; a home
        that does not lead says it is alive (runtime/member_silence.py), as often."""
        node = self.group.node
        said, ticks = self.announced  # a new leader says so at once
        if said == (node.term, node.role) and ticks + 1 < ANNOUNCE_TICKS:
            self.announced = (said, ticks + 1)
            return
        self.announced = ((node.term, node.role), 0)
        frame: list[Any]
        if node.role == "leader":
            frame = ["leader", self.own, node.term, str(self.listening or self.links.address)]
        elif node.host == self.own:
            frame = ALIVE
        else:
            return  # (a stand-in that lost its election: its daemon's home speaks)
        me = self.channels.links.process_id
        for member in self.links.directory.others():
            if member != me:
                self.channels.send(member, frame)

    def _send_watermarks(self) -> None:
        """Tell the followers what the peers acknowledged of the process's links (their
        outboxes drop it): when that changed, and now and then anyway, for a follower
        that lost the last one (the channel may drop frames, or it restarted)."""
        if not self.group.leading:
            return
        marks = {peer: link.acked_through() for peer, link in self.links.senders.items()}
        self.ticks_since_marks += 1
        if marks != self.marks_sent or self.ticks_since_marks >= WATERMARK_TICKS_MAX:
            self.marks_sent, self.ticks_since_marks = marks, 0
            self._to_followers(["acked", self.own, marks])

    def send_check(self, index: int, host: Host, inbound: dict[str, Inbound]) -> None:
        """After the leader's snapshot at ``index``: its state's digest, for each
        follower to compare its own with when it gets there (not for a state too large
        to walk at each snapshot: ``replica_check_elements_max``)."""
        if host.process.entries() > self.limits.replica_check_elements_max:
            return
        handled = {peer: i.handled for peer, i in inbound.items()}
        numbered = {peer: link.next_number - 1 for peer, link in self.links.senders.items()}
        self._to_followers(["check", self.own, index, state_digest(host, handled, numbered)])

    def _to_followers(self, frame: list[Any]) -> None:
        for voter in self.group.node.config.members:
            if voter != self.group.node.host:  # a stand-in's replica is not the process's
                self.channels.send(voter, frame)

    def end_followers_step(self, now: float) -> None:
        """Sync what the follower slots wrote in this step, then send their acks and
        apply what is committed; a copy grown past the snapshot size is compacted."""
        for process, slot in list(self.slots.items()):
            slot.end_step(now)
            if slot.elected and self.elected is not None and slot.state is not None:
                del self.slots[process]
                self.elected(slot)
            else:
                slot.compact_if_due(self.limits.snapshot_log_bytes)


def _joining(replica: ReplicaDriver) -> bool:
    """A copy just opened for a group that added this daemon: it learns the group's
    members from the leader's log (until then it takes the leader's messages as is)."""
    return replica.node.host not in replica.node.config.members


def _to_follower(slot: FollowerSlot, kind: str, frame: list[Any], limits: Limits) -> None:
    """An ``acked``, ``check`` or ``snapshot-part`` frame from the slot's leader (module
    docstring)."""
    if kind == "snapshot-part":
        slot.assembly = take_part(slot.assembly, frame, limits.snapshot_transfer_bytes_max)
    elif kind == "acked":
        marks = frame[2]
        if not isinstance(marks, dict) or not all(
            isinstance(p, str) and type(n) is int and n >= 0 for p, n in marks.items()
        ):
            raise RemoteProtocolError(f"acked frame for {slot.group}: {marks!r:.100}")
        slot.acknowledged(marks)
    else:
        index, digest = frame[2], frame[3]
        if type(index) is not int or not isinstance(digest, str):
            raise RemoteProtocolError(f"check frame for {slot.group}: {frame!r:.100}")
        slot.check(index, digest)


def open_replicas(
    group: ProcessGroup,
    members: list[str],
    ctx: DaemonContext,
    input_log: InputLog,
    addresses: dict[str, Address],
    now: float,
    restart: bool,
) -> DaemonReplicas:
    """The follower slots of the groups this daemon is a voter of besides its own (in
    its data directory, under ``replicas/``), each as its log left it; ``addresses``:
    where the members are, as this daemon's host knows them; ``restart``: the daemon's
    own log held something (runtime/follower_slot.py: a copy found empty then)."""
    own, limits, channels, links = group.group, ctx.limits, ctx.channels, ctx.links
    assert channels is not None and links is not None
    slots = {}
    # Where the placement put it, but for a group whose home moved its copy away since;
    # and the copies its disk holds (added by re-replication, growth or placement).
    moved = input_log.meta.dropped
    placed = [p for p in groups_followed_by(own, members, ctx.config.replicas) if p not in moved]
    added = [p for p in copies_on_disk(input_log.directory) if p not in placed and p != own]
    departed = () if ctx.directory is None else ctx.directory.departed
    for process in [p for p in placed + added if p not in departed]:
        slots[process] = open_slot(ctx, input_log, process, members, addresses, restart)
    replicas = DaemonReplicas(own, group, slots, channels, links, limits, now)
    replicas.founders = frozenset(members)
    replicas.update_ring()
    replicas.voters_per_group = ctx.config.replicas
    replicas.lost.update(input_log.meta.lost)
    replicas.remember_lost = input_log.record_lost
    replicas.remember_dropped = input_log.record_dropped
    replicas.lost_while_away = lambda told_by: lost_while_away(ctx, told_by)
    replicas.open_copy = lambda process: open_slot(ctx, input_log, process, members,
                                                   addresses, restart=False)
    return replicas


def open_slot(
    ctx: DaemonContext,
    input_log: InputLog,
    process: str,
    members: list[str],
    addresses: dict[str, Address],
    restart: bool,
) -> FollowerSlot:
    """The follower slot of ``process``'s group in the daemon's data directory, as its
    log left it (at a start, or when a stand-in stops: runtime/stand_in.py).  A group of
    the ``members`` this daemon started with starts with the placement's voters; the
    changes since (re-replication, growth: runtime/re_replication.py) are in its log
    and snapshot."""
    replicas, channels, limits = ctx.config.replicas, ctx.channels, ctx.limits
    assert channels is not None
    config, make_host = Config.of((process,)), None
    if process in members:  # a group of the cluster this daemon started with
        config = Config.of(voters_of(process, members, replicas))
        make_host = _host_maker(process, members, addresses, ctx.config.structure, limits)
    # else: a joiner's group, or one this joiner copies; either way its first
    # configuration and state come with the leader's snapshot, which a new copy gets
    # first (runtime/re_replication.py); (process,) is what a joiner's own log starts with.
    return FollowerSlot.open(
        input_log.directory, process, ctx.process_id, config, channel_sender(channels, process),
        input_log.policy, input_log.meta, make_host, limits, restart,
    )


def _host_maker(
    process: str, members: list[str], addresses: dict[str, Address], structure: Structure,
    limits: Limits,
) -> MakeHost:
    """How a slot makes the host of ``process`` as its home daemon made it at its
    first start (runtime/startup.py): it knew every member's address."""

    def make(store: SnapshotEntryStore) -> Host:
        directory = Directory(process, addresses[process])
        for peer in sorted(addresses):
            directory.learn(peer, addresses[peer])
        return new_host(process, directory, members, structure, limits, store)

    return make


def takes_channel_frame(directory: Directory, peer: str, frame: list[Any]) -> bool:
    """Whether the owner takes a channel frame from ``peer``: a member's, or a joiner's
    replication frame for its own group (a joiner's group takes a second replica, on
    its seed, before it steps ``JoinStart``: runtime/startup.py)."""
    return directory.is_member(peer) or (
        peer in directory.contacts and frame[0] in REPLICATION_FRAMES and frame[1] == peer
    )


def take_replication_frame(
    replicas: DaemonReplicas | None, ctx: DaemonContext, peer: str, frame: list[Any]
) -> None:
    """A ``raft`` frame from ``peer``'s channel: into the replica it is for.  One that
    does not decode, or that comes to a daemon that runs no replicas, closes that
    channel (the peer's fault; Raft takes the loss)."""
    if replicas is None:
        log.warning("a replication message, and this daemon runs no replicas "
                    "(the members' --replicas differ?); closing its channel", peer=peer)
        ctx.drop_channel_session(peer)
        return
    try:
        replicas.receive(peer, frame)
    except RemoteProtocolError as e:
        log.warning("bad replication message; closing the member's channel",
                    peer=peer, error=str(e))  # fmt: skip
        ctx.drop_channel_session(peer)
