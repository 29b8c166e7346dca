"""One Raft group simulated: machines running ``ReplicaNode``s over a faulty network,
with crashing disks, clients and an operator, and no I/O (docs/replication.md §8, stage 1).

Theory of operation
-------------------
Entries are opaque commands; the state machine of each machine is the list of ``data``
entries it applied.  One seeded ``random.Random`` draws everything (the nodes' election
timeouts too, through generators seeded from it), so a seed replays a run exactly.

Time is in milliseconds of one simulated clock; events (a tick, a delivery, a sync, a
fault, a client's move) wait in one queue ordered by time.  Every live machine ticks
every ``TICK_MS`` (from a phase of its own); a message takes 1–5 ms.  Each machine is
driven as ``skueue/replication/effects.py`` says (``sim/replica_disk.py`` is its disk):
writes go to the page cache at once and become durable at the machine's sync; a send
marked ``after_sync`` waits for that sync, after which the node hears ``Persisted``;
``Commit`` applies the log and steps ``Applied``; now and then a machine snapshots what
it applied and steps ``SnapshotTaken``.

Until ``fault_ms`` the schedule injects faults:

- **crash** of a machine, restarted later from its durable disk (what was not synced is
  lost, or all but a prefix with torn writes); with ``crash_before_sync``, a crash is
  also aimed between a write and its delayed sync (``fsync_lag``);
- **partition**: a set of machines cut off from the others, healed later;
- **pause**: a machine takes no step (messages to it wait) while the others run;
- on the network, **loss**, **duplication** and **reordering** (a long delay).

Clients and the operator (``sim/replica_clients.py``) act throughout.  At ``fault_ms``
the faults stop: every partition heals, every machine restarts or resumes, the network
stops losing.  The group must then settle within ``settle_ms``: one leader, every
command acknowledged, every membership change made, every member applied through the
leader's last index; else :class:`~skueue.sim.rounds.SimStuck` names the seed.  After
every event the checks of ``sim/replica_checks.py`` run; at the end the state machines
are compared and every acknowledged command must be in them once.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skueue.replication.config import AddLearner, Config, ConfigChange, HostId, Promote, Remove
from skueue.replication.effects import (
    AppendLocal,
    Commit,
    InstallSnapshot,
    ProposalRefused,
    ReplicaEffect,
    SaveHardState,
    Send,
    SendSnapshot,
)
from skueue.replication.inputs import (
    Applied,
    ChangeConfig,
    Persisted,
    Propose,
    Received,
    ReplicaInput,
    SnapshotTaken,
    Tick,
)
from skueue.replication.messages import Message, Snapshot, VoteReply
from skueue.replication.node import ReplicaNode
from skueue.replication.settings import ReplicaSettings
from skueue.sim.replica_checks import ReplicaChecks
from skueue.sim.replica_clients import Client, Operator, Outcome
from skueue.sim.replica_disk import SimDisk, StateMachine, decode_state, encode_state
from skueue.sim.rounds import SimStuck

TICK_MS = 10


@dataclass(frozen=True)
class ReplicasConfig:
    seed: int = 0
    voters: int = 3
    learner: bool = False  # one more machine, added as a learner, then promoted
    remove: bool = False  # one of the first voters removed (after the promotion)
    clients: int = 2
    commands: int = 20  # per client
    fault_ms: int = 3_000  # faults happen before this
    faults: int = 0  # crashes, partitions and pauses, drawn by the weights below
    crash: float = 1.0
    partition: float = 1.0
    pause: float = 1.0
    outage_ms_max: int = 400  # how long a crash, a partition or a pause lasts at most
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0  # a message delayed up to 30 ticks
    fsync_lag: float = 0.0  # a machine's sync comes up to 3 ticks after its writes
    crash_before_sync: float = 0.0  # a delayed sync is beaten by a crash
    torn_writes: bool = True  # a crash keeps a random prefix of the unsynced writes
    snapshot_every: int = 0  # entries applied between a machine's snapshots (0: never)
    election_ticks: int = 10
    append_bytes_max: int = 1 << 20  # small: one entry an append, so appends split
    inflight_appends_max: int = 256
    pre_vote: bool = True
    check_quorum: bool = True
    settle_ms: int = 20_000
    read_back: bool = False  # replicas read entries back from the disk (EntryReader)

    def __post_init__(self) -> None:
        if self.voters not in (1, 3, 5):
            raise ValueError("voters is 1, 3 or 5")
        if min(self.crash, self.partition, self.pause) < 0:
            raise ValueError("the weights of the faults must not be negative")
        if self.remove and self.voters + self.learner < 2:
            raise ValueError("a removal needs a voter to stay")
        for p in (self.loss, self.duplicate, self.reorder, self.fsync_lag,
                  self.crash_before_sync):
            if not 0.0 <= p <= 1.0:
                raise ValueError("probabilities must be in [0, 1]")


@dataclass
class Machine:
    host: HostId
    disk: SimDisk
    node: ReplicaNode | None = None
    """None while it is down."""
    state: StateMachine = field(default_factory=list)
    applied: int = 0
    commit_seen: int = 0
    """Commits through here were handed to the checks."""
    held: list[Send] = field(default_factory=list)
    sync_at: int | None = None
    paused: bool = False
    inbox: list[tuple[HostId, Message]] = field(default_factory=list)
    acks: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    """index -> (client, command) this machine took as leader and will acknowledge."""
    boots: int = 0
    refused: ProposalRefused | None = None


@dataclass
class ReplicasResult:
    config: ReplicasConfig
    steps: int
    now_ms: int
    leaders: dict[int, HostId]
    acknowledged: dict[bytes, int]
    """command -> the index it was acknowledged at."""
    states: dict[HostId, StateMachine]
    """The state machine of every member at the end."""
    members: Config
    crashes: int
    duplicates: int
    """Commands in the log more than once (a retry of a proposal that did commit)."""


class ReplicasSim:
    def __init__(self, config: ReplicasConfig,
                 trace: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.trace = trace
        """Told every step and every message, to follow a failing seed."""
        self.rng = random.Random(config.seed)
        self.settings = ReplicaSettings(election_ticks=config.election_ticks,
                                        append_bytes_max=config.append_bytes_max,
                                        inflight_appends_max=config.inflight_appends_max,
                                        pre_vote=config.pre_vote,
                                        check_quorum=config.check_quorum)
        voters = [f"m{i}" for i in range(1, config.voters + 1)]
        self.initial = Config.of(voters)
        self.hosts = voters + ([f"m{config.voters + 1}"] if config.learner else [])
        self.machines = {h: Machine(h, SimDisk(self.initial)) for h in self.hosts}
        self.checks = ReplicaChecks(config.seed)
        self.now = 0
        self.steps = 0
        self.events: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.cut: frozenset[HostId] = frozenset()
        self._cut_gen = 0
        self.calm = False
        self.crashes = 0
        self.proposed: set[bytes] = set()
        self.acknowledged: dict[bytes, int] = {}
        timeout_ms = 4 * 2 * config.election_ticks * TICK_MS
        self.clients = [Client(c, config.commands, timeout_ms) for c in range(config.clients)]
        changes: list[ConfigChange] = []
        if config.learner:
            changes += [AddLearner(self.hosts[-1]), Promote(self.hosts[-1])]
        if config.remove:
            changes.append(Remove(self.rng.choice(voters)))
        self.operator = Operator(changes)

    # -- the schedule -------------------------------------------------------------------

    def at(self, time: int, action: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self.events, (time, self._seq, action, args))

    def run(self) -> ReplicasResult:
        config = self.config
        for m in self.machines.values():
            self._boot(m)
        for _ in range(config.faults):
            self.at(self.rng.randrange(config.fault_ms), self._fault)
        self.at(config.fault_ms, self._calm)
        for client in self.clients:
            self.at(self.rng.randrange(TICK_MS), self._client, client)
        if self.operator.changes:
            self.at(self.rng.randrange(config.fault_ms // 2 + 1), self._operate)
        while not (self.calm and self._settled()):
            if self.now > config.fault_ms + config.settle_ms:
                raise SimStuck(f"seed {config.seed}: not settled {config.settle_ms} ms "
                               f"after the faults stopped\n{self._describe()}")
            self.now, _, action, args = heapq.heappop(self.events)
            self.steps += 1
            self.checks.step = self.steps
            action(*args)
            self.checks.roles(m.node for m in self.machines.values() if m.node is not None)
        self._final_checks()
        return self._result()

    def _boot(self, m: Machine) -> None:
        durable = m.disk.durable
        read_back = self.config.read_back
        m.node = ReplicaNode(m.host, durable.durable_state(with_data=not read_back),
                             self.settings, random.Random(self.rng.getrandbits(64)),
                             m.disk if read_back else None)
        m.state = decode_state(durable.snapshot_data)
        m.applied = m.commit_seen = durable.snapshot_index
        self.checks.restored(m.host, m.applied, m.state)
        m.boots += 1
        self.at(self.now + self.rng.randrange(1, TICK_MS + 1), self._tick, m, m.boots)

    def _tick(self, m: Machine, boot: int) -> None:
        if m.node is None or m.boots != boot:
            return  # a tick of a life that ended
        self.at(self.now + TICK_MS, self._tick, m, boot)
        if not m.paused:
            self._step(m, Tick())

    # -- one machine's step, carried out as the effects say -------------------------------

    def _step(self, m: Machine, first: ReplicaInput) -> list[ReplicaEffect]:
        node = m.node
        assert node is not None
        inputs = [first]
        out: list[ReplicaEffect] = []
        while inputs:
            taken = inputs.pop(0)
            effects = node.step(taken)
            if self.trace is not None:
                self.trace(f"{self.now:6} {m.host} {node.role[:4]} t{node.term} "
                           f"last {node.last_index} commit {node.commit}: {taken} -> {effects}")
            out += effects
            for effect in effects:
                self._carry_out(m, node, effect, inputs)
        written = [e.index for e in out if isinstance(e, AppendLocal | InstallSnapshot)]
        if written:
            self.checks.same_log(node, m.disk.volatile, min(written))
        if m.disk.pending and m.sync_at is None:
            if not self.calm and self.rng.random() < self.config.fsync_lag:
                m.sync_at = self.now + self.rng.randrange(1, 3 * TICK_MS)
                self.at(m.sync_at, self._sync, m, m.boots)
                if self.rng.random() < self.config.crash_before_sync:
                    self.at(self.rng.randrange(self.now, m.sync_at), self._outage, m)
            else:
                self._sync(m, m.boots)
        elif not m.disk.pending:
            self._maybe_snapshot(m, node)
        return out

    def _carry_out(self, m: Machine, node: ReplicaNode, effect: ReplicaEffect,
                   inputs: list[ReplicaInput]) -> None:
        disk = m.disk
        if isinstance(effect, SaveHardState):
            disk.write(effect)
        elif isinstance(effect, AppendLocal):
            self.checks.written(m.host, node.role == "leader", disk.volatile, effect.index,
                                effect.entries)
            disk.write(effect)
        elif isinstance(effect, InstallSnapshot):
            disk.write(effect)
            m.state, m.applied = decode_state(effect.data), effect.index
            m.commit_seen = max(m.commit_seen, effect.index)
            self.checks.restored(m.host, effect.index, m.state)
            m.acks = {i: a for i, a in m.acks.items() if i > effect.index}
        elif isinstance(effect, Send):
            if effect.after_sync and disk.pending:
                m.held.append(effect)
            else:
                self._post(m.host, effect.to, effect.message)
        elif isinstance(effect, Commit):
            self._commit(m, node, effect.index)
            inputs.append(Applied(effect.index))
        elif isinstance(effect, SendSnapshot):
            image = disk.volatile
            assert image.snapshot_index == effect.index, (
                f"seed {self.config.seed}: {m.host} asked to send a snapshot at "
                f"{effect.index}, its disk holds one at {image.snapshot_index}")
            self._post(m.host, effect.to, Snapshot(effect.term, effect.index, effect.last_term,
                                                    effect.config, image.snapshot_data))
        elif isinstance(effect, ProposalRefused):
            m.refused = effect

    def _commit(self, m: Machine, node: ReplicaNode, index: int) -> None:
        log = m.disk.volatile
        if node.role == "leader":
            self.checks.commit_durable(node, index, {
                h: x.disk.durable for h, x in self.machines.items()})
        leaders = [x.node for x in self.machines.values()
                   if x.node is not None and x.node.role == "leader"]
        for i in range(max(m.commit_seen, log.snapshot_index) + 1, index + 1):
            self.checks.commit_known(node, i, log.entry(i), leaders)
        m.commit_seen = max(m.commit_seen, index)
        for i in range(m.applied + 1, index + 1):
            entry = log.entry(i)
            self.checks.applying(node, i, entry)
            if entry.kind == "data":
                m.state.append((i, entry.data))
        m.applied = max(m.applied, index)
        for i in sorted(a for a in m.acks if a <= index):
            client, command = m.acks.pop(i)
            if log.entry(i).data == command:  # else a later leader put another entry there
                self.checks.acknowledged(node, i, command)
                self.acknowledged.setdefault(command, i)
                self.clients[client].acknowledged(command)

    def _sync(self, m: Machine, boot: int) -> None:
        if m.node is None or m.boots != boot:
            return
        if m.paused:  # a stopped process does not call fsync
            self.at(self.now + TICK_MS, self._sync, m, boot)
            return
        m.sync_at = None
        m.disk.sync()
        held, m.held = m.held, []
        for send in held:
            self._post(m.host, send.to, send.message)
        log = m.disk.volatile
        term = log.term_at(log.last_index)
        assert term is not None
        self._step(m, Persisted(log.last_index, term))

    def _maybe_snapshot(self, m: Machine, node: ReplicaNode) -> None:
        every = self.config.snapshot_every
        if not every or m.applied - m.disk.volatile.snapshot_index < every:
            return
        index = m.applied
        term = node.term_at(index)
        assert term is not None and index <= node.commit
        m.disk.snapshot(index, term, node.log.config_at(index), encode_state(m.state))
        self._step(m, SnapshotTaken(index))

    # -- the network --------------------------------------------------------------------

    def _post(self, src: HostId, dst: HostId, message: Message) -> None:
        if isinstance(message, VoteReply) and message.granted and not message.pre_vote:
            self.checks.voted(src, message.term, dst)
        if dst not in self.machines:
            return
        faulty = not self.calm
        if faulty and self.rng.random() < self.config.loss:
            if self.trace is not None:
                self.trace(f"{self.now:6} lost {src}->{dst} {message}")
            return
        copies = 2 if faulty and self.rng.random() < self.config.duplicate else 1
        for _ in range(copies):
            delay = self.rng.randrange(1, 6)
            if faulty and self.rng.random() < self.config.reorder:
                delay = self.rng.randrange(1, 30 * TICK_MS)
            self.at(self.now + delay, self._deliver, src, dst, message)

    def _deliver(self, src: HostId, dst: HostId, message: Message) -> None:
        m = self.machines[dst]
        if m.node is None or (src in self.cut) != (dst in self.cut):
            return
        if m.paused:
            m.inbox.append((src, message))
        else:
            self._step(m, Received(src, message))

    # -- clients and the operator -------------------------------------------------------

    def _client(self, client: Client) -> None:
        client.act(self.now, self.hosts, self.rng.choice, self._propose)
        if not client.done:
            self.at(self.now + self.rng.randrange(1, TICK_MS + 1), self._client, client)

    def _answering(self, host: HostId) -> Machine | None:
        m = self.machines[host]
        return None if m.node is None or m.paused else m

    def _propose(self, host: HostId, command: bytes, client: int) -> Outcome:
        m = self._answering(host)
        if m is None or m.node is None:
            return None
        self.proposed.add(command)
        m.refused = None
        effects = self._step(m, Propose((command,)))
        if m.refused is not None:
            return m.refused
        taken = [e.index + k for e in effects if isinstance(e, AppendLocal)
                 for k, x in enumerate(e.entries) if x.kind == "data" and x.data == command]
        assert len(taken) == 1, f"seed {self.config.seed}: {host} took {command!r} at {taken}"
        m.acks[taken[0]] = (client, command)
        return taken[0]

    def _operate(self) -> None:
        def node_of(host: HostId) -> ReplicaNode | None:
            m = self._answering(host)
            return None if m is None else m.node

        self.operator.act(self.hosts, self.rng.choice, node_of, self._change)
        if not self.operator.finished:
            self.at(self.now + 5 * TICK_MS, self._operate)

    def _change(self, host: HostId, change: ConfigChange) -> ProposalRefused | None:
        m = self.machines[host]
        m.refused = None
        self._step(m, ChangeConfig(change))
        return m.refused

    # -- faults -------------------------------------------------------------------------

    def _fault(self) -> None:
        if self.calm:
            return
        c = self.config
        if c.crash + c.partition + c.pause <= 0:
            return  # every kind weighs nothing: no fault
        kind = self.rng.choices(["crash", "partition", "pause"], [c.crash, c.partition, c.pause])[0]
        m = self.machines[self.rng.choice(self.hosts)]
        until = self.now + self.rng.randrange(TICK_MS, c.outage_ms_max + TICK_MS)
        if kind == "crash":
            self._outage(m)
        elif kind == "partition":
            hosts = list(self.hosts)
            self.rng.shuffle(hosts)
            self.cut = frozenset(hosts[: self.rng.randrange(1, len(hosts) // 2 + 1)])
            self._cut_gen += 1
            self.at(until, self._heal, self._cut_gen)
        elif m.node is not None and not m.paused:
            m.paused = True
            self.at(until, self._resume, m)

    def _outage(self, m: Machine) -> None:
        """A crash, and the restart after it."""
        if m.node is None or self.calm:
            return
        self._crash(m)
        self.at(self.now + self.rng.randrange(TICK_MS, self.config.outage_ms_max + TICK_MS),
                self._restart, m)

    def _crash(self, m: Machine) -> None:
        self.crashes += 1
        kept = self.rng.randrange(len(m.disk.pending) + 1) if self.config.torn_writes else 0
        m.disk.crash(kept)
        m.node, m.held, m.inbox, m.acks = None, [], [], {}
        m.paused, m.sync_at = False, None

    def _restart(self, m: Machine) -> None:
        if m.node is None:
            self._boot(m)

    def _heal(self, generation: int) -> None:
        if generation == self._cut_gen:
            self.cut = frozenset()

    def _resume(self, m: Machine) -> None:
        if m.node is None or not m.paused:
            return
        m.paused = False
        inbox, m.inbox = m.inbox, []
        for src, message in inbox:
            if m.node is not None:
                self._step(m, Received(src, message))
        if m.sync_at is not None and m.node is not None:
            self._sync(m, m.boots)

    def _calm(self) -> None:
        self.calm = True
        self.cut = frozenset()
        for m in self.machines.values():
            self._restart(m)
            self._resume(m)

    # -- the end ------------------------------------------------------------------------

    def _leader(self) -> Machine | None:
        """The one leader, if there is one and no member is in a later term."""
        leaders = [m for m in self.machines.values()
                   if m.node is not None and m.node.role == "leader"]
        if len(leaders) != 1 or leaders[0].node is None:
            return None
        node = leaders[0].node
        for host in node.config.members:
            other = self.machines[host].node
            if other is None or other.term > node.term:
                return None
        return leaders[0]

    def _settled(self) -> bool:
        leader = self._leader()
        if leader is None or leader.node is None:
            return False
        if not self.operator.finished or not all(c.done for c in self.clients):
            return False
        node = leader.node
        if node.commit != node.last_index:
            return False
        for host in node.config.members:
            other = self.machines[host]
            if other.node is None or (other.node.last_index, other.node.commit,
                                      other.applied) != (node.last_index,) * 3:
                return False
        return True

    def _final_checks(self) -> None:
        leader = self._leader()
        assert leader is not None and leader.node is not None
        members = leader.node.config.members
        for host in members:
            node = self.machines[host].node
            assert node is not None
            self.checks.same_log(node, self.machines[host].disk.volatile, 1)
        expected = {c.command(n) for c in self.clients for n in range(c.commands)}
        self.checks.final({h: self.machines[h].state for h in members}, self.proposed,
                          self.acknowledged, expected)

    def _result(self) -> ReplicasResult:
        leader = self._leader()
        assert leader is not None and leader.node is not None
        members = leader.node.config
        states = {h: list(self.machines[h].state) for h in members.members}
        reference = states[leader.host]
        return ReplicasResult(
            self.config, self.steps, self.now, dict(self.checks.leaders),
            dict(self.acknowledged), states, members, self.crashes,
            len(reference) - len({data for _, data in reference}))

    def _describe(self) -> str:
        lines = [f"at {self.now} ms, step {self.steps}; cut {sorted(self.cut)}"]
        for m in self.machines.values():
            n = m.node
            lines.append(f"  {m.host}: down" if n is None else (
                f"  {m.host}: {n.role} term {n.term} leader {n.leader} last {n.last_index} "
                f"commit {n.commit} applied {m.applied} config {n.config}"
                f"{' paused' if m.paused else ''}"))
        lines.append(f"  clients: {[(c.number, c.sent, c.guess) for c in self.clients]}")
        lines.append(f"  operator: {self.operator.done}/{len(self.operator.changes)} "
                     f"{self.operator.log[-3:]}")
        return "\n".join(lines)
