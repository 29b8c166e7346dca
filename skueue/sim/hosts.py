"""Hosts simulated: a cluster of durable daemons' hosts, their links, their clients and
their clocks, with crashes and restarts, and no I/O.

Theory of operation
-------------------
Each simulated member is a :class:`~skueue.host.host.Host`, driven the way the daemon's
owner drives it: every input goes through ``Host.step``, and every input its class says
is logged is appended to the member's durable record first.  The record is what a data
directory holds: a snapshot (the host pickled, every ``snapshot_every`` logged inputs)
and the inputs logged after it.  One seeded ``random.Random`` picks every action, so a
seed replays a run exactly; property tests draw the seed and the workload with
hypothesis.

- **Links** are FIFO per ordered pair of members, reliable: a frame a member sent stays
  in flight until delivered, also across a crash of either end (the daemon's link layer
  numbers frames, resends the unacknowledged ones and skips the ones it took).
- **Clients** each have a session and one request at a time, on a connection to one
  member.  A request has a deadline; one answered ``timeout``, or whose member crashed,
  is sent again with the same session and request id, on a new connection after a crash,
  and must get its first attempt's outcome (``skueue/host/retries.py``), never a second
  effect.  Some removes block (``wait_ms``), some take a lease, acked or nacked later.
- **Time** is the step counter: a step is a millisecond of the driver's clock, the
  lease clock and the deadlines alike.  What time makes due (``Host.due``) is stepped
  (and logged) as the daemon does.
- **Crashes**: at random moments a member crashes after its step's log write was synced
  (every input it took is in its record) or, for a share ``before_sync_ratio``, in its
  next step before the sync (that input is lost: a frame stays in flight, a tick is
  gone, a client's request is sent again).  The member comes back from its record, each
  logged input is stepped again and must give the effects it gave the first time, and
  the rebuilt host must equal the one lost (compared with
  :func:`~skueue.sim.state_lines.state_lines`); then it steps ``Restarted``.  Any
  difference raises :class:`~skueue.sim.state_lines.DeterminismError` naming the seed.

A run ends when every client has done its operations and every lease is ended; with
``drain`` a drain client then removes one element at a time until the structure says
empty.  The result holds the history (a leased remove is a remove in it too; an element
it returns comes back as a new insertion nobody records) and the lease events, for
:func:`skueue.check.checker.check` and
:func:`skueue.check.leases.check_leases`.  A run that needs more than ``max_steps`` steps
raises :class:`SimStuck`.
"""

from __future__ import annotations

import math
import pickle
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skueue.check.history import Record
from skueue.check.leases import LeaseEvent
from skueue.core.effects import Send
from skueue.core.ops import Structure
from skueue.core.process import Process, TickDue
from skueue.host.address import Address
from skueue.host.directory import Directory
from skueue.host.effects import DropPeer, HostEffect, Reply, SendControl, Warn
from skueue.host.host import Host
from skueue.host.inputs import (
    FromClient,
    Input,
    LeaseClock,
    PeerControl,
    PeerMessage,
    Restarted,
    Tick,
)
from skueue.host.retries import RetryWindow
from skueue.overlay.ring import build_views
from skueue.sim.state_lines import DeterminismError, state_lines
from skueue.wire.client_protocol import InsertRequest, LeaseRequest, RemoveRequest
from skueue.wire.client_replies import TIMEOUT, Done, ErrorReply

TIMERS = (".clients.deadlines", ".clients.wait_ends", ".clients.arrivals")
"""A host's timers: the driver's clock, not the record's (a replay leaves them to the
next ``Restarted``), so a rebuilt host is compared without them."""
STEP_S = 0.001
"""Driver seconds per step: a step is a millisecond of every clock."""
LEASE_STEPS = (20, 100, 500)


class SimStuck(AssertionError):
    """The run did not finish within ``max_steps``: a liveness bug, never the schedule's."""


