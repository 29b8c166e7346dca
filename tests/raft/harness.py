"""A hand-driven group of replicas for the claim tests: every delivery, tick, sync and
crash happens only when a test says so, so a test can build the exact schedule a claim
of the Raft paper is about (Figure 8's, a partitioned leader's, a lost vote's).

Each machine has a disk (hard state, log, snapshot) and a state machine (the list of
``data`` entries applied, with their indexes).  By default a machine's writes are
durable at the end of each step; ``hold_sync`` keeps them pending until ``sync``, and a
crash loses what is pending, as a real disk's cache would.  Messages sit in
``in_flight`` until ``deliver`` takes them, in any order the test picks; a cut link
drops them.  ``random.Random`` seeds every election timeout, so a test replays.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from skueue.replication.config import Config, HostId
from skueue.replication.effects import (
    AppendLocal,
    Commit,
    InstallSnapshot,
    ReplicaEffect,
    SaveHardState,
    Send,
    SendSnapshot,
)
from skueue.replication.inputs import (
    Applied,
    Persisted,
    Propose,
    Received,
    ReplicaInput,
    SnapshotTaken,
    Tick,
)
from skueue.replication.messages import Message, Snapshot
from skueue.replication.node import ReplicaNode
from skueue.replication.settings import ReplicaSettings
from skueue.sim.replica_disk import DiskImage, Write, decode_state, encode_state


@dataclass
class Machine:
    host: HostId
    node: ReplicaNode
    disk: DiskImage
    state: list[tuple[int, bytes]] = field(default_factory=list)
    """The state machine: each applied ``data`` entry with its index."""
    pending: list[ReplicaEffect] = field(default_factory=list)
    """Writes not yet durable (``hold_sync``)."""
    held_sends: list[Send] = field(default_factory=list)
    hold_sync: bool = False
    up: bool = True


class Group:
    def __init__(self, voters: Iterable[HostId] = ("a", "b", "c"), *, seed: int = 0,
                 learners: Iterable[HostId] = (), settings: ReplicaSettings | None = None,
                 ) -> None:
        self.settings = settings or ReplicaSettings()
        self.rng = random.Random(seed)
        self.config = Config.of(voters, learners)
        self.machines: dict[HostId, Machine] = {}
        self.in_flight: list[tuple[HostId, HostId, Message]] = []
        self.cut: set[frozenset[HostId]] = set()
        self.sent: list[tuple[HostId, HostId, Message]] = []
        """Every message that ever left, for tests that look at what was said."""
        self.effects: list[tuple[HostId, ReplicaEffect]] = []
        for host in self.config.members:
            self.add_machine(host, self.config)

    def add_machine(self, host: HostId, config: Config) -> Machine:
        disk = DiskImage(config)
        node = ReplicaNode(host, disk.durable_state(), self.settings,
                           random.Random(self.rng.randrange(1 << 30)))
        self.machines[host] = Machine(host, node, disk)
        return self.machines[host]

    def __getitem__(self, host: HostId) -> ReplicaNode:
        return self.machines[host].node

    # -- driving ------------------------------------------------------------------------

    def step(self, host: HostId, event: ReplicaInput) -> list[ReplicaEffect]:
        m = self.machines[host]
        assert m.up, f"{host} is down"
        effects = m.node.step(event)
        self.effects.extend((host, e) for e in effects)
        for effect in effects:
            self._carry_out(m, effect)
        if not m.hold_sync:
            self.sync(host)
        return effects

    def _carry_out(self, m: Machine, effect: ReplicaEffect) -> None:
        if isinstance(effect, SaveHardState | AppendLocal | InstallSnapshot):
            m.pending.append(effect)
            if isinstance(effect, InstallSnapshot):
                m.state = decode_state(effect.data)
                self._write(m, effect)  # the state machine is replaced at once
                m.pending.remove(effect)
        elif isinstance(effect, Send):
            if effect.after_sync and m.pending:
                m.held_sends.append(effect)
            else:
                self._post(m.host, effect.to, effect.message)
        elif isinstance(effect, Commit):
            self._apply(m, effect.index)
        elif isinstance(effect, SendSnapshot):
            data = m.disk.snapshot_data
            self._post(m.host, effect.to, Snapshot(effect.term, effect.index, effect.last_term,
                                                    effect.config, data))

    def _apply(self, m: Machine, index: int) -> None:
        node = m.node
        applied = m.state[-1][0] if m.state else 0
        applied = max(applied, node.applied)
        for at in range(applied + 1, index + 1):
            entry = node.entry(at)
            if entry.kind == "data":
                m.state.append((at, entry.data))
        effects = node.step(Applied(index))
        assert not effects

    def _write(self, m: Machine, effect: Write) -> None:
        m.disk.apply(effect)

    def sync(self, host: HostId) -> None:
        """Make the machine's pending writes durable, then let its held messages go."""
        m = self.machines[host]
        wrote = any(isinstance(e, AppendLocal) for e in m.pending)
        for effect in m.pending:
            self._write(m, effect)
        m.pending = []
        if wrote and m.disk.log:
            self.step_quietly(host, Persisted(m.disk.last_index, m.disk.log[-1].term))
        held, m.held_sends = m.held_sends, []
        for send in held:
            self._post(host, send.to, send.message)

    def step_quietly(self, host: HostId, event: ReplicaInput) -> None:
        m = self.machines[host]
        effects = m.node.step(event)
        self.effects.extend((host, e) for e in effects)
        for effect in effects:
            self._carry_out(m, effect)

    def _post(self, src: HostId, dst: HostId, message: Message) -> None:
        self.sent.append((src, dst, message))
        if frozenset((src, dst)) not in self.cut and self.machines.get(dst) is not None:
            self.in_flight.append((src, dst, message))

    def deliver(self, where: Callable[[HostId, HostId, Message], bool] | None = None,
                rounds: int = 1_000) -> int:
        """Deliver messages (those ``where`` picks) until none is left; how many went."""
        delivered = 0
        for _ in range(rounds):
            picked = [x for x in self.in_flight if where is None or where(*x)]
            if not picked:
                return delivered
            for item in picked:
                self.in_flight.remove(item)
                src, dst, message = item
                if (self.machines[dst].up and frozenset((src, dst)) not in self.cut):
                    self.step(dst, Received(src, message))
                    delivered += 1
        raise AssertionError("messages never stopped flowing")

    def drop(self, where: Callable[[HostId, HostId, Message], bool]) -> None:
        self.in_flight = [x for x in self.in_flight if not where(*x)]

    def tick(self, hosts: Iterable[HostId] | None = None, times: int = 1) -> None:
        for _ in range(times):
            for host in hosts if hosts is not None else list(self.machines):
                if self.machines[host].up:
                    self.step(host, Tick())

    def run(self, ticks: int, hosts: Iterable[HostId] | None = None) -> None:
        """Time passes: each tick, every machine up (or of ``hosts``) ticks, then every
        message is delivered."""
        for _ in range(ticks):
            self.tick(hosts)
            self.deliver()

    def elect(self, host: HostId) -> None:
        """Let ``host`` time out alone, then deliver everything: it wins if it can."""
        node = self[host]
        for _ in range(2 * self.settings.election_ticks):
            if node.role != "follower":
                break
            self.step(host, Tick())
        self.deliver()
        assert node.role == "leader", f"{host} did not win: {node.role} at term {node.term}"

    def propose(self, host: HostId, *data: bytes) -> None:
        self.step(host, Propose(tuple(data)))

    def leaders(self) -> list[HostId]:
        return [h for h, m in self.machines.items() if m.up and m.node.role == "leader"]

    # -- faults -------------------------------------------------------------------------

    def partition(self, *sides: Iterable[HostId]) -> None:
        """Only machines on the same side hear each other (this replaces any partition
        before)."""
        self.cut.clear()
        groups = [set(s) for s in sides]
        for a in self.machines:
            for b in self.machines:
                if a != b and not any(a in g and b in g for g in groups):
                    self.cut.add(frozenset((a, b)))

    def heal(self) -> None:
        self.cut.clear()

    def crash(self, host: HostId, forget_from: int | None = None) -> None:
        """The machine stops; what it had not synced is gone, and so are the messages on
        their way to it.  With ``forget_from``, its disk also loses the log from that
        index on, though it had called it durable and acked it: a power loss under a lax
        fsync policy (the hard state is always synced, docs/replication.md §5.1)."""
        m = self.machines[host]
        m.up, m.pending, m.held_sends = False, [], []
        if forget_from is not None:
            assert forget_from > m.disk.snapshot_index, "a snapshot is never forgotten"
            del m.disk.log[forget_from - m.disk.snapshot_index - 1:]
        self.in_flight = [x for x in self.in_flight if x[1] != host]

    def restart(self, host: HostId, may_have_forgotten: bool = False) -> None:
        m = self.machines[host]
        durable = replace(m.disk.durable_state(), may_have_forgotten=may_have_forgotten)
        m.node = ReplicaNode(host, durable, self.settings,
                             random.Random(self.rng.randrange(1 << 30)))
        m.state = decode_state(m.disk.snapshot_data)
        m.up = True

    def snapshot(self, host: HostId) -> None:
        """The machine saves its state machine as of what it applied."""
        m = self.machines[host]
        index = m.node.applied
        term = m.node.term_at(index)
        assert term is not None
        config = m.node.log.config_at(index)
        m.disk.compact(index, term, config, encode_state(m.state))
        self.step(host, SnapshotTaken(index))

    # -- what tests look at -------------------------------------------------------------

    def applied_data(self, host: HostId) -> list[bytes]:
        return [data for _, data in self.machines[host].state]
