"""The daemon's replicas (docs/replication.md §6.2): the group of its own process, which
it leads, and its follower slots, one per group of the ``k − 1`` processes before it in
ring order (skueue/host/placement.py).

This is where their messages meet the daemon channel (runtime/network/daemon_channel.py):
each goes as ``["raft", process, message]`` to the member that hosts the replica, and
what comes back is decoded by the replication codec and stepped into the replica of
that process.  A message that does not decode is its sender's fault: that channel is
closed, and Raft takes the loss.  Time comes as one tick per ``heartbeat_interval_s``
to every replica: the leader beats for its followers with it; the follower slots never
campaign until failover is built (stage 2b of §11), but their timers must run, or they
would take the home replica's vote requests after a restart for a stray's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from skueue.core.errors import RemoteProtocolError
from skueue.host.placement import groups_followed_by, voters_of
from skueue.replication.codec import ReplicationCodecError, decode_message, encode_message
from skueue.replication.config import Config, HostId
from skueue.replication.messages import Message
from skueue.runtime.durability.input_log import InputLog
from skueue.runtime.follower_slot import FollowerSlot
from skueue.runtime.group import ProcessGroup
from skueue.runtime.limits import Limits
from skueue.runtime.network.daemon_channel import DaemonChannels
from skueue.runtime.state import DaemonContext

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
        heartbeat_interval_s: float,
        now: float,
        snapshot_log_bytes: int,
    ) -> None:
        self.own = own
        self.snapshot_log_bytes = snapshot_log_bytes
        self.group = group
        self.slots = slots
        self.heartbeat_interval_s = heartbeat_interval_s
        self.next_tick = now + heartbeat_interval_s

    def receive(self, peer: str, frame: list[Any]) -> None:
        """A ``["raft", process, message]`` frame from ``peer``'s channel."""
        process = frame[1]
        try:
            message = decode_message(frame[2])
        except ReplicationCodecError as e:
            raise RemoteProtocolError(f"raft message for {process}: {e}") from None
        replica = self.group if process == self.own else self.slots.get(process)
        if replica is None or peer not in replica.node.config.members:
            # A group this daemon holds no replica of, or a sender that holds none
            # (a member's placement differs from ours, which only a bug or a forged
            # frame makes): Raft takes the loss.
            log.warning("a replication message from outside its group; dropped",
                        peer=peer, process=process)  # fmt: skip
            return
        replica.receive(peer, message)

    def seconds_to_tick(self, now: float) -> float:
        return max(0.0, self.next_tick - now)

    def tick_if_due(self, now: float) -> None:
        if now >= self.next_tick:
            self.group.tick()
            for slot in self.slots.values():
                slot.tick()
            self.next_tick = now + self.heartbeat_interval_s

    def end_followers_step(self, now: float) -> None:
        """Sync what the follower slots wrote in this step, then send their acks; a
        copy grown past the snapshot size drops what is committed."""
        for slot in self.slots.values():
            slot.end_step(now)
            slot.compact_if_due(self.snapshot_log_bytes)


def open_replicas(
    group: ProcessGroup,
    members: list[str],
    replicas: int,
    channels: DaemonChannels,
    input_log: InputLog,
    limits: Limits,
    now: float,
) -> DaemonReplicas:
    """The follower slots of the groups this daemon is a voter of besides its own (in
    its data directory, under ``replicas/``), each as its log left it."""
    own = group.group
    slots = {}
    for process in groups_followed_by(own, members, replicas):
        config = Config.of(voters_of(process, members, replicas))
        slots[process] = FollowerSlot.open(
            input_log.directory, process, own, config, channel_sender(channels, process),
            input_log.policy, input_log.meta,
        )
    return DaemonReplicas(own, group, slots, limits.heartbeat_interval_s, now,
                          limits.snapshot_log_bytes)  # fmt: skip


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