@dataclass(frozen=True)
class HostsConfig:
    processes: int = 3
    structure: Structure = Structure.QUEUE
    clients: int = 3
    operations: int = 30  # client requests in all (lease acks and nacks not counted)
    insert_ratio: float = 0.5
    seed: int = 0
    crashes: int = 0
    before_sync_ratio: float = 0.3  # crashes that lose the input of their step
    snapshot_every: int = 0  # logged inputs between snapshots (0: never)
    timeout_steps: int = 0  # a request's deadline, in steps (0: none)
    blocking_ratio: float = 0.0  # removes that wait for an element
    lease_ratio: float = 0.0  # removes that take a lease
    retry_window_requests: int = 1000
    drain: bool = True
    max_steps: int = 300_000

    def __post_init__(self) -> None:
        if self.processes < 1 or self.clients < 1 or self.operations < 0:
            raise ValueError("a run needs a process, a client, and no negative operations")
        for ratio in (self.insert_ratio, self.before_sync_ratio, self.blocking_ratio,
                      self.lease_ratio):  # fmt: skip
            if not 0.0 <= ratio <= 1.0:
                raise ValueError("ratios must be in [0, 1]")


@dataclass
class HostsResult:
    records: list[Record]
    lease_events: list[LeaseEvent]
    inserted: list[str]  # every value a client enqueued (unique)
    taken: list[str]  # elements removed by plain removes, the drain's included
    steps: int
    crashes: int
    lost_inputs: int  # crashes before the sync
    replayed: int  # inputs stepped again over all restarts
    retried: int  # requests sent again (timeouts, crashes)
    timeouts: int  # timeout answers clients got


@dataclass
class Member:
    """One simulated daemon: its host and its durable record."""

    pid: str
    host: Host
    create: Callable[[], Host]
    snapshot: bytes | None = None
    log: list[tuple[Input, list[HostEffect]]] = field(default_factory=list)
    doomed: bool = False  # dies in its next step, before the sync


@dataclass
class Pending:
    """A client's request in flight: sent again, the same, until it is answered."""

    request: Any
    invoke: int
    lease_ms: int = 0
    lease_end: tuple[str, int, str] | None = None  # an ack's or nack's: how, lease, value


@dataclass
class Client:
    name: str
    session: str
    member: str  # the member it talks to (its connections are all to it)
    conn: int = 0
    pending: Pending | None = None
    resend: bool = False  # its connection died: send the request again
    done_ops: int = 0
    rid: int = 0
    seq: int = 0
    leases: list[tuple[int, int, str]] = field(default_factory=list)  # conn, lease, value


