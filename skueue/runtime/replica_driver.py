"""What every replica of a daemon does with its node's effects, leader or follower
(docs/replication.md §6.2; the order is etcd raft's ``Ready``, effects.py).

- ``AppendLocal`` and ``SaveHardState`` go to the replica's input log (format 12);
- a ``Send`` that may leave before the sync (a leader's appends: the followers' fsyncs
  run in parallel with the leader's, thesis §10.2.1) goes on the daemon channel once
  the log's write (not its sync) is done, so that a kill -9 of the leader cannot leave
  a follower ahead of the leader's own log (its votes would then be refused, and
  without ``--failover`` the followers never stand);
  every other one (acks, votes: I7) waits for the end of the step's sync;
- at the end of the owner's step (:meth:`ReplicaDriver.end_step`) the log is synced, the
  node hears ``Persisted``, and the held sends go.

A follower that fell behind the leader's last snapshot gets it, as the typed codec
writes a state (runtime/snapshot_transfer.py), or an empty one where it cannot be
sent: its copy then holds the log from there, without a state.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import structlog

from skueue.replication.config import Config, ConfigChange, HostId
from skueue.replication.effects import (
    AppendLocal,
    Commit,
    InstallSnapshot,
    ProposalRefused,
    ReplicaEffect,
    RoleChanged,
    SaveHardState,
    Send,
    SendSnapshot,
)
from skueue.replication.inputs import ChangeConfig, Persisted, Received, ReplicaInput, Tick
from skueue.replication.messages import Message, Snapshot
from skueue.replication.node import ReplicaNode
from skueue.replication.settings import DurableState, ReplicaSettings
from skueue.runtime.durability.input_log import InputLog

log = structlog.get_logger("skueued")

SendMessage = Callable[[HostId, Message], None]


def durable_state(input_log: InputLog, first_config: Config) -> DurableState:
    """What the replica's log holds: its last snapshot's position and configuration
    (``first_config`` where it never snapshotted), its hard state and its entries,
    their data left on disk (the node reads them back through the log)."""
    index = input_log.index
    snapshot_index, snapshot_term, config = index.base or (0, 0, first_config)
    term, vote = index.hard_state
    return DurableState(config, term, vote, snapshot_index, snapshot_term,
                        index.bare_entries())  # fmt: skip


class ReplicaDriver:
    def __init__(
        self,
        group: str,
        replica: HostId,
        input_log: InputLog,
        first_config: Config,
        send: SendMessage | None,
        settings: ReplicaSettings,
        forgotten: bool = False,
    ) -> None:
        """The replica ``replica`` of process ``group``'s group, as ``input_log`` left it;
        ``send`` carries its messages (None: a group of one, which sends none);
        ``forgotten``: it may have lost entries it acked (I6)."""
        self.group = group
        # Election timeouts are drawn from it.
        rng = random.Random()
        durable = durable_state(input_log, first_config)
        if forgotten:
            durable = dataclasses.replace(durable, may_have_forgotten=True)
        self.node = ReplicaNode(replica, durable, settings, rng, reader=input_log)
        self.input_log = input_log
        self.send = send
        self.held: list[Send] = []  # sends that leave after this step's sync
        self.written = False  # the log took entries since the last Persisted
        # The commit as of the effect being carried out (the node's may be past it).
        self.commit_seen = self.node.commit

    def receive(self, sender: HostId, message: Message) -> None:
        self.step(Received(sender, message))

    def step(self, event: ReplicaInput) -> None:
        self.commit_seen = self.node.commit
        self.carry_out(self.node.step(event))

    def tick(self) -> None:
        self.step(Tick())

    def change_config(self, change: ConfigChange) -> str | None:
        """Propose a change of the group's membership (the leader, one at a time:
        runtime/re_replication.py); why it was refused, or None."""
        self.commit_seen = self.node.commit
        effects = self.node.step(ChangeConfig(change))
        refused = [e.reason for e in effects if isinstance(e, ProposalRefused)]
        self.carry_out([e for e in effects if not isinstance(e, ProposalRefused)])
        return refused[0] if refused else None

    def end_step(self, now: float) -> None:
        """Sync what this step wrote, tell the node, then send what waited for it."""
        self.input_log.sync(now)
        node = self.node
        if self.written:
            self.written = False
            last = node.last_index
            term = node.term_at(last)
            if term is not None and last > node.snapshot_index:
                self.carry_out(node.step(Persisted(last, term)))
        held, self.held = self.held, []
        for effect in held:
            self._send(effect)

    def carry_out(self, effects: list[ReplicaEffect]) -> None:
        early: list[Send] = []  # the leader's appends: after the log's write, not its sync
        for effect in effects:
            match effect:
                case AppendLocal(index=index, entries=entries):
                    self.input_log.write_entries(index, entries)
                    self.written = True
                case SaveHardState(term=term, vote=vote):
                    self.input_log.save_hard_state(term, vote)
                case Send(after_sync=False):
                    early.append(effect)
                case Send():
                    self.held.append(effect)
                case Commit(index=index):
                    # The owner reads ``commit`` when it releases a step's effects; a
                    # role change reads the commit as it was then (runtime/group.py).
                    self.commit_seen = index
                case RoleChanged(role=role, term=term, leader=leader):
                    self.role_changed(role, term, leader)
                case SendSnapshot(to=to, term=term, index=index, last_term=last_term,
                                  config=config):
                    log.info("a follower fell behind the last snapshot; it gets the "
                             "snapshot", group=self.group, replica=to, index=index)  # fmt: skip
                    self.ship_snapshot(to, Snapshot(term, index, last_term, config, b""))
                case InstallSnapshot():
                    self.install(effect)
                case ProposalRefused(reason=reason):
                    # The owner proposes only while its group leads: a refusal means an
                    # input was stepped that the log will not hold.
                    raise AssertionError(f"group {self.group}: a proposal refused: {reason}")
        if early:
            self.input_log.write()
            for effect in early:
                self._send(effect)

    def role_changed(self, role: str, term: int, leader: HostId | None) -> None:
        """The replica's role, term or known leader changed."""

    def ship_snapshot(self, to: HostId, snapshot: Snapshot) -> None:
        """Send the last snapshot to ``to``, a follower behind it: with the state as of
        it where the replica has one to send (runtime/snapshot_transfer.py), else
        without, and the follower goes on without a state."""
        self.send_now(to, snapshot)

    def install(self, snapshot: InstallSnapshot) -> None:
        """A snapshot from the group's leader replaces the log (only a follower slot
        takes one: no one else leads a daemon's own process)."""
        raise AssertionError(f"group {self.group}: a snapshot from another leader")

    def _send(self, effect: Send) -> None:
        self.send_now(effect.to, effect.message)

    def send_now(self, to: HostId, message: Message) -> None:
        assert self.send is not None, f"group {self.group} of one voter sent {message!r:.200}"
        self.send(to, message)
