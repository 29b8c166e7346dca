"""One process: its left, middle and right virtual nodes, behind the core contract.

    submit(op) -> effects     a client request enters
    handle(to, message)       a message for one of this process's nodes arrives
    tick() -> effects         the paper's Timeout, once per round

Messages between the process's own virtual nodes never leave it: they are handled in
the same step until nothing local is left, and only messages for other processes come
out as ``Send`` effects.  (A driver that wants to count virtual hops as rounds can turn
this off with ``local_delivery=False``.)

Peer input: ``handle`` checks the message against the receiving node's state before
anything changes, and raises :class:`~skueue.core.errors.RemoteProtocolError` (the sender's fault)
with the process unchanged; a driver drops the link and carries on.  Messages between
the process's own nodes are ours: one of them refused is our bug, a loud
:class:`~skueue.core.errors.ProtocolError`.

Client intake: every operation of a process enters the buffer of one node, the left
node, because one buffer per process is what keeps program order (SPEC §6), and the left
node is the highest of the three in the tree.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from skueue.core.dht_bundles import bundle_dht
from skueue.core.effects import Effect, Send
from skueue.core.errors import ProtocolError, RemoteProtocolError
from skueue.core.leases import Lease, Leases
from skueue.core.membership import update_phase as membership
from skueue.core.membership.removal import Hold, forget_joiner, hold_on
from skueue.core.membership.state import HANDOVER_OVERHEAD_BYTES, LOSSY_WHEN_DEPARTED
from skueue.core.messages.membership import MembershipMessage
from skueue.core.messages.stages import Grants, Hurry, Message
from skueue.core.node.virtual_node import VirtualNode
from skueue.core.ops import DEFAULT_QUEUE, Item, Op, OpKind, QueueSettings, Structure
from skueue.core.parts.membership_state import HANDOVER_BYTES_MAX, JoinTicket, LeaveTicket
from skueue.core.parts.ring import Mode
from skueue.core.stats import ProcessStats, node_stats
from skueue.overlay.labels import Kind, NodeRef, process_nodes
from skueue.overlay.view import View

INTAKE_KIND = Kind.LEFT


class TickDue(enum.Enum):
    NOW = "now"  # a batch can go up and operations wait in this process
    IDLE = "idle"  # only an empty batch can go up
    NOTHING = "nothing"  # every node waits for a message


# Right first, so that a batch climbs the process's own nodes within one tick.
TICK_ORDER = (Kind.RIGHT, Kind.MIDDLE, Kind.LEFT)


@dataclass(slots=True)
class Process:
    process_id: str
    nodes: dict[Kind, VirtualNode]
    structure: Structure
    local_delivery: bool = True
    next_op_id: int = 0
    # Did the last tick start a batch anywhere?  Drivers use it to skip idle processes.
    last_tick_fired: bool = True
    # Send Hurry hints (see tick_due): for drivers that pace their ticks.  The round
    # simulators tick every node every round, so a hint would only add messages there.
    hurry: bool = False
    # The leases this process holds for its consumers (skueue/core/leases.py).
    leases: Leases = field(default_factory=Leases)

    @classmethod
    def create(
        cls,
        process_id: str,
        views: Mapping[Kind, View],
        structure: Structure = Structure.QUEUE,
        *,
        local_delivery: bool = True,
        handover_bytes_max: int = HANDOVER_BYTES_MAX,
        hurry: bool = False,
    ) -> Process:
        """``handover_bytes_max``: the largest message a handover of entries (join or
        leave) may use; a driver sets it below its frame limit.  ``hurry``: send Hurry
        hints (a driver that paces its ticks by :meth:`tick_due`)."""
        _check_handover_limit(handover_bytes_max)
        nodes = {
            kind: VirtualNode.in_ring(views[kind], structure, handover_bytes_max)
            for kind in Kind
        }
        return cls(process_id, nodes, structure, local_delivery, hurry=hurry)

    @classmethod
    def create_joining(
        cls,
        process_id: str,
        contact: NodeRef,
        structure: Structure = Structure.QUEUE,
        *,
        local_delivery: bool = True,
        handover_bytes_max: int = HANDOVER_BYTES_MAX,
        hurry: bool = False,
    ) -> Process:
        """A process outside the ring that will join it through ``contact`` (call
        :meth:`join`).  Its views are placeholders until each node is integrated."""
        _check_handover_limit(handover_bytes_max)
        ticket = JoinTicket()
        nodes = {
            me.kind: VirtualNode.joining(me, contact, ticket, structure, handover_bytes_max)
            for me in process_nodes(process_id)
        }
        return cls(process_id, nodes, structure, local_delivery, hurry=hurry)

    def join(self) -> list[Effect]:
        """Send the three join requests (SPEC §8: a join is one request per node)."""
        effects: list[Effect] = []
        for node in self.nodes.values():
            effects.extend(membership.start_join(node))
        return self._settle(effects)

    def why_not_leave(self) -> str | None:
        """Why :meth:`leave` cannot be called now (None: it can)."""
        if any(n.ring.mode is not Mode.MEMBER for n in self.nodes.values()):
            return "only a process that is fully in the ring can leave"
        return None

    def leave(self) -> list[Effect]:
        """Stop taking operations; the nodes go in the next update phase after the anchor
        has counted their leave.  A driver asks :meth:`why_not_leave` first.  The leases
        held go back into their queues first (a leased remove still on its way hands its
        element over unleased: a leaving process cannot take it back)."""
        why = self.why_not_leave()
        if why is not None:
            raise ProtocolError(why)
        effects = self.return_all("leave")
        self.leases.leasing.clear()
        ticket = LeaveTicket([n.ring for n in self.nodes.values()])
        for node in self.nodes.values():
            node.member.leave = ticket
        return effects

    def hold_on(self, process: str) -> tuple[Hold, str]:
        """What this process's nodes hold of ``process``, the worst of the three, and why
        (membership/removal.py: a driver asks every member before it forgets one)."""
        holds = [hold_on(node, process) for node in self.nodes.values()]
        return max(holds, key=lambda h: h[0])

    def forget_joiner(self, process: str) -> bool:
        """Forget ``process``, a joiner that will never come back and holds nothing (no
        node holds it as RING); True if a node placed it.  The nodes it held up batch
        again at the next tick."""
        return any([forget_joiner(node, process) for node in self.nodes.values()])

    @property
    def joined(self) -> bool:
        return all(n.ring.mode is Mode.MEMBER for n in self.nodes.values())

    @property
    def departed(self) -> bool:
        return all(n.ring.mode is Mode.DEPARTED for n in self.nodes.values())

    @property
    def leaving(self) -> bool:
        return any(n.member.leave is not None for n in self.nodes.values())

    def new_op(
        self,
        kind: OpKind,
        value: Item | None = None,
        queue: str = DEFAULT_QUEUE,
        patient: bool = False,
        lease_ms: int = 0,
        max_deliveries: int = 0,
        settings: QueueSettings | None = None,
        priority: int = 0,
    ) -> Op:
        """Build the next operation of this process (op ids follow issue order)."""
        op = Op(
            self.next_op_id, kind, value, queue, patient, lease_ms, max_deliveries, settings,
            priority,
        )  # fmt: skip
        self.next_op_id += 1
        return op

    def submit(self, op: Op) -> list[Effect]:
        return self.submit_all([op])

    def submit_all(self, ops: list[Op]) -> list[Effect]:
        """Submit ``ops`` in order: the same as one :meth:`submit` each, with the
        step's output (hints, bundles) worked out once."""
        intake = self.nodes[INTAKE_KIND]
        effects: list[Effect] = []
        for op in ops:
            if op.lease_ms:
                self.leases.expect(op)
            effects.extend(intake.submit(op))
        return self._out(self._settle(effects))

    # -- leases: those that end by an ack or an extension are the table's alone -----------

    def clock(self, now_ms: int) -> list[Effect]:
        """The driver's clock in ms, while ``leases.needs_clock()``, before each step's
        other inputs: the leases past their deadline go back into their queues."""
        return self._return(self.leases.due(now_ms), "expired")

    def release(self, lease_id: int, reason: str = "nack") -> list[Effect] | None:
        """Return a lease's element into its queue now; None: no such lease."""
        lease = self.leases.table.end(lease_id)
        return None if lease is None else self._return([lease], reason)

    def return_all(self, reason: str) -> list[Effect]:
        """Every lease goes back (its consumers are gone: a restart, a leave)."""
        return self._return(self.leases.table.end_all(), reason)

    def _return(self, leases: list[Lease], reason: str, dead: bool | None = None) -> list[Effect]:
        intake = self.nodes[INTAKE_KIND]
        effects: list[Effect] = []
        for lease in leases:
            effects.extend(intake.submit(self.leases.return_op(lease, reason, self.new_op, dead)))
        return self._out(self._settle(effects))

    def tick(self) -> list[Effect]:
        effects: list[Effect] = []
        before = self.batches_sent()
        for kind in TICK_ORDER:
            effects.extend(self._settle(self.nodes[kind].tick()))
        self.last_tick_fired = self.batches_sent() != before
        return self._out(effects)

    def batches_sent(self) -> int:
        return sum(n.batching.batches_sent for n in self.nodes.values())

    def handle(self, to: NodeRef, message: Message | MembershipMessage) -> list[Effect]:
        """A message from another process for node ``to``.  Raises :class:`RemoteProtocolError`,
        with this process unchanged, if no correct peer can send it now."""
        if to.process != self.process_id:
            raise ProtocolError(
                f"message for {to.describe()} delivered to process {self.process_id}"
            )
        sender = getattr(message, "sender", None)
        if self.local_delivery and isinstance(sender, NodeRef) and sender.process == to.process:
            # Our own nodes' messages never cross the network: this one is forged.
            forged = f"{to.describe()}: {message.describe()} claims to be from here"
            raise RemoteProtocolError(forged)
        node = self.nodes[to.kind]
        if node.ring.mode is Mode.DEPARTED and isinstance(message, LOSSY_WHEN_DEPARTED):
            return []
        flight = node.batching.inflight
        if (
            self.local_delivery
            and isinstance(message, Grants)
            and flight is not None
            and flight.parent is not None
            and flight.parent.process == self.process_id
        ):
            # Grants carry no sender; they come from where the batch went, and that is
            # one of our own nodes here, whose messages never cross the network.
            forged = f"{to.describe()}: {message.describe()}, but its parent is here"
            raise RemoteProtocolError(forged)
        # The boundary: the receiving node checks the peer's message before anything
        # changes (a RemoteProtocolError here leaves the process as it was); from here on
        # every error is ours, including one refused message between our own nodes.
        return self._out(self._settle(node.handle(message)))

    def _settle(self, effects: list[Effect]) -> list[Effect]:
        """Deliver messages between own nodes at once; return the rest in order."""
        if not self.local_delivery or not effects:
            return effects
        out: list[Effect] = []
        pending: deque[Effect] = deque(effects)
        while pending:
            effect = pending.popleft()
            if isinstance(effect, Send) and effect.to.process == self.process_id:
                node = self.nodes[effect.to.kind]
                if node.ring.mode is Mode.DEPARTED and isinstance(
                    effect.message, LOSSY_WHEN_DEPARTED
                ):
                    continue
                try:
                    pending.extend(node.handle(effect.message))
                except RemoteProtocolError as e:
                    raise ProtocolError(f"a message between own nodes was refused: {e}") from e
            else:
                out.append(effect)
        return out

    def _out(self, effects: list[Effect]) -> list[Effect]:
        """What leaves the process after a step: its messages for other processes, with
        Hurry hints added and DHT messages bundled per destination."""
        if self.leases.leasing or self.leases.returning:
            effects, refused = self.leases.step(effects)
            for lease, reason in refused:  # its dead letters refused it: its own queue
                effects.extend(self._return([lease], reason, dead=False))
        budget = self.nodes[INTAKE_KIND].member.handover_bytes_max
        return bundle_dht(self._hurry(effects), budget)

    def _hurry(self, effects: list[Effect]) -> list[Effect]:
        """Add Hurry hints to ``effects`` while this process is urgent: each node asks
        the neighbours in other processes that it waits for (children whose batch is
        missing; the parent while its empty batch has no grants), once per batch.  A
        hurried node is urgent in turn, so the hint spreads over the tree until every
        batch the operations need moves.  (Own nodes need no hint: a tick fires the whole process,
        right to left.)"""
        if not self.hurry or not any(n.wants_speed() for n in self.nodes.values()):
            return effects
        for node in self.nodes.values():
            for neighbour in node.to_hurry():
                if neighbour.process != self.process_id:
                    effects.append(Send(neighbour, Hurry(node.me)))
        return effects

    def tick_due(self) -> TickDue:
        """How soon a tick is worth running.

        A daemon ticks at once when a batch can go and operations wait anywhere in this
        process, or a neighbour in another process hurried it (Hurry); it paces its
        ticks when only empty batches can go and nothing waits (so an idle cluster does
        not spin empty batches around the tree as fast as the network allows), and waits
        for input otherwise.  Urgency is the process's, not one node's: the intake node
        with an operation often waits for its own process's children, whose empty batches
        must then go at once rather than at the idle pace; children in other processes
        learn of it from the Hurry hints this process sends them (:meth:`_hurry`).
        (Never NOW without a node that can fire, so a NOW tick always changes something:
        no spinning.)
        """
        if not any(node.can_fire() for node in self.nodes.values()):
            # A joining process repeats its join requests on ticks: pace them.
            return TickDue.IDLE if not self.joined and not self.departed else TickDue.NOTHING
        if any(node.wants_speed() for node in self.nodes.values()):
            return TickDue.NOW
        return TickDue.IDLE

    def entries(self) -> int:
        """DHT entries stored by this process's three nodes."""
        return sum(n.store.entries() for n in self.nodes.values())

    def node_ref(self, kind: Kind) -> NodeRef:
        return self.nodes[kind].me

    def stats(self) -> ProcessStats:
        anchor = next(
            (n.seat.policy for n in self.nodes.values() if n.seat.policy is not None), None
        )
        queues = None if anchor is None else anchor.describe_queues()
        return ProcessStats(
            process_id=self.process_id,
            structure=self.structure,
            nodes={kind.name.lower(): node_stats(node) for kind, node in self.nodes.items()},
            anchor=anchor is not None,
            size=None if queues is None else queues.get(DEFAULT_QUEUE, (0, "", 0, 1))[0],
            queues=queues,
            joined=self.joined,
            leaving=self.leaving,
            departed=self.departed,
            alone=all(n.ring.view.pred.process == self.process_id for n in self.nodes.values()),
            leases_held=len(self.leases.table),
        )

    def batch_counts(self) -> tuple[tuple[int, int], ...]:
        """Per node, in the order of :attr:`nodes`: batches sent so far and the operations
        in the last one.  Cheap enough to read around every tick (a driver's batch
        histograms); :meth:`stats` is the full account."""
        return tuple(
            (n.batching.batches_sent, n.batching.last_batch_operations)
            for n in self.nodes.values()
        )

    def describe(self) -> str:
        return " | ".join(self.nodes[k].describe() for k in Kind)


def _check_handover_limit(handover_bytes_max: int) -> None:
    least = 2 * HANDOVER_OVERHEAD_BYTES
    if handover_bytes_max < least:
        raise ValueError(f"handover_bytes_max must be at least {least} bytes")
