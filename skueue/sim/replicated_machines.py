"""The machines of a replicated hosts simulation (skueue/sim/replicated_hosts.py): one
replica of one process each, with its disk, and the channel their Raft messages take.

Theory of operation
-------------------
A :class:`Machine` is one replica slot of docs/replication.md §6.2: a
:class:`~skueue.host.host.Host`, the group's :class:`~skueue.replication.node.ReplicaNode`
at this machine, and a :class:`~skueue.sim.replica_disk.DiskImage` with the node's hard
state and log.  Writes the node asks for (``SaveHardState``, ``AppendLocal``) wait in
``pending`` until the machine syncs at the end of its action; a message that must follow
them (``Send.after_sync``) waits in ``held_sends``.  A crash loses both, as a real disk's
cache and socket buffers would.

A leader steps its host at once (pipelined) and keeps each step's effects in ``held``
until the entry commits; a follower steps only committed entries.  So ``stepped`` (how far
the host went) may pass the commit index only on a leader.

The :class:`Channel` carries the replicas' messages: unnumbered, so it may lose,
duplicate and reorder them (each message in flight is delivered at a step with some
probability, in a random order), as the daemon channel may (§6.2).  It also knows which
machines are ``cut`` off from the others (a partition: whatever is sent to or from them,
or arrives while they are cut, is lost) and which are ``paused`` (what is on its way to
them waits in flight until they resume, as in a stopped process's socket buffers).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from skueue.host.effects import HostEffect
from skueue.host.host import Host
from skueue.replication.config import Config, HostId
from skueue.replication.effects import AppendLocal, SaveHardState, Send
from skueue.replication.messages import Message
from skueue.replication.node import ReplicaNode
from skueue.replication.settings import DurableState
from skueue.sim.replica_disk import DiskImage

DELIVER_RATIO = 0.5
"""The chance that a message in flight on the channel arrives at a given step."""


@dataclass
class Held:
    """The effects of a leader's step of the entry at ``index``, held until it commits.
    ``own``: a new input of this leader's term (its replies go to clients); an inherited
    entry's replies went to connections of an earlier term and are dropped."""

    index: int
    effects: list[HostEffect]
    own: bool


@dataclass
class Machine:
    mid: HostId  # "p0/r1"
    pid: str  # the process it is a replica of
    host: Host
    node: ReplicaNode
    disk: DiskImage
    applied: int = 0  # committed entries the host stepped (and, on a leader, released)
    stepped: int = 0  # entries the host stepped (past ``applied`` only on a leader)
    lead_term: int | None = None  # the term it leads (its host runs ahead of commit)
    pending: list[SaveHardState | AppendLocal] = field(default_factory=list)
    held_sends: list[Send] = field(default_factory=list)
    held: deque[Held] = field(default_factory=deque)
    up: bool = True
    doomed: bool = False  # dies in its next action, before its sync
    paused: bool = False  # takes no step (no tick, nothing delivered) until it resumes
    gone: bool = False  # lost with its disk, for good: never back


@dataclass
class ChannelStats:
    sent: int = 0
    lost: int = 0
    duplicated: int = 0
    cut: int = 0  # lost to a partition


class Channel:
    """The replicas' messages between machines, lossy, duplicating and reordering."""

    def __init__(self, rng: random.Random, loss: float, duplication: float) -> None:
        self.rng = rng
        self.loss = loss
        self.duplication = duplication
        self.in_flight: list[tuple[HostId, HostId, Message]] = []
        self.stats = ChannelStats()
        self.cut: set[HostId] = set()
        self.paused: set[HostId] = set()

    def post(self, src: HostId, dst: HostId, message: Message) -> None:
        self.stats.sent += 1
        if src in self.cut or dst in self.cut:
            self.stats.cut += 1
            return
        if self.loss and self.rng.random() < self.loss:
            self.stats.lost += 1
            return
        self.in_flight.append((src, dst, message))
        if self.duplication and self.rng.random() < self.duplication:
            self.stats.duplicated += 1
            self.in_flight.append((src, dst, message))

    def arrivals(self) -> list[tuple[HostId, HostId, Message]]:
        """The messages that arrive now, in a random order; the rest stay in flight (those
        to a paused machine, all of them), but for what a partition cuts: lost."""
        rng = self.rng
        now: list[tuple[HostId, HostId, Message]] = []
        later: list[tuple[HostId, HostId, Message]] = []
        for item in self.in_flight:
            src, dst, _ = item
            if src in self.cut or dst in self.cut:
                self.stats.cut += 1
            elif dst in self.paused or rng.random() >= DELIVER_RATIO:
                later.append(item)
            else:
                now.append(item)
        self.in_flight = later
        rng.shuffle(now)
        return now

    def drop_to(self, dst: HostId) -> None:
        """``dst`` crashed: what was on its way to it is lost."""
        self.in_flight = [x for x in self.in_flight if x[1] != dst]


def new_machine(mid: HostId, pid: str, create: Callable[[], Host], config: Config,
                make_node: Callable[[HostId, DurableState], ReplicaNode]) -> Machine:  # fmt: skip
    disk = DiskImage(config)
    return Machine(mid, pid, create(), make_node(mid, disk.durable_state()), disk)
