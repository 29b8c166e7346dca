"""The clients of a hosts simulation (skueue/sim/hosts.py): a workload of requests, sent
as a daemon's clients send them, and their answers turned into histories.

Theory of operation
-------------------
Each client has a session and one request at a time, on a connection to one member.
The workload is one script of :class:`Plan` items, which idle clients take in turn:
inserts and removes on the default queue, and on named queues the tests ask for (a
priority queue made with ``P`` levels, a name deleted and made again with the other
structure).  A request has a deadline; one answered ``timeout``, or whose connection
broke (its member crashed, or the client's own connection dropped), is sent again with
the same session and request id and must get its first attempt's outcome
(``skueue/host/retries.py``), never a second effect.  Some removes block (``wait_ms``),
some take a lease, acked or nacked later.  A client whose member is leaving (or gone)
takes its next request to a member in the ring, on a new connection.

What the clients saw becomes

- a history (:class:`~skueue.check.history.Record`, one per answered insert, remove and
  peek, on any queue; program order is a client's), for :func:`skueue.check.checker.check`;
- lease events (:class:`~skueue.check.leases.LeaseEvent`) for
  :func:`skueue.check.leases.check_leases`;
- deletes (:class:`Deleted`), configures and refusals, for the tests of named queues.

Time is the driver's step counter (a step is a millisecond).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from skueue.check.history import Record
from skueue.check.leases import LeaseEvent
from skueue.core.ops import DEFAULT_QUEUE, Structure
from skueue.host.inputs import ClientGone, FromClient, Input, LeaseClock
from skueue.host.replies import REFUSED, TIMEOUT, UNAVAILABLE, Done, ErrorReply

# The host's client protocol: requests and replies.  (The only module of the simulator
# that names them: when they move, only these imports change.)
from skueue.host.requests import (
    ConfigureRequest,
    CreateRequest,
    DeleteRequest,
    InsertRequest,
    LeaseRequest,
    LeaveRequest,
    PeekRequest,
    RemoveRequest,
)
from skueue.host.results import Configured, Inserted, LeaseAnswer, Removed
from skueue.host.results import Deleted as DeletedResult
from skueue.host.state_lines import DeterminismError
from skueue.sim.host_members import Member
from skueue.sim.host_workload import Plan
from skueue.sim.recorder import insert_level

STEP_S = 0.001
"""Driver seconds per step: a step is a millisecond of every clock."""
LEASE_STEPS = (20, 100, 500)
WAIT_STEPS = (5, 50, 500)
DROP_RATIO = 0.01  # a client's own connection breaks before one of its sends


@dataclass(frozen=True, slots=True)
class Deleted:
    """An answered delete: how many elements it removed, and its rank in the name's
    order (a name deleted and made again goes on above every rank of the old one)."""

    client: str
    queue: str
    removed: int
    ord: int
    invoke: int
    response: int


@dataclass
class Pending:
    """A client's request in flight: sent again, the same, until it is answered."""

    request: Any
    plan: Plan | None  # None: a lease's ack or nack, or a leave
    invoke: int
    value: str | None = None  # an insert's
    lease_ms: int = 0
    lease_end: tuple[str, int, str] | None = None  # an ack's or nack's: how, lease, value
    sent: int = 0  # attempts


@dataclass
class Client:
    name: str
    session: str | None  # None: an admin's (its requests are not sent again by session)
    member: str  # the member its connection is to
    conn: int = 0  # its connection (0: none open)
    pending: Pending | None = None
    resend: bool = False  # its connection died: send the request again
    rid: int = 0
    seq: int = 0
    leases: list[tuple[int, int, str]] = field(default_factory=list)  # conn, lease, value
    into: list[str] | None = None  # where its removed elements go (None: taken)


@dataclass
class ClientsConfig:
    structure: Structure
    timeout_steps: int  # a request's deadline (0: none)
    blocking_ratio: float
    lease_ratio: float
    max_deliveries: int
    seed: int


