"""Hosts simulated: a cluster of durable daemons' hosts, their links, their clients and
their clocks, with churn, crashes and restarts, and no I/O.

Theory of operation
-------------------
Each simulated member is a :class:`~skueue.host.host.Host`, driven the way the daemon's
owner drives it (``runtime/owner.py``): every input goes through ``Host.step``, and every
input its class says is logged is appended to the member's durable record first
(``sim/host_members.py``).  One seeded ``random.Random`` picks every action, so a seed
replays a run exactly; property tests draw the config (seed included) with hypothesis.

At each step the schedule delivers a frame (``sim/host_links.py``: FIFO links as the
daemon's, or any order as the paper's model), ticks a member (with what time made due,
and now and then the lease clock), lets a client move (``sim/host_clients.py``), or lets
a consumer ack or nack a lease.  The clients' script (``sim/host_workload.py``) holds
the default queue's operations and, when asked, a priority queue's and a name deleted
and made again.  At random moments among them:

- **crashes**: a member crashes after its step's log write was synced (every input it
  took is in its record) or, for a share ``before_sync_ratio``, in its next step before
  the sync (that input is lost: a frame stays in flight, a tick is gone, a client sends
  its request again).  It comes back from its record, every logged input stepped again
  must give the effects it gave the first time, and the rebuilt host must equal the one
  lost; then it steps ``TookOver`` of its next term, with the lease clock.  Its links'
  sessions end (the peers step ``PeerGone``, and ``Hello`` before the next frame), its
  clients' connections die.
- **joins**: a new daemon starts alone and steps ``JoinStart`` through the *stayer* (a
  member that never leaves), as ``skueued --join`` does (``runtime/startup.py``);
- **leaves**: an admin client sends ``skueue leave`` to a member in the ring (the
  anchor's, with ``leave_anchor``), answered once it left; the member then tells the
  others (``ControlSent`` of a ``departed`` frame, as ``runtime/owner.py`` does), sends
  what it has left to send and exits.

Time is the step counter: a step is a millisecond of the driver's clock, the lease clock
and the deadlines alike.

A run ends when the script is done, every join and leave went through (no update phase
runs), no lease is held or on its way back, and, with named queues, the DHT is quiet.
With ``drain`` a drain client then removes one element at a time from the default queue
until it says empty (then from its dead letters, with a delivery limit).  The result
holds the history and the lease events, for :func:`skueue.check.checker.check` and
:func:`skueue.check.leases.check_leases`.  A run that needs more than ``max_steps``
steps raises :class:`~skueue.sim.rounds.SimStuck`; a replay that differs,
``DeterminismError``; a host that breaks a promise the histories cannot show (an answer
nobody asked for, a lease that outlives its connection, a leave never answered),
``AssertionError``: each names the seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from skueue.check.history import Record
from skueue.check.leases import LeaseEvent
from skueue.core.effects import Send
from skueue.core.ops import DEFAULT_QUEUE, Structure, dead_letter_queue
from skueue.core.process import Process, TickDue
from skueue.host.address import Address
from skueue.host.directory import Directory
from skueue.host.effects import (
    DropPeer,
    ForgetPeer,
    HostEffect,
    Joined,
    Left,
    Reply,
    SendControl,
    Warn,
)
from skueue.host.host import Host
from skueue.host.inputs import (
    ControlSent,
    FromClient,
    Hello,
    Input,
    JoinStart,
    LeaseClock,
    PeerControl,
    PeerGone,
    PeerMessage,
    Tick,
    TookOver,
)
from skueue.host.results import Configured
from skueue.host.retries import RetryWindow
from skueue.overlay.labels import Kind
from skueue.overlay.ring import build_views
from skueue.sim.host_clients import STEP_S, ClientsConfig, Deleted, SimClients
from skueue.sim.host_links import Links
from skueue.sim.host_members import CrashStats, Member, compared, rebuild, record
from skueue.sim.host_workload import Plan, workload
from skueue.sim.rounds import SimStuck, diagnose


@dataclass(frozen=True)
class HostsConfig:
    processes: int = 3
    structure: Structure = Structure.QUEUE
    clients: int = 3
    operations: int = 30  # on the default queue (lease acks and nacks not counted)
    insert_ratio: float = 0.5
    seed: int = 0
    delivery: str = "fifo"  # or "any": frames overtake each other (the paper's model)
    crashes: int = 0
    before_sync_ratio: float = 0.3  # crashes that lose the input of their step
    snapshot_every: int = 0  # logged inputs between snapshots (0: never)
    timeout_steps: int = 0  # a request's deadline, in steps (0: none)
    blocking_ratio: float = 0.0  # removes that wait for an element
    lease_ratio: float = 0.0  # removes that take a lease
    max_deliveries: int = 0  # a leased remove's delivery limit (0: none)
    joins: int = 0
    leaves: int = 0  # never the stayer: the cluster keeps one member
    join_ids: tuple[str, ...] = ()  # the joiners' ids, in order (then j0, j1, ...)
    leave_anchor: bool = False  # every leave takes the anchor's member if it can
    pq_levels: int = 0  # a queue "pq" with this many priority levels (0: none)
    pq_operations: int = 0  # enqueues at random levels, dequeues and peeks on "pq"
    d_operations: int = 0  # inserts, removes and deletes on "d", of either structure
    retry_window_requests: int = 1000
    drain: bool = True
    max_steps: int = 400_000
    # Replication (skueue/sim/replicated_hosts.py; 1: each process one host, as above).
    replicas: int = 1  # machines per process, each a Raft replica of it
    machine_crashes: int = 0  # a replica machine killed, restarted later from its disk
    machine_partitions: int = 0  # a machine cut off from its group for a while, then healed
    machine_pauses: int = 0  # a machine that takes no step for a while, then resumes
    # A machine lost with its disk, for good (a host gone: at most one per group, so
    # that its majority is left; each group carries on with the others).
    machine_losses: int = 0
    channel_loss: float = 0.0  # of the replicas' messages
    channel_duplication: float = 0.0

    def __post_init__(self) -> None:
        if self.processes < 1 or self.clients < 1:
            raise ValueError("a run needs a process and a client")
        counts = (self.operations, self.crashes, self.snapshot_every, self.timeout_steps,
                  self.max_deliveries, self.joins, self.leaves, self.pq_operations,
                  self.d_operations, self.pq_levels)  # fmt: skip
        if min(counts) < 0:
            raise ValueError("counts must not be negative")
        for ratio in (self.insert_ratio, self.before_sync_ratio, self.blocking_ratio,
                      self.lease_ratio):  # fmt: skip
            if not 0.0 <= ratio <= 1.0:
                raise ValueError("ratios must be in [0, 1]")
        if self.delivery not in ("fifo", "any"):
            raise ValueError('delivery is "fifo" or "any"')
        if self.pq_operations and not self.pq_levels:
            raise ValueError("pq_operations need pq_levels")
        if self.replicas not in (1, 3, 5):
            raise ValueError("replicas is 1, 3 or 5")
        if self.replicas == 1 and (self.machine_crashes or self.machine_partitions
                                   or self.machine_pauses or self.machine_losses
                                   or self.channel_loss or self.channel_duplication):  # fmt: skip
            raise ValueError("machine crashes, partitions, pauses, losses and the replicas' "
                             "channel need replicas > 1")
        if self.replicas > 1 and (self.crashes or self.joins or self.leaves):
            raise ValueError("with replicas, machines crash (machine_crashes); churn is "
                             "not simulated yet")
        for ratio in (self.channel_loss, self.channel_duplication):
            if not 0.0 <= ratio < 1.0:
                raise ValueError("channel ratios must be in [0, 1)")
        if min(self.machine_crashes, self.machine_partitions, self.machine_pauses,
               self.machine_losses) < 0:  # fmt: skip
            raise ValueError("counts must not be negative")


@dataclass
class HostsResult:
    config: HostsConfig
    records: list[Record]  # every queue's; the drain's too
    lease_events: list[LeaseEvent]
    inserted: list[str]  # every value a client inserted (unique)
    taken: list[str]  # elements removed for good by plain removes (not the drain's)
    drained: list[str]  # what the drain took from the default queue
    dead: list[str]  # ... and then from its dead letters
    deletes: list[Deleted]
    refusals: list[tuple[Plan, str]]  # requests the cluster refused, with the reason
    configured: list[tuple[Plan, Configured]]  # configures, with the settings answered
    priorities: dict[str, int]  # the level each insert asked for, by value
    steps: int
    frames: int  # frames sent between members
    stats: CrashStats
    counts: dict[str, int]  # retried, timeouts, moved, drops (the clients')
    processes: list[Process] = field(default_factory=list)  # the members at the end


class HostsSim:
    replicated = False  # ReplicatedHostsSim (sim/replicated_hosts.py) runs replicas > 1

    def __init__(self, config: HostsConfig) -> None:
        if config.replicas > 1 and not self.replicated:
            raise ValueError("replicas > 1: run it with sim/replicated_hosts.py")
        self.config = config
        self.rng = rng = random.Random(config.seed)
        self.steps = 0
        self.links = Links(rng, config.delivery == "any")
        self.stats = CrashStats()
        self.keep_records = config.crashes > 0  # nothing to come back to otherwise
        self.addresses: dict[str, Address] = {}
        self.members: dict[str, Member] = {}
        pids = [f"p{i}" for i in range(config.processes)]
        for pid in pids:
            self.addresses[pid] = Address("10.0.0.1", 7400 + len(self.addresses))
        for pid in pids:
            create = self._maker(pid, pids)
            self.members[pid] = Member(pid, create(), create)
        self.stayer = rng.choice(pids)  # never leaves: the joiners' seed
        clients_config = ClientsConfig(config.structure, config.timeout_steps,
                                       config.blocking_ratio, config.lease_ratio,
                                       config.max_deliveries, config.seed)  # fmt: skip
        self.clients = SimClients(clients_config, rng, self.members, self.enter, self._now)
        for i in range(config.clients):
            self.clients.add(f"c{i}", rng.choice(pids), f"s{i}")
        self.clients.script, self.clients.unmade = workload(config, rng)
        span = max(1, len(self.clients.script) * 20)
        kinds = ["crash"] * config.crashes + ["join"] * config.joins + ["leave"] * config.leaves
        self.events = sorted(((rng.randrange(span), kind) for kind in kinds), reverse=True)
        self.joiners = 0
        self.admins = 0
        self.drained: list[str] = []
        self.dead: list[str] = []

    def _now(self) -> int:
        return self.steps

    def _maker(self, pid: str, members: list[str], seed: str | None = None) -> Callable[[], Host]:
        """How ``pid``'s host is built at its first start: a member of ``members`` (a
        static cluster), or alone, knowing its ``seed`` (a joiner)."""
        config, address = self.config, self.addresses[pid]
        seed_address = None if seed is None else self.addresses[seed]

        def create() -> Host:
            views = {n.kind: v for n, v in build_views(members).items() if n.process == pid}
            directory = Directory(pid, address)
            for other in members:
                if other != pid:
                    directory.learn(other, self.addresses[other])
            if seed is not None and seed_address is not None:
                directory.learn(seed, seed_address)
            process = Process.create(pid, views, config.structure, hurry=True)
            window = RetryWindow(config.retry_window_requests, 1 << 30)
            return Host(process, directory, retry_window=window)

        return create

    # -- the run --------------------------------------------------------------------------

    def run(self) -> HostsResult:
        while not self._finished():
            self._step()
        if self.config.drain:
            self._drain()
        return HostsResult(
            self.config, self.clients.records, self.clients.lease_events,
            self.clients.inserted, self.clients.taken, self.drained, self.dead,
            self.clients.deletes, self.clients.refusals, self.clients.configured,
            self.clients.priorities,
            self.steps, self.links.sent, self.stats, self.clients.counts, self.processes(),
        )  # fmt: skip

    def processes(self) -> list[Process]:
        """The members' processes (those that left included: they say so)."""
        return [m.host.process for m in self.members.values()]

    def _finished(self) -> bool:
        if self.events or not self.clients.idle() or not self._settled():
            return False
        alive = [m.host.process for m in self.members.values() if m.alive]
        if any(p.leases.table.leases or p.leases.returning for p in alive):
            return False  # a returned element is still on its way back in
        return not (self.config.pq_levels or self.config.d_operations) or self._quiet()

    def _settled(self) -> bool:
        """Every join and leave went through, and no update phase runs."""
        for m in self.members.values():
            if not m.alive:
                continue
            if not m.serving or any(n.member.phase is not None
                                    for n in m.host.process.nodes.values()):  # fmt: skip
                return False
        return True

    def _quiet(self) -> bool:
        """No Put, Get or Drop is on its way in the DHT, and no Drop waits to be sent."""
        return all(n.store.quiet() and not n.store.deferred_drops
                   for m in self.members.values() if m.alive
                   for n in m.host.process.nodes.values())  # fmt: skip

    def _step(self) -> None:
        self.steps += 1
        if self.steps > self.config.max_steps:
            raise SimStuck(f"seed {self.config.seed}: not done after {self.steps} steps\n"
                           f"{self._waiting()}")  # fmt: skip
        if self.events and self.steps >= self.events[-1][0]:
            self._event(self.events.pop()[1])
        rng = self.rng
        roll = rng.random()
        if roll < 0.45 and self.links.busy():
            self._deliver()
        elif roll < 0.7:
            self._tick(rng.choice([m for m in self.members.values() if not m.gone]))
        elif roll < 0.95:
            client = rng.choice(self.clients.clients)
            if client.pending is None and not self.members[client.member].serving:
                self.clients.move(client, [m.pid for m in self.members.values() if m.serving])
            self.clients.act(client)
        else:
            self.clients.lease_move()
        if rng.random() < 0.001:
            self.links.change_mood([m.pid for m in self.members.values() if m.alive])
        self._reap()

    def _waiting(self) -> str:
        clients = self.clients.clients
        pending = [(c.name, c.member, type(c.pending.request).__name__)
                   for c in clients if c.pending]  # fmt: skip
        alive = [m for m in self.members.values() if m.alive]
        ops = sum(m.host.clients.pending_ops for m in alive)
        return (f"clients waiting {pending}, script left {len(self.clients.script)}, "
                f"events left {self.events}\n"
                + diagnose([m.host.process for m in alive], ops, self.steps))  # fmt: skip

    def _event(self, kind: str) -> None:
        if kind == "crash":
            self._crash()
        elif kind == "join":
            self._join()
        elif self._leave() == "later":
            self.events.append((self.steps + 50, kind))  # nobody may leave now: later
            self.events.sort(reverse=True)

    # -- members ---------------------------------------------------------------------------

    def enter(self, member: Member, item: Input) -> bool:
        """Step ``item`` on ``member`` and route its effects; False if the member died in
        this step before its sync (the input is lost; it came back without it)."""
        if member.doomed and isinstance(item, FromClient | PeerMessage | PeerControl | Tick):
            self._lose(member, item)
            return False
        was_leaving = member.host.process.leaving
        effects = member.host.step(item)
        if item.logged and self.keep_records:
            record(member, item, effects, self.config.snapshot_every, self.stats)
        if member.host.process.leaving and not was_leaving:
            self.clients.member_leaving(member.pid)
        self._route(member, effects)
        if self.config.lease_ratio:
            self._check_leases(member)
        return True

    def _check_leases(self, member: Member) -> None:
        """A lease never outlives its connection: one that closed (the client went away,
        or the member restarted) gave its leases back.  (The lease checker cannot see a
        lease kept too long that expires later: its element only comes back later.)"""
        conns = {c.conn for c in self.clients.clients if c.member == member.pid and c.conn}
        for lease in member.host.process.leases.table.leases.values():
            if lease.holder != -1 and lease.holder not in conns:
                raise AssertionError(
                    f"seed {self.config.seed}: {member.pid}: lease {lease.lease_id} of "
                    f"{lease.value!r} is held by connection {lease.holder}, which closed"
                )

    def _route(self, member: Member, effects: list[HostEffect]) -> None:
        pid = member.pid
        for effect in effects:
            match effect:
                case Send(to=to, message=message):
                    self.links.send(pid, to.process, ("msg", to.kind, message))
                case SendControl(peer=peer, frame=frame):
                    self.links.send(pid, peer, ("control", frame))
                case Reply(client=conn, reply=reply):
                    self.clients.answered(conn, reply)
                case ForgetPeer(peer=peer):
                    self.links.forget(pid, peer)
                case Left(alone=alone):
                    if not alone:
                        self._depart(member)
                case Joined():
                    pass
                case DropPeer() | Warn():
                    raise AssertionError(f"seed {self.config.seed}: {pid}: {effect!r:.300}")

    def _deliver(self) -> None:
        picked = self.links.pick()
        assert picked is not None
        link, index = picked
        number, payload = self.links.peek(link, index)
        src, dst = link
        member = self.members[dst]
        if member.gone:
            self.links.take(link, index)  # it exited: lost, as the daemon's peers lose it
            return
        if payload[0] == "msg":
            item: Input = PeerMessage(src, number, payload[1], payload[2])
        else:
            item = PeerControl(src, number, payload[1])
        if link not in self.links.sessions and not member.doomed:
            self.enter(member, Hello(src, str(self.addresses[src]), f"n-{src}"))
            self.links.sessions.add(link)
        if self.enter(member, item):
            self.links.take(link, index)  # taken (lost with a crash before the sync: resent)

    def _tick(self, member: Member) -> None:
        due = member.host.process.tick_due()
        if due is TickDue.NOTHING and self.rng.random() < 0.7:
            return
        for item in member.host.due(self.steps * STEP_S, "a simulated delay"):
            self.enter(member, item)
        if self.config.lease_ratio and self.rng.random() < 0.1:
            self.enter(member, LeaseClock(self.steps))
        self.enter(member, Tick())

    def _reap(self) -> None:
        """A member that left exits once it sent what it had to, and no client waits for
        an answer from it (a client told ``timeout`` sends its request again there).  The
        admin that asked it to leave has its answer, unless its connection died with a
        crash: then it asked again, and a process that left answers that never (its
        exit does)."""
        for m in self.members.values():
            if not m.host.left or m.gone:
                continue
            for client in self.clients.clients:
                if client.member != m.pid or client.session is not None or not client.pending:
                    continue
                if not client.resend and client.pending.sent == 1:
                    raise AssertionError(f"seed {self.config.seed}: {m.pid} left without "
                                         f"answering {client.name}, who asked it to")  # fmt: skip
                client.pending, client.conn, client.resend = None, 0, False
            if not self.links.sending(m.pid) and not any(
                c.pending and c.member == m.pid for c in self.clients.clients
            ):
                m.gone = True

    # -- crashes ----------------------------------------------------------------------------

    def _crash(self) -> None:
        member = self.rng.choice([m for m in self.members.values() if m.alive])
        if self.rng.random() < self.config.before_sync_ratio:
            member.doomed = True  # dies in its next step, before its sync
            return
        self.crash(member)

    def crash(self, member: Member) -> None:
        """``member`` crashes after its last sync and comes back from its record."""
        self.stats.crashes += 1
        self._restart(member, compared(member.host), "the host that crashed")

    def _lose(self, member: Member, item: Input) -> None:
        """A crash before the sync: ``item`` was stepped, then the member died before its
        log write was synced: none of the step's effects left, and the input is not in the
        record.  It comes back as it was before the step."""
        member.doomed = False
        before = compared(member.host)
        member.host.step(item)
        self.stats.lost[type(item).__name__] += 1
        self._restart(member, before, f"the host before its lost {type(item).__name__}")

    def _restart(self, member: Member, expected: list[tuple[str, object]], what: str) -> None:
        member.host = rebuild(member, expected, what, self.config.seed, self.stats)
        for peer in self.links.end_sessions(member.pid):
            if not self.members[peer].gone:
                self.enter(self.members[peer], PeerGone(member.pid))
        self.clients.member_crashed(member.pid)  # its connections died with it
        member.term += 1
        self.enter(member, TookOver(member.term, self.steps))

    # -- churn -------------------------------------------------------------------------------

    def _join(self) -> None:
        ids = self.config.join_ids
        pid = ids[self.joiners] if self.joiners < len(ids) else f"j{self.joiners}"
        self.joiners += 1
        self.addresses[pid] = Address("10.0.0.1", 7400 + len(self.addresses))
        create = self._maker(pid, [pid], self.stayer)
        member = self.members[pid] = Member(pid, create(), create)
        seed = self.stayer
        self.enter(member, JoinStart(seed, str(self.addresses[seed]), None, 0))

    def _leave(self) -> str:
        """An admin asks a member in the ring to leave ("asked"); "later" if none may
        now but one will (it is joining, or the anchor's is busy), "none" if none will."""
        others = [m for m in self.members.values()
                  if m.alive and m.pid != self.stayer and not m.host.process.leaving]  # fmt: skip
        candidates = [m for m in others if m.serving]
        if not candidates:
            return "later" if others else "none"
        leaving = self.rng.choice(candidates)
        if self.config.leave_anchor:
            seats = [m for m in candidates
                     if m.host.process.nodes[Kind.LEFT].seat.policy is not None]  # fmt: skip
            leaving = seats[0] if seats else leaving
        self.admins += 1
        admin = self.clients.add(f"admin{self.admins}", leaving.pid)
        self.clients.leave(admin)
        return "asked"

    def _depart(self, member: Member) -> None:
        """It left: every member it knows hears so, with its counters for its heir (as
        ``runtime/owner.py``'s ``_left``: inputs of their own, logged)."""
        host = member.host
        frame = host.departure_frame()
        for peer in host.directory.others():
            self.enter(member, ControlSent(peer, frame))

    # -- the drain ---------------------------------------------------------------------------

    def _drain(self) -> None:
        """A drain client removes one element at a time until the default queue says empty
        (then its dead letters, with a delivery limit)."""
        serving = [m.pid for m in self.members.values() if m.serving]
        drainer = self.clients.add("drain", self.rng.choice(serving), "drain")
        queues = [(DEFAULT_QUEUE, self.drained)]
        if self.config.lease_ratio and self.config.max_deliveries:
            queues.append((dead_letter_queue(DEFAULT_QUEUE), self.dead))
        for queue, into in queues:
            drainer.into = into
            plan = Plan("remove", None if queue == DEFAULT_QUEUE else queue, may_lease=False)
            while True:
                self.clients.start(drainer, plan)
                while drainer.pending is not None:
                    self._drain_step()
                if self.clients.records[-1].value is None:
                    break
        while not self._quiet():
            self._drain_step()

    def _drain_step(self) -> None:
        self.steps += 1
        if self.steps > self.config.max_steps:
            raise SimStuck(f"seed {self.config.seed}: the drain is stuck\n{self._waiting()}")
        if self.rng.random() < 0.6 and self.links.busy():
            self._deliver()
        elif self.rng.random() < 0.5:
            self._tick(self.rng.choice([m for m in self.members.values() if not m.gone]))
        else:
            for client in self.clients.clients:
                if client.resend:
                    self.clients.act(client)
        self._reap()