class HostsSim:
    def __init__(self, config: HostsConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        pids = [f"p{i}" for i in range(config.processes)]
        self.members = {pid: Member(pid, self._make(pids, pid)(), self._make(pids, pid))
                        for pid in pids}  # fmt: skip
        self.links: dict[tuple[str, str], deque[tuple[int, Any]]] = {}
        self.numbers: dict[tuple[str, str], int] = {}
        self.clients = [Client(f"c{i}", f"s{i}", self.rng.choice(pids))
                        for i in range(config.clients)]  # fmt: skip
        self.conns = 0
        self.by_conn: dict[int, Client] = {}
        self.steps = 0
        self.records: list[Record] = []
        self.lease_events: list[LeaseEvent] = []
        self.inserted: list[str] = []
        self.taken: list[str] = []
        self.ops_left = config.operations
        self.values = 0
        self.crash_at = sorted(self.rng.randrange(max(1, config.operations * 20))
                               for _ in range(config.crashes))  # fmt: skip
        self.counts = {"crashes": 0, "lost": 0, "replayed": 0, "retried": 0, "timeouts": 0}

    def _make(self, pids: list[str], pid: str) -> Callable[[], Host]:
        structure, window = self.config.structure, self.config.retry_window_requests

        def create() -> Host:
            views = {n.kind: v for n, v in build_views(pids).items() if n.process == pid}
            directory = Directory(pid, _address(pids, pid))
            for other in pids:
                if other != pid:
                    directory.learn(other, _address(pids, other))
            process = Process.create(pid, views, structure, hurry=True)
            return Host(process, directory, retry_window=RetryWindow(window, 1 << 30))

        return create

    # -- the run --------------------------------------------------------------------------

    def run(self) -> HostsResult:
        while not self._finished():
            self._step()
        if self.config.drain:
            self._drain()
        return HostsResult(
            self.records, self.lease_events, self.inserted, self.taken, self.steps,
            self.counts["crashes"], self.counts["lost"], self.counts["replayed"],
            self.counts["retried"], self.counts["timeouts"],
        )  # fmt: skip

    def _finished(self) -> bool:
        return (self.ops_left == 0 and all(c.pending is None and not c.leases for c in self.clients)
                and not self.crash_at)  # fmt: skip

    def _step(self) -> None:
        self.steps += 1
        if self.steps > self.config.max_steps:
            raise SimStuck(f"seed {self.config.seed}: not done after {self.steps} steps: "
                           f"{self._waiting()}")  # fmt: skip
        if self.crash_at and self.steps >= self.crash_at[0]:
            self.crash_at.pop(0)
            self._crash(self.rng.choice(list(self.members)))
        roll = self.rng.random()
        if roll < 0.45 and any(self.links.values()):
            self._deliver()
        elif roll < 0.7:
            self._tick(self.rng.choice(list(self.members.values())))
        elif roll < 0.95:
            self._client(self.rng.choice(self.clients))
        else:
            self._lease_move()

    def _waiting(self) -> str:
        pending = [(c.name, type(c.pending.request).__name__) for c in self.clients if c.pending]
        ops = {m.pid: m.host.clients.pending_ops for m in self.members.values()}
        return f"clients waiting {pending}, operations pending {ops}, left {self.ops_left}"

    # -- members ---------------------------------------------------------------------------

    def _input(self, member: Member, item: Input) -> bool:
        """Step ``item`` on ``member`` and route its effects; False if the member died in
        this step before its sync (the input is lost; it came back without it)."""
        if member.doomed and isinstance(item, FromClient | PeerMessage | PeerControl | Tick):
            self._lose(member, item)
            return False
        effects = member.host.step(item)
        if item.logged:
            member.log.append((item, effects))
            every = self.config.snapshot_every
            if every and len(member.log) >= every:
                member.snapshot = pickle.dumps(member.host, protocol=pickle.HIGHEST_PROTOCOL)
                member.log = []
        self._route(member.pid, effects)
        return True

    def _route(self, pid: str, effects: list[HostEffect]) -> None:
        for effect in effects:
            match effect:
                case Send(to=to, message=message):
                    self._send(pid, to.process, ("msg", to.kind, message))
                case SendControl(peer=peer, frame=frame):
                    self._send(pid, peer, ("control", frame))
                case Reply(client=conn, reply=reply):
                    client = self.by_conn.get(conn)
                    if client is not None and client.conn == conn:
                        self._answered(client, reply)
                case DropPeer() | Warn():
                    raise DeterminismError(f"seed {self.config.seed}: {pid}: {effect!r:.300}")

    def _send(self, src: str, dst: str, payload: Any) -> None:
        link = (src, dst)
        self.numbers[link] = number = self.numbers.get(link, 0) + 1
        self.links.setdefault(link, deque()).append((number, payload))

    def _deliver(self) -> None:
        link = self.rng.choice([k for k, v in self.links.items() if v])
        number, payload = self.links[link][0]
        src, dst = link
        if payload[0] == "msg":
            item: Input = PeerMessage(src, number, payload[1], payload[2])
        else:
            item = PeerControl(src, number, payload[1])
        if self._input(self.members[dst], item):
            self.links[link].popleft()  # taken (lost with a crash before the sync: resent)

    def _tick(self, member: Member) -> None:
        due = member.host.process.tick_due()
        if due is TickDue.NOTHING and self.rng.random() < 0.7:
            return
        now = self.steps * STEP_S
        for item in member.host.due(now, "a simulated delay"):
            self._input(member, item)
        if self.config.lease_ratio and self.rng.random() < 0.1:
            self._input(member, LeaseClock(self.steps))
        self._input(member, Tick())

    def _crash(self, pid: str) -> None:
        member = self.members[pid]
        if self.rng.random() < self.config.before_sync_ratio:
            member.doomed = True  # dies in its next step, before its sync
            return
        self.counts["crashes"] += 1
        self._restart(member, state_lines(member.host, TIMERS), "the host that crashed")

    def _lose(self, member: Member, item: Input) -> None:
        """A crash before the sync: ``item`` was stepped, then the member died before its
        log write was synced: none of the step's effects left, and the input is not in the
        record.  It comes back as it was before the step."""
        member.doomed = False
        before = state_lines(member.host, TIMERS)
        member.host.step(item)
        self.counts["lost"] += 1
        self._restart(member, before, f"the host before its lost {type(item).__name__}")

    def _restart(self, member: Member, expected: list[tuple[str, Any]], what: str) -> None:
        seed = self.config.seed
        host = (pickle.loads(member.snapshot) if member.snapshot is not None  # noqa: S301
                else member.create())  # fmt: skip
        for index, (item, effects) in enumerate(member.log):
            again = host.step(item)
            if again != effects:
                raise DeterminismError(
                    f"seed {seed}: {member.pid}: the replay of logged input {index} "
                    f"({item!r:.200}) gave {_diff(effects, again)}"
                )
        self.counts["replayed"] += len(member.log)
        got = state_lines(host, TIMERS)
        if got != expected:
            raise DeterminismError(f"seed {seed}: {member.pid}: the rebuilt host differs from "
                                   f"{what}: {_first_difference(expected, got)}")  # fmt: skip
        member.host = host
        self._input(member, Restarted())
        for client in self.clients:  # its connections died with it
            if client.member == member.pid and client.conn:
                self._close(client)

    def _close(self, client: Client) -> None:
        """Its connection closed: its leases went back; a request in flight goes again
        on the next connection."""
        if self.config.lease_ratio:
            consumer = f"{client.name}@{client.conn}"
            self.lease_events.append(LeaseEvent(consumer, "close", self.steps, self.steps))
        client.leases = []
        if client.pending is not None:
            client.resend = True
        client.conn = 0

    # -- clients ---------------------------------------------------------------------------

    def _connect(self, client: Client) -> int:
        self.conns += 1
        client.conn = self.conns
        self.by_conn[client.conn] = client
        return client.conn

    def _client(self, client: Client) -> None:
        if client.pending is not None:
            if client.resend:
                client.resend = False
                self.counts["retried"] += 1
                self._submit(client)
            return
        if self.ops_left == 0:
            return
        self.ops_left -= 1
        client.rid += 1
        lease_ms = 0
        if self.rng.random() < self.config.insert_ratio:
            self.values += 1
            value = f"{client.name}-{self.values}"
            self.inserted.append(value)
            request: Any = InsertRequest(client.rid, [value.encode()])
        else:
            wait_ms = None
            if self.rng.random() < self.config.blocking_ratio:
                wait_ms = self.rng.choice((5, 50, 500))
            if self.rng.random() < self.config.lease_ratio:
                lease_ms = self.rng.choice(LEASE_STEPS)
            request = RemoveRequest(client.rid, 1, None, None, wait_ms, lease_ms or None)
        client.pending = Pending(request, self.steps, lease_ms)
        self._submit(client)

    def _submit(self, client: Client) -> None:
        pending = client.pending
        assert pending is not None
        member = self.members[client.member]
        conn = client.conn or self._connect(client)
        now = self.steps * STEP_S
        timeout = self.config.timeout_steps
        deadline = now + timeout * STEP_S if timeout else math.inf
        if pending.lease_ms:
            self._input(member, LeaseClock(self.steps))  # its lease starts now
        if not self._input(member, FromClient(conn, client.session, pending.request,
                                              deadline, now)):  # fmt: skip
            self._close(client)  # died before the sync: sent again

    def _answered(self, client: Client, reply: Any) -> None:
        pending = client.pending
        if pending is None:
            raise DeterminismError(f"seed {self.config.seed}: {client.name} got {reply!r:.200} "
                                   "with no request in flight")  # fmt: skip
        if isinstance(reply, ErrorReply):
            if reply.code == TIMEOUT:
                self.counts["timeouts"] += 1
            client.resend = True  # the same request again: its first outcome, once
            return
        assert isinstance(reply, Done)
        client.pending = None
        request = pending.request
        if pending.lease_end is not None:
            how, ended, element = pending.lease_end
            self.lease_events.append(LeaseEvent(f"{client.name}@{client.conn}", how,
                                                pending.invoke, self.steps, element, ended,
                                                ok=bool(reply.results[0])))  # fmt: skip
            return
        client.seq += 1
        kind = self.config.structure
        ops = ("enqueue", "dequeue") if kind is Structure.QUEUE else ("push", "pop")
        if isinstance(request, InsertRequest):
            ord_, position = reply.results[0][:2]
            self.records.append(Record(client.name, client.seq, ops[0],
                                       request.values[0].decode(), pending.invoke,
                                       self.steps, position, ord_))  # fmt: skip
            return
        got = reply.results[0]
        value = None if got[0] is None else got[0].decode()
        if pending.lease_ms and value is not None:
            lease_id, deliveries = got[3], got[4]
            # Sent again (after a timeout, or on a new connection), it may be told of the
            # first attempt's lease, which ended since (it expired, or went back with the
            # connection): no lease was held then, and the element may be out again.
            lease = self.members[client.member].host.process.leases.get(lease_id)
            live = lease is not None and lease.holder == client.conn
            if live:
                self.lease_events.append(LeaseEvent(f"{client.name}@{client.conn}", "lease",
                                                    pending.invoke, self.steps, value, lease_id,
                                                    deliveries, pending.lease_ms))  # fmt: skip
                client.leases.append((client.conn, lease_id, value))
        elif value is not None:
            self.taken.append(value)
        self.records.append(Record(client.name, client.seq, ops[1], value, pending.invoke,
                                   self.steps, got[2], got[1]))  # fmt: skip

    def _lease_move(self) -> None:
        """A consumer acks or nacks one of its leases (its answer is recorded)."""
        holders = [c for c in self.clients if c.leases and c.pending is None]
        if not holders:
            return
        client = self.rng.choice(holders)
        conn, lease_id, value = client.leases.pop(0)
        if conn != client.conn:
            return  # granted on a connection that closed since: it went back then
        how = "ack" if self.rng.random() < 0.7 else "nack"
        client.rid += 1
        request = LeaseRequest(how, client.rid, [lease_id])
        client.pending = Pending(request, self.steps, lease_end=(how, lease_id, value))
        self._submit(client)

    # -- the drain -------------------------------------------------------------------------

    def _drain(self) -> None:
        """A drain client removes one element at a time until the structure says empty
        (no crashes now)."""
        drainer = Client("drain", "drain", self.rng.choice(list(self.members)))
        self.clients.append(drainer)
        while True:
            drainer.rid += 1
            drainer.pending = Pending(RemoveRequest(drainer.rid, 1), self.steps)
            self._submit(drainer)
            while drainer.pending is not None:
                self.steps += 1
                if self.steps > self.config.max_steps:
                    raise SimStuck(f"seed {self.config.seed}: the drain is stuck")
                if drainer.resend:  # its member died before the sync: again
                    self._client(drainer)
                elif self.rng.random() < 0.6 and any(self.links.values()):
                    self._deliver()
                else:
                    self._tick(self.rng.choice(list(self.members.values())))
            if self.records[-1].value is None:
                return


def _address(pids: list[str], pid: str) -> Address:
    return Address("10.0.0.1", 7400 + pids.index(pid))


def _diff(first: list[HostEffect], again: list[HostEffect]) -> str:
    for i, (a, b) in enumerate(zip(first, again, strict=False)):
        if a != b:
            return f"effect {i} {b!r:.200}, not {a!r:.200}"
    return f"{len(again)} effects, not {len(first)}"


def _first_difference(expected: list[tuple[str, Any]], got: list[tuple[str, Any]]) -> str:
    for a, b in zip(expected, got, strict=False):
        if a != b:
            return f"expected {a!r:.300}, rebuilt {b!r:.300}"
    return f"{len(expected)} lines expected, {len(got)} rebuilt"