class SimClients:
    """The clients, their script, and what they saw."""

    def __init__(
        self,
        config: ClientsConfig,
        rng: random.Random,
        members: dict[str, Member],
        step: Callable[[Member, Input], bool],
        now: Callable[[], int],
    ) -> None:
        """``step(member, input)``: the driver steps the input on the member (False: the
        member died before its sync, and the input is lost)."""
        self.config = config
        self.rng = rng
        self.members = members
        self.step = step
        self.now = now
        self.clients: list[Client] = []
        self.script: list[Plan] = []
        self.conns = 0
        self.by_conn: dict[int, Client] = {}
        self.values = 0
        self.unmade: set[str] = set()  # named queues whose create is still to come
        self.records: list[Record] = []
        self.lease_events: list[LeaseEvent] = []
        self.inserted: list[str] = []
        self.taken: list[str] = []  # removed by plain removes (not the drain's)
        self.priorities: dict[str, int] = {}  # an insert's asked level, by value
        self.deletes: list[Deleted] = []
        self.refusals: list[tuple[Plan, str]] = []
        self.configured: list[tuple[Plan, Configured]] = []  # with the settings answered
        self.counts = {"retried": 0, "timeouts": 0, "moved": 0, "drops": 0}

    # -- the clients' moves ---------------------------------------------------------------

    def add(self, name: str, member: str, session: str | None = None) -> Client:
        client = Client(name, session, member)
        self.clients.append(client)
        return client

    def act(self, client: Client) -> None:
        """The client's next move: its request again (its connection died), or the next
        operation of the script."""
        if client.pending is not None:
            if client.resend:
                client.resend = False
                self.counts["retried"] += 1
                self.send(client)
            return
        if not self.script or client.session is None:
            return
        plan = self.script[-1]
        if plan.queue in self.unmade and plan.kind != "create":
            return  # its queue is being made
        self.script.pop()
        self.start(client, plan)

    def start(self, client: Client, plan: Plan) -> None:
        client.rid += 1
        rid, lease_ms, value = client.rid, 0, None
        cfg, rng = self.config, self.rng
        match plan.kind:
            case "insert":
                self.values += 1
                value = f"{client.name}-{self.values}"
                self.inserted.append(value)
                self.priorities[value] = plan.priority
                request: Any = InsertRequest(rid, (value.encode(),), plan.queue, plan.stack,
                                             plan.priority or None)  # fmt: skip
            case "remove":
                wait_ms = rng.choice(WAIT_STEPS) if rng.random() < cfg.blocking_ratio else None
                if plan.may_lease and cfg.lease_ratio and rng.random() < cfg.lease_ratio:
                    lease_ms = rng.choice(LEASE_STEPS)
                limit = cfg.max_deliveries if lease_ms and cfg.max_deliveries else None
                request = RemoveRequest(rid, 1, plan.queue, plan.stack, wait_ms,
                                        lease_ms or None, limit)  # fmt: skip
            case "peek":
                request = PeekRequest(rid, plan.queue)
            case "delete":
                assert plan.queue is not None
                request = DeleteRequest(rid, plan.queue)
            case "create":
                assert plan.queue is not None
                request = CreateRequest(rid, plan.queue, plan.stack, None, plan.levels)
            case "configure":
                assert plan.queue is not None
                request = ConfigureRequest(rid, plan.queue, plan.limit)
            case _:
                raise ValueError(f"not a plan: {plan!r}")
        client.pending = Pending(request, plan, self.now(), value, lease_ms)
        self.send(client)

    def leave(self, client: Client) -> None:
        """An admin asks its member to leave the cluster (answered once it left)."""
        client.rid += 1
        client.pending = Pending(LeaveRequest(client.rid), None, self.now())
        self.send(client)

    def send(self, client: Client) -> None:
        pending = client.pending
        assert pending is not None
        member = self.members[client.member]
        if client.conn and client.session is not None and self.rng.random() < DROP_RATIO:
            self.counts["drops"] += 1  # its own connection broke: a new one, and again
            self.disconnect(client)
            # ... now, once: not again at its next move, on the same connection, when
            # its answer may be on the way (a replicated leader holds it to the commit).
            client.resend = False
        if not client.conn:
            self.conns += 1
            client.conn = self.conns
            self.by_conn[client.conn] = client
        now = self.now() * STEP_S
        timeout = self.config.timeout_steps
        deadline = now + timeout * STEP_S if timeout and client.session else math.inf
        if pending.lease_ms:
            self.step(member, LeaseClock(self.now()))  # its lease starts now
        pending.sent += 1
        item = FromClient(client.conn, client.session, pending.request, deadline, now)
        if not self.step(member, item):
            self.closed(client)  # died before its sync: sent again on a new connection

    def disconnect(self, client: Client) -> None:
        """The client closes its connection (its member steps ``ClientGone``)."""
        member = self.members[client.member]
        if client.conn and not member.gone:
            conn = client.conn
            self.closed(client)
            self.step(member, ClientGone(conn))

    def closed(self, client: Client) -> None:
        """Its connection closed: its leases went back; a request in flight goes again
        on the next connection."""
        if client.leases or self.config.lease_ratio:
            consumer = f"{client.name}@{client.conn}"
            self.lease_events.append(LeaseEvent(consumer, "close", self.now(), self.now()))
        client.leases = []
        if client.pending is not None:
            client.resend = True
        client.conn = 0

    def member_crashed(self, pid: str) -> None:
        for client in self.clients:
            if client.member == pid and client.conn:
                self.closed(client)

    def member_leaving(self, pid: str) -> None:
        """``pid`` began to leave: the leases it granted went back (``Process.leave``)."""
        for client in self.clients:
            if client.member == pid and client.leases:
                consumer = f"{client.name}@{client.conn}"
                self.lease_events.append(LeaseEvent(consumer, "close", self.now(), self.now()))
                client.leases = []

    def move(self, client: Client, serving: list[str]) -> None:
        """A client whose member does not serve takes its next request elsewhere."""
        if client.pending is not None or self.members[client.member].serving or not serving:
            return
        self.disconnect(client)
        client.member = self.rng.choice(serving)
        self.counts["moved"] += 1

    def lease_move(self) -> None:
        """A consumer acks or nacks one of its leases (its answer is recorded)."""
        holders = [c for c in self.clients if c.leases and c.pending is None]
        if not holders:
            return
        client = self.rng.choice(holders)
        conn, lease_id, value = client.leases.pop(0)
        if conn != client.conn:
            return  # granted on a connection that closed since: it went back then
        how: Literal["ack", "nack"] = "ack" if self.rng.random() < 0.7 else "nack"
        client.rid += 1
        request = LeaseRequest(client.rid, how, (lease_id,))
        client.pending = Pending(request, None, self.now(), lease_end=(how, lease_id, value))
        self.send(client)

    def idle(self) -> bool:
        return not self.script and all(c.pending is None and not c.leases for c in self.clients)

    # -- answers --------------------------------------------------------------------------

    def answered(self, conn: int, reply: Any) -> None:
        client = self.by_conn.get(conn)
        if client is None or client.conn != conn:
            return  # a connection closed since: nobody reads it
        pending = client.pending
        seed = self.config.seed
        if pending is None:
            raise DeterminismError(f"seed {seed}: {client.name} got {reply!r:.200} "
                                   "with no request in flight")  # fmt: skip
        if isinstance(reply, ErrorReply):
            self._error(client, pending, reply)
            return
        assert isinstance(reply, Done), reply
        client.pending = None
        if pending.lease_end is not None:
            how, ended, element = pending.lease_end
            self.lease_events.append(LeaseEvent(f"{client.name}@{client.conn}", how,
                                                pending.invoke, self.now(), element, ended,
                                                ok=_live(reply.results[0])))  # fmt: skip
            return
        if pending.plan is None:
            return  # a leave, done
        result = reply.results[0]
        match pending.plan.kind:
            case "insert":
                assert isinstance(result, Inserted), result
                self._record(client, pending, pending.value, result.ord, result.position, True)
            case "remove" | "peek":
                assert isinstance(result, Removed), result
                self._removed(client, pending, result)
            case "delete":
                queue = pending.plan.queue
                assert queue is not None and isinstance(result, DeletedResult), result
                self.deletes.append(Deleted(client.name, queue, result.removed, result.ord,
                                            pending.invoke, self.now()))  # fmt: skip
            case "create":
                assert pending.plan.queue is not None
                self.unmade.discard(pending.plan.queue)
            case "configure":
                assert isinstance(result, Configured), result
                self.configured.append((pending.plan, result))

    def _error(self, client: Client, pending: Pending, reply: ErrorReply) -> None:
        if reply.code == TIMEOUT:
            self.counts["timeouts"] += 1
            client.resend = True  # the same request again: its first outcome, once
        elif reply.code == UNAVAILABLE and client.session is not None:
            # Its member is leaving: nothing was done; the request goes to another
            # member, as a new one there.
            client.resend = True
            serving = [m.pid for m in self.members.values() if m.serving]
            if serving:
                self.disconnect(client)
                client.member = self.rng.choice(serving)
                self.counts["moved"] += 1
        elif reply.code == REFUSED and pending.plan is not None:
            client.pending = None
            self.refusals.append((pending.plan, reply.message))
        else:
            raise AssertionError(f"seed {self.config.seed}: {client.name}: "
                                 f"{pending.request!r:.200} got {reply!r:.300}")  # fmt: skip

    def _removed(self, client: Client, pending: Pending, got: Removed) -> None:
        value = None if got.value is None else got.value.decode()
        plan = pending.plan
        assert plan is not None
        if plan.kind == "remove" and value is not None:
            if got.lease is not None:
                self._leased(client, pending, value, got.lease.lease_id, got.lease.deliveries)
            else:  # a plain remove (or a leased one its leaving member handed over)
                (self.taken if client.into is None else client.into).append(value)
        self._record(client, pending, value, got.ord, got.position, False)

    def _leased(self, client: Client, pending: Pending, value: str, lease_id: int,
                deliveries: int) -> None:  # fmt: skip
        # Sent again (after a timeout, or on a new connection), it may be told of the
        # first attempt's lease, which ended since (it expired, or went back with the
        # connection): no lease was held then, and the element may be out again.
        lease = self.members[client.member].host.process.leases.get(lease_id)
        if lease is not None and lease.holder == client.conn:
            self.lease_events.append(LeaseEvent(f"{client.name}@{client.conn}", "lease",
                                                pending.invoke, self.now(), value, lease_id,
                                                deliveries, pending.lease_ms))  # fmt: skip
            client.leases.append((client.conn, lease_id, value))

    def _record(self, client: Client, pending: Pending, value: str | None, ord_: int,
                position: int | None, inserts: bool) -> None:  # fmt: skip
        plan = pending.plan
        assert plan is not None
        client.seq += 1
        stack = plan.stack
        if stack is None:
            stack = plan.queue is None and self.config.structure is Structure.STACK
        if plan.kind == "peek":
            op = "peek"
        elif inserts:
            op = "push" if stack else "enqueue"
        else:
            op = "pop" if stack else "dequeue"
        queue = None if plan.queue in (None, DEFAULT_QUEUE) else plan.queue
        level = insert_level(position) if inserts and position is not None else None
        self.records.append(Record(client.name, client.seq, op, value, pending.invoke,
                                   self.now(), position, ord_, queue=queue,
                                   priority=level))  # fmt: skip


def _live(result: object) -> bool:
    """A lease request's answer for its one lease: whether the lease was still held."""
    assert isinstance(result, LeaseAnswer), result
    return result.live
