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

Nothing here reads a clock, a socket or the global ring; the same inputs in the same
order give the same effects.
"""

from __future__ import annotations

import attrs

from dht.keys import position_key
from dht.table import Table
from overlay.labels import NodeRef
from overlay.routing import next_hop, start_route
from overlay.tree import children, parent
from overlay.view import View
from skueue.anchor import AnchorPolicy, QueueAnchor, StackAnchor
from skueue.batch import Batch, RunGrant, split_grants
from skueue.effects import Complete, Effect, Send
from skueue.intake import Assignment, OwnBuffer
from skueue.messages import BatchUp, Get, GetReply, Grants, Message, Put, PutAck
from skueue.ops import Element, Op, Structure


class ProtocolError(Exception):
    """A message that cannot happen in a correct run (our bug or a misbehaving peer)."""


@attrs.define
class InFlight:
    """``B``: the batch this node sent (or assigned) and how it was put together."""

    own: OwnBuffer
    layout: tuple[tuple[NodeRef | None, Batch], ...]  # None is the own buffer
    served: bool = False
    # Stack: own DHT operations not yet acknowledged; B is cleared when this empties.
    outstanding: set[int] = attrs.field(factory=set)


def new_anchor(structure: Structure) -> AnchorPolicy:
    return QueueAnchor() if structure is Structure.QUEUE else StackAnchor()


@attrs.define
class VirtualNode:
    view: View
    structure: Structure
    anchor: AnchorPolicy | None = None
    own: OwnBuffer = attrs.field(init=False)
    child_batches: dict[NodeRef, Batch] = attrs.field(factory=dict)
    inflight: InFlight | None = None
    table: Table[tuple[NodeRef, int], Element] = attrs.field(factory=Table)
    # Own removes waiting for their element: op_id -> assignment.
    awaiting: dict[int, Assignment] = attrs.field(factory=dict)
    batches_sent: int = 0
    largest_batch: int = 0  # most runs in any batch this node sent or assigned (Theorem 18/20)
    # Whether the last grants said the cluster's batch held operations (a pacing hint).
    cluster_busy: bool = False
    # Tree edges follow from the view; kept here because tick runs every round.
    kids: tuple[NodeRef, ...] = attrs.field(init=False)
    up: NodeRef | None = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.own = OwnBuffer(self.structure)
        self.set_view(self.view)
        if self.anchor is None and self.view.is_anchor:
            self.anchor = new_anchor(self.structure)

    def set_view(self, view: View) -> None:
        self.view = view
        self.kids = children(view)
        self.up = parent(view)

    @property
    def me(self) -> NodeRef:
        return self.view.me

    # -- inputs ---------------------------------------------------------------------

    def submit(self, op: Op) -> list[Effect]:
        if op.kind.structure is not self.structure:
            raise ValueError(f"{op.kind.value} is not an operation of a {self.structure.value}")
        self.own.add(op)
        return []

    def tick(self) -> list[Effect]:
        """The paper's Timeout: stage 1 when B is empty and every child has reported."""
        if self.inflight is not None:
            return []
        if not self.can_fire():
            return []
        kids = self.kids
        own_batch = self.own.batch()
        layout = ((None, own_batch), *((k, self.child_batches.pop(k)) for k in kids))
        self.inflight = InFlight(self.own, layout)
        self.own = OwnBuffer(self.structure)
        combined = own_batch
        for _, b in layout[1:]:
            combined = combined.combine(b)
        self.batches_sent += 1
        self.largest_batch = max(self.largest_batch, len(combined.counts))
        if self.anchor is not None:
            return self._serve(self.anchor.assign(combined), busy=combined.operations > 0)
        assert self.up is not None, "only the anchor has no parent"
        return [Send(self.up, BatchUp(self.me, combined))]

    def handle(self, message: Message) -> list[Effect]:
        match message:
            case BatchUp(sender=sender, batch=batch):
                if sender in self.child_batches:
                    raise ProtocolError(
                        f"{self.me.describe()}: second batch from {sender.describe()}"
                    )
                self.child_batches[sender] = batch
                return []
            case Grants(grants=grants, busy=busy):
                return self._serve(grants, busy)
            case Put() | Get():
                return self._route(message)
            case GetReply(op_id=op_id, element=element):
                return self._got(op_id, element)
            case PutAck(op_id=op_id):
                return self._finished_dht(op_id)
        raise ProtocolError(f"unknown message {message!r}")

    # -- stage 3 and 4 --------------------------------------------------------------

    def _serve(self, grants: tuple[RunGrant, ...], busy: bool) -> list[Effect]:
        flight = self.inflight
        if flight is None or flight.served:
            raise ProtocolError(f"{self.me.describe()}: grants without a batch in flight")
        flight.served = True
        self.cluster_busy = busy
        parts = split_grants(grants, [b for _, b in flight.layout])
        effects: list[Effect] = []
        for (child, _), part in zip(flight.layout, parts, strict=True):
            if child is not None:
                effects.append(Send(child, Grants(part, busy)))
        for a in flight.own.assign(parts[0]):
            effects.extend(self._start(a, flight))
        if self.structure is Structure.QUEUE or not flight.outstanding:
            self.inflight = None
        return effects

    def _start(self, a: Assignment, flight: InFlight) -> list[Effect]:
        op = a.op
        if a.combined:
            value = op.value if op.kind.inserts else a.combined_value
            return [Complete(op.op_id, value, a.ord)]
        if a.position is None:
            return [Complete(op.op_id, None, a.ord)]
        stack = self.structure is Structure.STACK
        route = start_route(self.view, position_key(a.position))
        if op.kind.inserts:
            assert op.value is not None
            if stack:
                flight.outstanding.add(op.op_id)
            put = Put(route, a.position, op.value, a.ticket, self.me, op.op_id, ack=stack)
            return [Complete(op.op_id, op.value, a.ord, a.position), *self._route(put)]
        self.awaiting[op.op_id] = a
        if stack:
            flight.outstanding.add(op.op_id)
        return self._route(Get(route, a.position, a.ticket, self.me, op.op_id))

    def _got(self, op_id: int, element: Element) -> list[Effect]:
        a = self.awaiting.pop(op_id, None)
        if a is None:
            raise ProtocolError(f"{self.me.describe()}: reply for unknown op #{op_id}")
        return [Complete(op_id, element, a.ord, a.position), *self._finished_dht(op_id)]

    def _finished_dht(self, op_id: int) -> list[Effect]:
        flight = self.inflight
        if flight is not None and op_id in flight.outstanding:
            flight.outstanding.discard(op_id)
            if flight.served and not flight.outstanding:
                self.inflight = None
        return []

    # -- DHT ------------------------------------------------------------------------

    def _route(self, message: Put | Get) -> list[Effect]:
        hop, route = next_hop(self.view, message.route)
        if hop is not None:
            return [Send(hop, attrs.evolve(message, route=route))]
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
