"""One virtual node: the four stages of SPEC §6 as a pure state machine.

Theory of operation
-------------------
A node holds ``W`` (its own buffer plus the batches its children sent) and ``B`` (the
batch in flight with the layout of its sub-batches).

1. Aggregate (on ``tick``): when ``B`` is empty and every current child has sent a
   batch, ``B := own + children`` (in that fixed order) and ``B`` goes to the parent.
   Empty batches go too: a parent waits for every child.
2. Assign: the anchor (the minimum node) runs its policy on ``B`` instead of sending it.
3. Serve (on ``Grants``): split the grants over the remembered sub-batches; children
   get theirs, the own operations get positions and ranks.
4. DHT: own inserts issue ``Put`` and complete; own removes issue ``Get`` and complete
   when the element comes back (an empty remove completes at once).  The queue then
   clears ``B``; the stack first waits until every own DHT operation finished (paper
   §VI), so that Pushes and Pops of later batches cannot overtake them.

Every node also serves the DHT: it stores entries it is responsible for and routes
``Put``/``Get`` toward their key, one hop per message, from its local view only.

Join, Leave and the update phase (SPEC §8) live in
:mod:`skueue.core.membership.update_phase`; this module
only keeps their state and stops batching while a phase runs.

Every message is checked against the node's state before anything changes
(:meth:`VirtualNode.check`): what a correct peer can never send here raises
:class:`PeerError` and leaves the node exactly as it was.

Nothing here reads a clock, a socket or the global ring; the same inputs in the same
order give the same effects.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NoReturn

from skueue.core.anchor import AnchorPolicy, QueueAnchor, StackAnchor, UpdateTrigger
from skueue.core.batch import Batch, RunGrant, batch_problem, grant_problem, split_grants
from skueue.core.effects import Complete, Effect, Send
from skueue.core.errors import PeerError, ProtocolError
from skueue.core.intake import Assignment, OwnBuffer
from skueue.core.membership import update_phase as membership
from skueue.core.messages.membership import MembershipMessage
from skueue.core.messages.stages import BatchUp, Get, GetReply, Grants, Message, Put, PutAck
from skueue.core.ops import Element, Op, Structure
from skueue.dht.keys import POSITION_MAX, position_key
from skueue.dht.table import Table
from skueue.overlay.labels import Kind, NodeRef
from skueue.overlay.routing import Route, is_responsible, next_hop, start_route
from skueue.overlay.tree import children, parent
from skueue.overlay.view import View


@dataclass(slots=True)
class InFlight:
    """``B``: the batch this node sent (or assigned) and how it was put together."""

    own: OwnBuffer
    layout: tuple[tuple[NodeRef | None, Batch], ...]  # None is the own buffer
    served: bool = False
    # Stack: own DHT operations not yet acknowledged; B is cleared when this empties.
    outstanding: set[int] = field(default_factory=set)
    number: int = 0  # the node's batch counter when this batch went up
    # Each child's batch number, which its grants carry back.
    child_numbers: dict[NodeRef, int] = field(default_factory=dict)
    reports_leave: bool = False  # the batch carries this node's own Leave
    reports_join: bool = False  # the batch carries this (joining) process's Join
    # Joining left node: JoinCounted acknowledgements awaited before the next batch.
    holds: set[NodeRef] = field(default_factory=set)

    def done(self) -> bool:
        return self.served and not self.outstanding and not self.holds


def new_anchor(structure: Structure) -> AnchorPolicy:
    return QueueAnchor() if structure is Structure.QUEUE else StackAnchor()


@dataclass(slots=True)
class VirtualNode:
    view: View
    structure: Structure
    anchor: AnchorPolicy | None = None
    own: OwnBuffer = field(init=False)
    child_batches: dict[NodeRef, Batch] = field(default_factory=dict)
    child_numbers: dict[NodeRef, int] = field(default_factory=dict)  # BatchUp.number of each
    inflight: InFlight | None = None
    table: Table[tuple[NodeRef, int], Element] = field(default_factory=Table)
    # Own removes waiting for their element: op_id -> assignment.
    awaiting: dict[int, Assignment] = field(default_factory=dict)
    batches_sent: int = 0
    largest_batch: int = 0  # most runs in any batch this node sent or assigned (Theorem 18/20)
    last_batch_operations: int = 0  # operations in the batch this node sent last (for logs)
    # Whether the last grants said the cluster's batch held operations (a pacing hint).
    cluster_busy: bool = False
    # Own Puts not yet acknowledged: an update phase waits until none is on its way.
    unacked_puts: set[int] = field(default_factory=set)
    # Membership (SPEC §8); see skueue.core.membership.update_phase.
    mode: membership.Mode = membership.Mode.MEMBER
    contact: NodeRef | None = None  # joining: where the join requests go
    responsible: NodeRef | None = None  # joining: the node that placed us
    join_wait_ticks: int = 0
    ticket: membership.JoinTicket | None = None  # joining: shared by the process's nodes
    joiners: list[NodeRef] = field(default_factory=list)  # placed here, not yet integrated
    counted_joiners: set[NodeRef] = field(default_factory=set)  # ... and counted: go next phase
    leave: membership.LeaveTicket | None = None  # leaving: shared by the process's nodes
    phase: membership.UpdatePhase | None = None
    deferred_joins: list[NodeRef] = field(default_factory=list)
    withdrawn: set[tuple[NodeRef, int]] = field(default_factory=set)
    # Relayed joiners placed elsewhere now whose Withdraw (or IntegrateAck) is still due:
    # a batch they sent before they knew may still come, and is accepted until then.
    released: set[NodeRef] = field(default_factory=set)
    # Handovers arriving in pieces (leaves and joins): see skueue.core.membership.state.
    incoming: membership.Incoming = field(default_factory=lambda: membership.Incoming())
    # Largest handover message this node sends: entries beyond it go in several pieces.
    handover_bytes_max: int = membership.HANDOVER_BYTES_MAX
    trigger: UpdateTrigger | None = None
    # Tree edges follow from the view (and the joiners relayed here); kept here because
    # tick runs every round.
    kids: tuple[NodeRef, ...] = field(init=False)
    up: NodeRef | None = field(init=False)

    def __post_init__(self) -> None:
        self.own = OwnBuffer(self.structure)
        if self.anchor is None and self.mode is membership.Mode.MEMBER and self.view.is_anchor:
            self.anchor = new_anchor(self.structure)
        if self.anchor is not None and self.trigger is None:
            self.trigger = UpdateTrigger()
        self.set_view(self.view)

    def set_view(self, view: View) -> None:
        self.view = view
        self.recompute_tree()

    def recompute_tree(self) -> None:
        if self.mode is membership.Mode.JOINING:
            # A joining left node is relayed as a child of its responsible node.
            self.kids = ()
            self.up = self.responsible if self.me.kind is Kind.LEFT else None
            return
        relayed = tuple(j for j in self.joiners if j.kind is Kind.LEFT)
        self.kids = children(self.view) + relayed
        self.up = parent(self.view)

    @property
    def me(self) -> NodeRef:
        return self.view.me

    # -- inputs ---------------------------------------------------------------------

    def submit(self, op: Op) -> list[Effect]:
        if op.kind.structure is not self.structure:
            raise ValueError(f"{op.kind.value} is not an operation of a {self.structure.value}")
        if self.leave is not None:
            raise ValueError("this process is leaving and takes no new operations")
        self.own.add(op)
        return []

    def tick(self) -> list[Effect]:
        """The paper's Timeout: stage 1 when B is empty and every child has reported."""
        if self.mode is membership.Mode.JOINING:
            effects = membership.joining_tick(self)
            if self.up is None:
                return effects
        elif self.mode is not membership.Mode.MEMBER:
            return []
        else:
            effects = []
        if self.phase is not None or not self.can_fire():
            return effects
        kids = self.kids
        own_batch = self.own_batch()
        layout = ((None, own_batch), *((k, self.child_batches.pop(k)) for k in kids))
        self.inflight = InFlight(
            self.own,
            layout,
            number=self.batches_sent,
            child_numbers={k: self.child_numbers.pop(k) for k in kids},
            reports_leave=own_batch.leaves > 0,
            reports_join=own_batch.joins > 0 and self.mode is membership.Mode.JOINING,
        )
        self.own = OwnBuffer(self.structure)
        combined = own_batch
        for _, b in layout[1:]:
            combined = combined.combine(b)
        self.batches_sent += 1
        self.largest_batch = max(self.largest_batch, len(combined.counts))
        self.last_batch_operations = combined.operations
        if self.anchor is not None:
            assert self.trigger is not None
            update = self.trigger.observe(combined)
            grants = self.anchor.assign(combined)
            return effects + self._serve(grants, combined.operations > 0, update)
        assert self.up is not None, "only the anchor has no parent"
        return [*effects, Send(self.up, BatchUp(self.me, combined, self.inflight.number))]

    def own_batch(self) -> Batch:
        """The own buffer's batch plus this node's membership counters (SPEC §8)."""
        b = self.own.batch()
        member = self.mode is membership.Mode.MEMBER
        return replace(
            b,
            joins=membership.join_report(self),
            leaves=membership.leave_report(self),
            nodes=1 if member else 0,
        )

    def handle(self, message: Message | MembershipMessage) -> list[Effect]:
        self.check(message)
        effects = self._handle(message)
        return effects + membership.progress(self)

    # -- checks: the sender's fault, found before anything changes ---------------------

    def refuse(self, why: str) -> NoReturn:
        raise PeerError(f"{self.me.describe()}: {why}")

    def check(self, message: Message | MembershipMessage) -> None:
        """Raise :class:`PeerError` if ``message`` cannot come from a correct peer now."""
        if self.mode is membership.Mode.DEPARTED:
            self.refuse(f"has left; got {message.describe()}")
        match message:
            case BatchUp():
                self._check_batch_up(message)
            case Grants():
                self._check_grants(message)
            case Put() | Get():
                self._check_dht(message)
            case GetReply(op_id=op_id, position=position, element=element):
                a = self.awaiting.get(op_id)
                if a is None or a.position != position:
                    self.refuse(f"reply for op #{op_id} at {position}, which nobody awaits")
                if not isinstance(element, bytes | str):
                    self.refuse("an element is bytes or text")
            case PutAck(op_id=op_id):
                if op_id not in self.unacked_puts:
                    self.refuse(f"PutAck for op #{op_id}, which sent no Put")
            case _:
                membership.check(self, message)

    def _check_batch_up(self, m: BatchUp) -> None:
        if (m.sender, m.number) in self.withdrawn:
            return  # a batch taken back: dropped when it comes
        if m.sender not in self.kids and m.sender not in self.released:
            self.refuse(f"batch from {m.sender.describe()}, which is not a child")
        if m.sender in self.child_batches:
            self.refuse(f"second batch from {m.sender.describe()}")
        if m.number < 0:
            self.refuse(f"batch number {m.number}")
        problem = batch_problem(m.batch, self.structure is Structure.STACK)
        if problem:
            self.refuse(f"batch {m.batch.describe()} from {m.sender.describe()}: {problem}")

    def _check_grants(self, m: Grants) -> None:
        flight = self.inflight
        if flight is None or flight.served:
            self.refuse("grants without a batch in flight")
        if m.number != flight.number:
            self.refuse(f"grants for batch #{m.number}; #{flight.number} is in flight")
        if m.update and self.phase is not None:
            self.refuse("update grants during an update phase")
        subs = [b for _, b in flight.layout]
        runs = max((len(b.counts) for b in subs), default=0)
        if len(m.grants) != runs:
            self.refuse(f"{len(m.grants)} grants for a batch of {runs} runs")
        stack = self.structure is Structure.STACK
        for i, g in enumerate(m.grants):
            count = sum(b.counts[i] for b in subs if i < len(b.counts))
            problem = grant_problem(g, i, count, stack)
            if problem:
                self.refuse(f"grants {m.describe()}: {problem}")

    def _check_dht(self, m: Put | Get) -> None:
        if self.mode is not membership.Mode.MEMBER:
            self.refuse(f"is not in the ring: {m.describe()}")
        if not 1 <= m.position <= POSITION_MAX or m.op_id < 0:
            self.refuse(f"{m.describe()}: position or op id out of range")
        stack = self.structure is Structure.STACK
        if m.ticket < 0 or (not stack and m.ticket != 0):
            self.refuse(f"{m.describe()}: ticket {m.ticket} for a {self.structure.value}")
        key = position_key(m.position)
        if m.route is not None and m.route.target != key:
            self.refuse(f"{m.describe()}: routed to another key")
        if not is_responsible(self.view, key):
            return  # passed on; the node that stores it checks the rest
        if isinstance(m, Put):
            if not isinstance(m.element, bytes | str):
                self.refuse("an element is bytes or text")
            if m.ticket in self.table.entries.get(m.position, {}):
                self.refuse(f"{m.describe()}: position {m.position} is taken")
        elif any(w == (m.requester, m.op_id) for _, w in self.table.waiting.get(m.position, [])):
            self.refuse(f"{m.describe()}: waits here already")

    def _handle(self, message: Message | MembershipMessage) -> list[Effect]:
        match message:
            case BatchUp(sender=sender, batch=batch, number=number):
                if (sender, number) in self.withdrawn:
                    # A joiner took this batch back when it was integrated.
                    self.withdrawn.discard((sender, number))
                    return []
                self.child_batches[sender] = batch
                self.child_numbers[sender] = number
                return []
            case Grants(grants=grants, busy=busy, update=update):
                return self._serve(grants, busy, update)
            case Put() | Get():
                return self._route(message)
            case GetReply(op_id=op_id, element=element):
                return self._got(op_id, element)
            case PutAck(op_id=op_id):
                return self._finished_dht(op_id)
        return membership.handle(self, message)

    # -- stage 3 and 4 --------------------------------------------------------------

    def _serve(self, grants: tuple[RunGrant, ...], busy: bool, update: bool) -> list[Effect]:
        flight = self.inflight
        if flight is None or flight.served:
            raise ProtocolError(f"{self.me.describe()}: grants without a batch in flight")
        flight.served = True
        self.cluster_busy = busy
        if flight.reports_leave:
            assert self.leave is not None
            self.leave.counted = True
        effects: list[Effect] = membership.join_counted(self, flight) if flight.reports_join else []
        parts = split_grants(grants, [b for _, b in flight.layout])
        old_children = []
        for (child, _), part in zip(flight.layout, parts, strict=True):
            if child is not None:
                number = flight.child_numbers[child]
                effects.append(Send(child, Grants(part, busy, update, number)))
                old_children.append(child)
        for a in flight.own.assign(parts[0]):
            effects.extend(self._start(a, flight))
        if flight.done():
            self.inflight = None
        if update:
            membership.enter_phase(self, tuple(old_children))
        return effects

    def _start(self, a: Assignment, flight: InFlight) -> list[Effect]:
        op = a.op
        if a.combined:
            value = op.value if op.kind.inserts else a.combined_value
            return [Complete(op.op_id, value, a.ord)]
        if a.position is None:
            return [Complete(op.op_id, None, a.ord)]
        stack = self.structure is Structure.STACK
        if stack:
            flight.outstanding.add(op.op_id)
        if op.kind.inserts:
            assert op.value is not None
            self.unacked_puts.add(op.op_id)
            put = Put(None, a.position, op.value, a.ticket, self.me, op.op_id, ack=True)
            return [Complete(op.op_id, op.value, a.ord, a.position), *self._issue(put)]
        self.awaiting[op.op_id] = a
        return self._issue(Get(None, a.position, a.ticket, self.me, op.op_id))

    def _issue(self, message: Put | Get) -> list[Effect]:
        """Start a DHT operation; a joining node has no place in the ring yet, so its
        responsible node starts the routing for it."""
        if self.mode is membership.Mode.JOINING:
            assert self.responsible is not None
            return [Send(self.responsible, message)]
        return self._route(message)

    def _got(self, op_id: int, element: Element) -> list[Effect]:
        a = self.awaiting.pop(op_id, None)
        if a is None:
            raise ProtocolError(f"{self.me.describe()}: reply for unknown op #{op_id}")
        return [Complete(op_id, element, a.ord, a.position), *self._finished_dht(op_id)]

    def _finished_dht(self, op_id: int) -> list[Effect]:
        self.unacked_puts.discard(op_id)
        flight = self.inflight
        if flight is not None and op_id in flight.outstanding:
            flight.outstanding.discard(op_id)
            if flight.done():
                self.inflight = None
        return []

    # -- DHT ------------------------------------------------------------------------

    def _route(self, message: Put | Get) -> list[Effect]:
        if self.mode is not membership.Mode.MEMBER:
            raise ProtocolError(f"{self.me.describe()} is not in the ring: {message!r}")
        start = message.route or start_route(self.view, position_key(message.position))
        hop, route = next_hop(self.view, start)
        if hop is not None:
            return [Send(hop, with_route(message, route))]
        if isinstance(message, Put):
            return self._store(message)
        found, element = self.table.get(
            message.position, (message.requester, message.op_id), message.ticket
        )
        if not found:
            return []
        assert element is not None
        return [Send(message.requester, GetReply(message.op_id, message.position, element))]

    def _store(self, put: Put) -> list[Effect]:
        effects: list[Effect] = [
            Send(requester, GetReply(op_id, put.position, element))
            for (requester, op_id), element in self.table.put(put.position, put.element, put.ticket)
        ]
        if put.ack:
            effects.append(Send(put.requester, PutAck(put.op_id)))
        return effects

    # -- introspection ----------------------------------------------------------------

    def can_fire(self) -> bool:
        """Stage 1's condition: a tick now would send (or assign) a batch."""
        if self.inflight is not None or len(self.child_batches) < len(self.kids):
            return False
        return all(k in self.child_batches for k in self.kids)

    def has_operations(self) -> bool:
        """Own operations or a child's non-empty batch wait for the next batch."""
        return len(self.own) > 0 or any(not b.is_empty for b in self.child_batches.values())

    def wants_speed(self) -> bool:
        """Operations wait here, or the cluster was busy a moment ago: do not pace."""
        return self.cluster_busy or self.has_operations()

    def waiting_for(self) -> str | None:
        """Why this node is not idle, for a driver's diagnosis; None if it is idle."""
        reasons = []
        if self.inflight is not None:
            if not self.inflight.served:
                reasons.append("grants for its batch")
            if self.inflight.outstanding:
                reasons.append(f"{len(self.inflight.outstanding)} own DHT operations")
        if self.awaiting:
            reasons.append(f"elements for {len(self.awaiting)} Gets")
        if self.phase is not None:
            reasons.append(f"the update phase ({self.phase.describe()})")
        if self.mode is membership.Mode.JOINING:
            reasons.append("integration (joining)")
        if self.table.waiting:
            reasons.append(f"{self.table.waiting_count()} Puts that Gets wait for here")
        return ", ".join(reasons) or None

    def describe(self) -> str:
        state = (
            "idle"
            if self.inflight is None
            else ("serving" if self.inflight.served else "aggregating")
        )
        anchor = f" anchor {self.anchor.describe()}" if self.anchor else ""
        return (
            f"{self.me.describe()} {state} own={len(self.own)} kids={len(self.child_batches)}"
            f" entries={len(self.table)}{anchor}"
        )


def with_route(message: Put | Get, route: Route) -> Put | Get:
    """The same DHT request one hop further (built field by field: the message classes
    are another module's, and this needs nothing of how they are made)."""
    if isinstance(message, Put):
        return Put(route, message.position, message.element, message.ticket,
                   message.requester, message.op_id, message.ack)
    return Get(route, message.position, message.ticket, message.requester, message.op_id)
