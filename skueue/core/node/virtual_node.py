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

The node's state is a few plain parts (:class:`~skueue.core.parts.node_state.NodeState`:
batching, ring, store, anchor seat, membership), each changed by its own methods.  Join,
Leave and the update phase (SPEC §8) live in :mod:`skueue.core.membership`, which
receives the same parts; this module drives the stages and stops batching while a phase
runs.

Every message is checked against the node's state before anything changes
(:mod:`skueue.core.node.checks`): what a correct peer can never send here raises
:class:`RemoteProtocolError` and leaves the node exactly as it was.

Nothing here reads a clock, a socket or the global ring; the same inputs in the same
order give the same effects.
"""

from __future__ import annotations

from skueue.core.batch import (
    Batches,
    Limit,
    Refusal,
    SectionGrants,
    split_by_queue,
    split_section_grants,
)
from skueue.core.creates_deletes import Creation, Deletion, split_creations, split_deletions
from skueue.core.dht_runs import singles
from skueue.core.effects import Complete, Effect, Send
from skueue.core.errors import ProtocolError, RemoteProtocolError
from skueue.core.intake import CREATE_KINDS, Assignment
from skueue.core.membership import update_phase as membership
from skueue.core.membership.removal import note_relayed
from skueue.core.messages.field_types import KeyOwner
from skueue.core.messages.membership import MembershipMessage
from skueue.core.messages.stages import (
    AnswerRun,
    BatchUp,
    DhtBundle,
    DhtRun,
    Drop,
    DropAck,
    Get,
    GetReply,
    Grants,
    Hurry,
    Message,
    Put,
    PutAck,
)
from skueue.core.node.checks import check
from skueue.core.node.dht_requests import with_route
from skueue.core.node.diagnosis import waiting_for
from skueue.core.node.queue_changes import created, deferred_drops, delete
from skueue.core.ops import (
    Item,
    Op,
    OpKind,
    plain,
    queue_name_ok,
    queue_name_problem,
    refusal_text,
    settings_problem,
)
from skueue.core.parts.node_state import NodeState
from skueue.core.parts.ring import Mode
from skueue.core.parts.store import Waiter
from skueue.core.peeks import Peeked, peek_heads, split_peeks
from skueue.dht.keys import position_key
from skueue.overlay.labels import NodeRef
from skueue.overlay.routing import next_hop, start_route

__all__ = ["RemoteProtocolError", "ProtocolError", "VirtualNode"]


class VirtualNode(NodeState):
    """The four stages on top of the node's parts (inputs: ``submit``, ``tick``,
    ``handle``; outputs: effects)."""

    __slots__ = ()

    # -- inputs ---------------------------------------------------------------------

    def submit(self, op: Op) -> list[Effect]:
        if not queue_name_ok(op.queue):  # the driver checks what its clients name
            raise ProtocolError(str(queue_name_problem(op.queue)))
        if op.kind in CREATE_KINDS and (
            op.settings is None or settings_problem(op.queue, op.settings)
        ):
            raise ProtocolError(f"{op.describe()}: settings {op.settings!r}")
        if self.member.leave is not None:
            raise ProtocolError("this process is leaving and takes no new operations")
        self.batching.own.add(op)
        return []

    def tick(self) -> list[Effect]:
        """The paper's Timeout: stage 1 when B is empty and every child has reported."""
        mode = self.ring.mode
        if mode is Mode.JOINING:
            effects = membership.joining_tick(self)
            if self.ring.up is None:
                return effects
        elif mode is not Mode.MEMBER:
            return []
        else:
            effects = []
        if self.member.phase is not None or not self.can_fire():
            return effects
        own_batch = self.own_batch()
        reports_join = own_batch.joins > 0 and mode is Mode.JOINING
        anchor = self.seat.policy
        parent = None if anchor is not None else self.ring.up
        combined = self.batching.fire(
            self.ring.kids, own_batch, reports_join=reports_join, parent=parent
        )
        note_relayed(self)
        if anchor is not None:
            assert self.seat.trigger is not None
            update = self.seat.trigger.observe(combined)
            created = anchor.create(combined.creates) if combined.creates else ()
            grants, refused = anchor.assign(combined)
            limits = anchor.limits_of(combined)
            deleted = anchor.delete(combined.deletes) if combined.deletes else ()
            peeked = peek_heads(anchor, combined.peeks) if combined.peeks else ()
            return effects + self._serve(
                grants, update, refused, deleted, created, limits, peeked
            )
        flight = self.batching.inflight
        assert flight is not None and self.ring.up is not None, "only the anchor has no parent"
        return [*effects, Send(self.ring.up, BatchUp(self.me, combined, flight.number))]

    def own_batch(self) -> Batches:
        """The own buffer's batches plus this node's membership counters (SPEC §8)."""
        own = self.batching.own
        return Batches(
            own.sections(),
            membership.join_report(self),
            membership.leave_report(self),
            1 if self.ring.mode is Mode.MEMBER else 0,
            own.patient,
            own.deletions(),
            own.creations(),
            own.peekings(),
        )

    def handle(self, message: Message | MembershipMessage) -> list[Effect]:
        """Check, then apply.  A :class:`RemoteProtocolError` comes only from the check, with the
        node unchanged; once the message passed it, a refusal is our bug."""
        check(self, message)
        try:
            effects = self._handle(message)
            return effects + membership.progress(self)
        except RemoteProtocolError as e:
            raise ProtocolError(f"a checked message was refused while applied: {e}") from e

    def _handle(self, message: Message | MembershipMessage) -> list[Effect]:
        match message:
            case BatchUp(sender=sender, batch=batch, number=number):
                self.batching.file(sender, batch, number)
                return []
            case Grants(
                grants=grants,
                update=update,
                refused=refused,
                deleted=deleted,
                created=created,
                limits=limits,
                peeked=peeked,
            ):
                return self._serve(grants, update, refused, deleted, created, limits, peeked)
            case Hurry(sender=sender):
                if sender in self.ring.kids:
                    self.batching.grants_wanted = True
                else:  # the parent, or one that was: asking for a batch costs a batch
                    self.batching.hurried = True
                return []
            case DhtBundle() | DhtRun() | AnswerRun():  # as their messages one by one
                return [e for m in singles(message) for e in self._handle(m)]
            case Put() | Get() | Drop():
                return self._route(message)
            case GetReply(op_id=op_id, element=element, owner=owner):
                return self._got(op_id, element, owner)
            case PutAck(op_id=op_id, owner=owner):
                return self._finished_dht(op_id, owner)
            case DropAck(op_id=op_id, owner=owner):
                self.store.dropped(op_id)
                return self._finished_dht(op_id, owner)
        return membership.handle(self, message)

    # -- stage 3 and 4 --------------------------------------------------------------

    def _serve(
        self,
        grants: tuple[SectionGrants, ...],
        update: bool,
        refused: tuple[Refusal, ...] = (),
        deleted: tuple[Deletion, ...] = (),
        created: tuple[Creation, ...] = (),
        limits: tuple[Limit, ...] = (),
        peeked: tuple[Peeked, ...] = (),
    ) -> list[Effect]:
        flight = self.batching.serve()
        effects = self._issue_all(deferred_drops(self.store, self.me))
        if flight.reports_leave:
            membership.leave_counted(self)
        if flight.reports_join:
            effects += membership.join_counted(self)
        subs = [b for _, b in flight.layout]
        parts = split_section_grants(grants, subs)
        none: list[tuple[()]] = [()] * len(subs)
        refusals = split_by_queue(refused, subs) if refused else none
        deletions = split_deletions(deleted, subs) if deleted else none
        creations = split_creations(created, subs) if created else none
        limited = split_by_queue(limits, subs) if limits else none
        peeks = split_peeks(peeked, subs) if peeked else none
        old_children = []
        for (child, _), part, no, gone, made, limit, seen in zip(
            flight.layout, parts, refusals, deletions, creations, limited, peeks, strict=True
        ):
            if child is not None:
                number = flight.child_numbers[child]
                grants_down = Grants(part, update, number, no, gone, made, limit, seen)
                effects.append(Send(child, grants_down))
                old_children.append(child)
        own = flight.own.assign(
            parts[0], refusals[0], deletions[0], creations[0], limited[0], peeks[0]
        )
        for a in own:
            effects.extend(self._start(a))
        self.batching.settle()
        if update:
            membership.enter_phase(self, tuple(old_children))
        return effects

    def _start(self, a: Assignment) -> list[Effect]:
        op = a.op
        if a.refused:
            why = refusal_text(a.refused, op.queue, op.kind)
            return [Complete(op.op_id, None, -1, error=why, refused=a.refused)]
        if a.deleted is not None:
            done, drops = delete(self.store, self.me, op, a.ord, a.deleted)
            return [done, *self._issue_all(drops)]
        if a.created is not None:
            return [created(op, a.created)]
        if a.combined:
            value = op.value if op.kind.inserts else a.combined_value
            return [Complete(op.op_id, value, a.ord, max_deliveries=a.limit)]
        if a.position is None:
            return [Complete(op.op_id, None, a.ord)]
        queue = op.key
        if queue[1] or op.kind is OpKind.PEEK:  # a stack's, or a peek's read (peeks.py)
            self.batching.wait_for_own(op.op_id)
        if op.kind is OpKind.PEEK:
            self.store.awaiting[op.op_id] = a
            return self._issue(Get(None, a.position, 0, self.me, op.op_id, queue, keep=True))
        if op.kind.inserts:
            assert op.value is not None
            self.store.unacked_puts[op.op_id] = (op.queue, a.position)
            put = Put(None, a.position, op.value, a.ticket, self.me, op.op_id, True, queue)
            return [Complete(op.op_id, op.value, a.ord, a.position), *self._issue(put)]
        self.store.awaiting[op.op_id] = a
        return self._issue(Get(None, a.position, a.ticket, self.me, op.op_id, queue))

    def _issue_all(self, messages: list[Drop]) -> list[Effect]:
        return [e for m in messages for e in self._issue(m)]

    def _issue(self, message: Put | Get | Drop) -> list[Effect]:
        """Start a DHT operation: straight to the key's owner when an answer told us who
        that is, else routed from here; a joining node has no place in the ring yet, so
        its responsible node starts the routing for it."""
        if self.ring.mode is Mode.JOINING:
            assert self.ring.responsible is not None
            return [Send(self.ring.responsible, message)]
        owners = self.store.owners
        owners.issued.add(message.op_id)
        owner = owners.owner_of(position_key(message.queue[0], message.position))
        if owner is not None and owner != self.me:
            return [Send(owner, message)]  # unrouted: a node no longer responsible routes it
        return self._route(message)

    def _got(self, op_id: int, element: Item, owner: KeyOwner | None) -> list[Effect]:
        a = self.store.awaiting.pop(op_id, None)
        if a is None:
            raise ProtocolError(f"{self.me.describe()}: reply for unknown op #{op_id}")
        if a.op.kind is OpKind.PEEK:  # the element only: a peek hands out no lease
            element = plain(element)
        done = Complete(op_id, element, a.ord, a.position, max_deliveries=a.limit)
        return [done, *self._finished_dht(op_id, owner)]

    def _finished_dht(self, op_id: int, owner: KeyOwner | None) -> list[Effect]:
        self.store.unacked_puts.pop(op_id, None)
        self.store.owners.answered(op_id, owner)
        self.batching.finished(op_id)
        return []

    def _owner(self) -> KeyOwner:
        """This node and the end of its interval, for the answers it sends as owner."""
        return (self.me, self.ring.view.succ.label)

    # -- DHT ------------------------------------------------------------------------

    def _route(self, message: Put | Get | Drop) -> list[Effect]:
        if self.ring.mode is not Mode.MEMBER:
            raise ProtocolError(f"{self.me.describe()} is not in the ring: {message!r}")
        view = self.ring.view
        start = message.route or start_route(view, position_key(message.queue[0], message.position))
        hop, route = next_hop(view, start)
        if hop is not None:
            return [Send(hop, with_route(message, route))]
        if isinstance(message, Put):
            return self._store(message)
        waiter = (message.requester, message.op_id, isinstance(message, Drop))
        table = self.store.table(message.queue[0])
        if isinstance(message, Get) and message.keep:
            found, element = table.look(message.position, waiter)
        else:
            found, element = table.get(message.position, waiter, message.ticket)
        if not found:
            return []
        assert element is not None
        return [self._answer(waiter, message.position, element, self._owner())]

    def _answer(self, waiter: Waiter, position: int, element: Item, owner: KeyOwner) -> Send:
        """What a Get (the element) or a Drop (an acknowledgement) that found its entry
        gets back."""
        requester, op_id, drop = waiter
        if drop:
            return Send(requester, DropAck(op_id, position, owner))
        return Send(requester, GetReply(op_id, position, element, owner))

    def _store(self, put: Put) -> list[Effect]:
        served = self.store.table(put.queue[0]).put(put.position, put.element, put.ticket)
        owner = self._owner()
        effects: list[Effect] = [
            self._answer(waiter, put.position, element, owner) for waiter, element in served
        ]
        if put.ack:
            effects.append(Send(put.requester, PutAck(put.op_id, owner)))
        return effects

    # -- introspection ----------------------------------------------------------------

    def can_fire(self) -> bool:
        """Stage 1's condition: a tick now would send (or assign) a batch.  Not in an
        update phase, and not outside the ring (a joining node batches once it has a
        parent to send to)."""
        ring = self.ring
        if self.member.phase is not None:
            return False
        if ring.mode is not Mode.MEMBER and not (ring.mode is Mode.JOINING and ring.up is not None):
            return False
        return self.batching.can_fire(ring.kids)

    def wants_speed(self) -> bool:
        """Operations wait here, or a neighbour hurried this node: do not pace."""
        return self.batching.urgent()

    def to_hurry(self) -> list[NodeRef]:
        """Neighbours to send a Hurry now (see :meth:`Process.tick_due`): none while
        this node is outside the ring or in an update phase, when it does not batch."""
        if self.ring.mode is not Mode.MEMBER or self.member.phase is not None:
            return []
        return self.batching.to_hurry(self.ring.kids, self.ring.up)

    def waiting_for(self) -> str | None:
        """Why this node is not idle, for a driver's diagnosis; None if it is idle."""
        return waiting_for(self)

    def describe(self) -> str:
        flight = self.batching.inflight
        state = "idle" if flight is None else ("serving" if flight.served else "aggregating")
        policy = self.seat.policy
        anchor = f" anchor {policy.describe()}" if policy else ""
        return (
            f"{self.me.describe()} {state} own={len(self.batching.own)}"
            f" kids={len(self.batching.child_batches)}"
            f" entries={self.store.entries()}{anchor}"
        )

