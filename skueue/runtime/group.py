"""The daemon's side of its own process's replication group (docs/replication.md §6.2):
the replica it leads, the entries the owner's steps propose, and the commit that lets a
step's effects go out (runtime/held_effects.py).

Each input the owner logs in a step is one ``data`` entry, proposed at the end of the
step, written and synced (one fsync per step), and counted by the replica's own
``Persisted``.  A group of one voter (``--replicas 1``) commits at its own write: the
step's effects go out in the same step, which :meth:`ProcessGroup.end_step` checks.  With
more voters the leader's appends go to the followers on the daemon channel before its
own sync, and the commit comes with their acks, in a later step; the owner holds each
step's effects until then and steps on meanwhile.

A group of one leads from its start (``Campaign``: the ``took_over`` entry of its term,
then the host's ``TookOver`` input, which ends what the last life's clients left).  A
group of several campaigns and waits for its voters (``leading``): until then, and
whenever it stops leading, the owner steps no input (runtime/owner.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import msgpack
import trio

from skueue.replication.config import Config, HostId
from skueue.replication.effects import InstallSnapshot
from skueue.replication.inputs import Applied, Campaign, Propose, SnapshotTaken
from skueue.replication.messages import Message, Snapshot, TimeoutNow
from skueue.replication.settings import ReplicaSettings
from skueue.runtime.durability.entry_store import SnapshotEntryStore
from skueue.runtime.durability.input_log import InputLog
from skueue.runtime.follower_slot import install_snapshot
from skueue.runtime.replica_driver import ReplicaDriver, SendMessage
from skueue.runtime.snapshot_transfer import SnapshotShipper
from skueue.runtime.state import log

# What a replica's driver holds (runtime/replica_driver.py), handed on at a takeover.
DRIVER_FIELDS = ("group", "node", "input_log", "send", "held", "written", "commit_seen")


class ProcessGroup(ReplicaDriver):
    def __init__(
        self,
        replica: HostId,
        input_log: InputLog,
        first_config: Config,
        send: SendMessage | None = None,
        settings: ReplicaSettings | None = None,
    ) -> None:
        """The replica ``replica`` of its own process's group, as the input log left it
        (``first_config``: the group's voters when the log never snapshotted); ``send``
        carries its messages to the other voters.  Without ``send`` it is a group of one
        for good (``--replicas 1``); a joiner's group starts with one voter too, but
        grows (runtime/re_replication.py), so it has ``send``."""
        super().__init__(replica, replica, input_log, first_config, send,
                         settings or ReplicaSettings())  # fmt: skip
        self._own_fields(lone=send is None)

    def _own_fields(self, lone: bool) -> None:
        """What a process's group holds besides its driver's (:data:`DRIVER_FIELDS`)."""
        self.lone = lone
        self.staged: list[bytes] = []
        """The records the owner logged in this step, packed."""
        self._packer = msgpack.Packer(use_bin_type=True)
        # How the last snapshot's state is sent to a follower behind it (set at start,
        # runtime/startup.py; None: nothing to send, as for a group of one).
        self.shipper: SnapshotShipper | None = None
        # With failover (runtime/failover.py), once it follows another replica or
        # stopped leading after it had led: the last index whose step may still go out
        # (:attr:`releasable`; None: up to the commit), what else must happen then, and
        # the event that says so.
        self.deposed_at: int | None = None
        self.failover = False
        self.has_led = False
        self.on_deposed: Callable[[], None] | None = None
        self.deposed = trio.Event()
        self.store: SnapshotEntryStore | None = None  # the elements, for a backup's snapshot
        # A restarted home (failover): where its log stood when its host replayed it,
        # (index, term).  Following another leader while its log stays there, its host is
        # still the log's state, and it may lead again when that leader hands the process
        # back (runtime/homecoming.py); once its log moves, it is a backup as any.
        self.replayed: tuple[int, int | None] | None = None
        # How a backup comes home when its leader says ``TimeoutNow`` (None: it cannot).
        self.on_homecoming: Callable[[], None] | None = None

    @classmethod
    def taking_over(cls, slot: ReplicaDriver) -> ProcessGroup:
        """The group of the process a follower slot's replica was just elected to lead
        (runtime/stand_in.py): its node, log and sends go on as they are."""
        group = cls.__new__(cls)
        for name in DRIVER_FIELDS:
            setattr(group, name, getattr(slot, name))
        group._own_fields(lone=False)
        group.failover = group.has_led = True
        group.store = getattr(slot, "store", None)
        return group

    @property
    def releasable(self) -> int:
        """The last log index whose step's effects may go out: the commit, except for a
        leader deposed under failover.  Another leader may then overwrite the entries
        after its commit at that moment, and commit entries of its own at those indexes:
        the steps this replica held there must never go out."""
        commit = self.node.commit
        return commit if self.deposed_at is None else min(commit, self.deposed_at)

    @property
    def leading(self) -> bool:
        """It leads and takes inputs: not while it hands leadership over (the Raft
        module refuses proposals then, and the owner's inputs wait)."""
        return self.node.role == "leader" and self.node.transfer_to is None

    def receive(self, sender: HostId, message: Message) -> None:
        node = self.node
        if isinstance(message, TimeoutNow) and self.deposed_at is not None:
            # A backup's leader hands the process back (runtime/homecoming.py).
            if self.on_homecoming is not None and sender == node.leader:
                self.on_homecoming()
            return
        super().receive(sender, message)
        if self.replayed is not None and self.deposed_at is None and node.role != "leader" \
                and node.leader not in (None, node.host) and not self._host_is_the_logs():
            self._depose(node.term, node.leader)

    def log_position(self) -> tuple[int, int | None]:
        """The log's last index and its term."""
        node = self.node
        return node.last_index, node.term_at(node.last_index)

    def _host_is_the_logs(self) -> bool:
        """A restarted home's host is the state of its whole log, as replayed."""
        return self.replayed == self.log_position()

    def campaign(self) -> None:
        """Stand for election now (a start: the replica that leads its own process
        before the others time out)."""
        self.step(Campaign())

    def take_over(self, now: float) -> int:
        """Lead a group of one: it elects itself at once; its ``took_over`` entry is
        durable and committed on return.  Returns the new term."""
        assert self.lone, "a group of several voters waits for their votes"
        self.campaign()
        assert self.leading, "a lone voter elects itself"
        self.end_step(now)
        return self.node.term

    def stage(self, record: list[Any]) -> None:
        """An input's log record: an entry of this step's proposal."""
        self.staged.append(self._packer.pack(record))

    def end_step(self, now: float) -> None:
        """Propose what the step logged, write and sync it (the leader's appends leave
        first), and count it: called before anything of the step may go out."""
        if self.staged:
            staged, self.staged = tuple(self.staged), []
            self.step(Propose(staged))
        super().end_step(now)
        if self.lone:
            assert self.node.commit == self.node.last_index, "a group of one commits at its write"

    def snapshot_position(self) -> tuple[int, int, Config]:
        """Where a snapshot taken now stands: the last committed entry (the owner takes
        one only when everything the host stepped is committed), its term, and the
        configuration there."""
        node = self.node
        term = node.term_at(node.commit)
        assert term is not None
        return node.commit, term, node.log.config_at(node.commit)

    def snapshot_taken(self, index: int) -> None:
        """The input log holds a snapshot at ``index``: the replica forgets the terms
        before it.  (The host stepped every entry through it as the leader proposed
        it; the replica hears so only now, not at every step's commit.)"""
        self.step(Applied(index))
        self.step(SnapshotTaken(index))

    def ship_snapshot(self, to: HostId, snapshot: Snapshot) -> None:
        if self.shipper is None:
            super().ship_snapshot(to, snapshot)
        else:
            self.shipper.ship(to, snapshot, self.send_now)

    def _depose(self, term: int, leader: HostId | None) -> None:
        """Another replica may lead now and overwrite what this one stepped after its
        commit: its host may be stale, so it never leads again in this life.  (A leader
        hears of its deposition before any commit of the next leader's; a home that
        never led in this life releases nothing: the replay's frames are the new
        leader's to send.)"""
        self.deposed_at = self.commit_seen if self.has_led else 0
        self.node.settings = dataclasses.replace(self.node.settings, campaigns=False)
        log.warning("another replica may lead the process now; what this one held "
                    "after its commit never goes out", group=self.group, term=term,
                    leader=leader, commit=self.deposed_at)  # fmt: skip
        self.deposed.set()
        if self.on_deposed is not None:
            self.on_deposed()

    def install(self, snapshot: InstallSnapshot) -> None:
        """Only a backup of its process (runtime/failover.py) takes its leader's
        snapshot: its host is not used again, its log and snapshot are the leader's
        (what a restart restores)."""
        if self.deposed_at is None and self.replayed is not None and self.failover:
            self._depose(self.node.term, self.node.leader)  # its log moves: a backup now
        if self.deposed_at is None or self.store is None:
            super().install(snapshot)  # a bug: nobody else leads a serving process
            return
        install_snapshot(self.input_log, self.store, snapshot, self.group)

    def role_changed(self, role: str, term: int, leader: HostId | None) -> None:
        if role == "leader":
            self.has_led, self.replayed = True, None
        elif self.failover and self.deposed_at is None and (
            self.has_led or leader not in (None, self.node.host)
        ):
            if not self.has_led and self._host_is_the_logs():
                log.info("another replica leads the process; this home follows it, its "
                         "state still its log's", group=self.group, term=term,
                         leader=leader)  # fmt: skip
                return
            self._depose(term, leader)
            return
        if role == "leader":
            log.info("leads its replication group", term=term, replica=self.node.host)
        elif not self.lone and role == "follower" and self.has_led:
            log.warning("no longer leads its replication group; inputs wait until it "
                        "leads again", term=term, leader=leader)  # fmt: skip
