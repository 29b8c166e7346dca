"""Join, Leave and the update phase (SPEC §8, paper §IV), on top of the node's stages.

Theory of operation
-------------------
Joins and leaves are lazy.  A joining node is routed to its *responsible* node ``v``
(the node with ``v <= label < succ(v)``), which introduces itself, relays the joiner's
batches as if it were a child, and counts the join in its next batch.  A leaving node
counts its own leave in its next batch and stops taking operations.  The anchor starts
an *update phase* when its trigger fires (:class:`skueue.anchor.UpdateTrigger`): the
grants of that batch carry the update flag, and nobody sends a new batch until the
phase is over.

The phase runs in stages, each one a wave down the *old* tree (the tree the update
grants travelled) and a wave of ``StageDone`` acknowledgements back up it:

1. **quiet**: every node waits until its own DHT operations have finished (Puts
   acknowledged, Gets answered).  When the anchor has heard from everyone, no Put, Get
   or reply is on its way anywhere, so data can move without anything overtaking it.
2. **joins**: every responsible node hands each joiner the entries of the joiner's
   interval, tells it its neighbours, points its own successor at the first joiner and
   its old successor's predecessor at the last (acknowledged).  A joiner that had a
   relayed batch on its way takes it back; the responsible node drops it.
3. **leaves**: a leaving node asks its predecessor; a predecessor that leaves in this
   phase too says "wait" (so neighbouring leavers go left to right, each after the one
   before it), any other grants.  The leaver hands over its entries and its successor;
   the predecessor points the successor at itself (acknowledged) and confirms; the
   leaver reports up the old tree and is gone.

Then the anchor sends "update over" down the *new* tree, or, when it is no longer the
minimum node (a joiner landed left of it) or it left, hands its counters to the new
minimum first, which sends "update over" instead.  A join request that arrives during
a phase waits at the node it reached and is routed again afterwards; a leaver passes
the ones it holds to its predecessor.

Where this differs from the paper, on purpose: the paper moves a joiner's data at once
and forwards later DHT requests, and lets a leaver go at once behind a replacement node
with per-edge acknowledgement counts.  Here data moves only inside the quiet stages,
where no DHT message can be overtaken, which needs neither forwarding nor replacements,
at the price of a joiner's part of the DHT staying with its responsible node until the
next phase, and a leaver staying until then.  Every stage is one round trip of the old
tree plus a constant number of neighbour messages, so a phase still takes ``O(log n)``
rounds (Theorem 17).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from dht.keys import position_key
from overlay.labels import LABEL_SPACE, Kind, NodeRef
from overlay.routing import next_hop, start_route
from overlay.view import View
from skueue.anchor import UpdateTrigger, import_anchor
from skueue.effects import Effect, Send
from skueue.errors import ProtocolError
from skueue.intake import OwnBuffer
from skueue.membership_messages import (
    Absorbed,
    AnchorHandover,
    Departing,
    Integrate,
    IntegrateAck,
    JoinAccepted,
    JoinCounted,
    JoinCountedAck,
    JoinRequest,
    LeaveAnswer,
    MayILeave,
    MembershipMessage,
    Rewire,
    SetPred,
    SetPredAck,
    StageDone,
    UpdateOver,
    Withdraw,
)
from skueue.ops import Structure

if TYPE_CHECKING:
    from skueue.node import InFlight, VirtualNode

# A joiner repeats its request this often (in ticks) until a responsible node accepts:
# a request routed through a node that leaves meanwhile is lost with it.
JOIN_RETRY_TICKS = 64

QUIET, JOINS, LEAVES, OVER = 1, 2, 3, 4
# Messages that may find their receiver gone, harmlessly: a join request is repeated by
# its joiner, and a leaver that asked a departed predecessor hears from the next one.
LOSSY_WHEN_DEPARTED = (JoinRequest, MayILeave, LeaveAnswer)


@attrs.define
class JoinTicket:
    """A joining process's progress, shared by its three nodes (one process, one memory).

    A process joins as a whole: its left node reports the join (3 nodes) in a relayed
    batch once all three are placed, and the anchor counting it is what commits every
    responsible node to integrate its node in the next phase.  Integrating only some of
    a process's nodes would leave virtual edges into nodes outside the ring.
    """

    responsible: dict[Kind, NodeRef] = attrs.field(factory=dict)
    reported: bool = False
    counted: bool = False


@attrs.define(eq=False)
class LeaveTicket:
    """A leaving process's progress, shared by its three nodes.

    Like a join, a leave is the whole process's: its left node reports it (3 nodes) in its
    next batch, after the operations it still had, and the anchor counting that batch
    lets all three nodes go in the next phase, together.
    """

    nodes: list[VirtualNode] = attrs.field(repr=False)
    reported: bool = False
    counted: bool = False

    def goes_now(self) -> bool:
        """Counted, and no node of the process places joiners that are not counted yet
        (they would lose their responsible node): then it waits for a later phase."""
        return self.counted and not any(n.joiners for n in self.nodes)


class Mode(enum.Enum):
    JOINING = "joining"  # placed (or not yet) at a responsible node, not in the ring
    MEMBER = "member"
    DEPARTED = "departed"


@attrs.define
class UpdatePhase:
    old_parent: NodeRef | None
    old_children: tuple[NodeRef, ...]
    stage: int = QUIET
    heard: set[NodeRef] = attrs.field(factory=set)  # old children done with ``stage``
    reported: bool = False  # StageDone for ``stage`` sent (or, at the root, acted on)
    duty_done: bool = False  # stages 2 and 3: this node's own part is finished
    acks: set[NodeRef] = attrs.field(factory=set)  # stage 2: acknowledgements awaited
    asked: NodeRef | None = None  # stage 3: the predecessor we asked whether we may go
    absorber: NodeRef | None = None  # stage 3: who took our part
    absorbing: dict[NodeRef, NodeRef] = attrs.field(factory=dict)  # new succ -> leaver

    def describe(self) -> str:
        waiting = len(set(self.old_children) - self.heard)
        return (
            f"stage {self.stage}, {waiting} old children pending, duty "
            f"{'done' if self.duty_done else 'open'}, {len(self.acks)} acks pending"
        )


def cyclic_distance(origin: int, label: int) -> int:
    return (label - origin) % LABEL_SPACE


def _keys_in(lo: int, hi: int) -> Callable[[int], bool]:
    """Whether a position's DHT key lies in ``[lo, hi)`` on the cycle."""
    return lambda position: in_interval(position_key(position), lo, hi)


def in_interval(key: int, lo: int, hi: int) -> bool:
    """``lo <= key < hi`` on the cycle."""
    return cyclic_distance(lo, key) < cyclic_distance(lo, hi) if lo != hi else True


# -- joining --------------------------------------------------------------------------


def start_join(node: VirtualNode) -> list[Effect]:
    assert node.contact is not None
    node.join_wait_ticks = 1
    return [Send(node.contact, JoinRequest(None, node.me))]


def joining_tick(node: VirtualNode) -> list[Effect]:
    """Repeat the join request until a responsible node answers."""
    if node.responsible is not None or node.contact is None:
        return []
    node.join_wait_ticks += 1
    if node.join_wait_ticks % JOIN_RETRY_TICKS:
        return []
    return [Send(node.contact, JoinRequest(None, node.me))]


def _on_join_request(node: VirtualNode, msg: JoinRequest) -> list[Effect]:
    joiner = msg.joiner
    if node.mode is not Mode.MEMBER:
        # A joining contact passes the request on to where it asked itself.
        return [Send(node.contact, msg)] if node.contact is not None else []
    if node.phase is not None:
        if joiner not in node.deferred_joins:
            node.deferred_joins.append(joiner)
        return []
    route = msg.route or start_route(node.view, joiner.label)
    hop, route = next_hop(node.view, route)
    if hop is not None:
        return [Send(hop, JoinRequest(route, joiner))]
    if joiner == node.me:
        return []  # a late copy: the joiner is already in the ring
    if joiner not in node.joiners:
        _adopt(node, [joiner])
    return [Send(joiner, JoinAccepted(node.me))]


def _adopt(node: VirtualNode, joiners: list[NodeRef]) -> None:
    node.joiners.extend(joiners)
    node.joiners.sort(key=lambda j: (cyclic_distance(node.me.label, j.label), j.key))
    node.recompute_tree()


def _on_join_accepted(node: VirtualNode, msg: JoinAccepted) -> list[Effect]:
    if node.mode is not Mode.JOINING or node.responsible == msg.responsible:
        return []
    old, node.responsible = node.responsible, msg.responsible
    assert node.ticket is not None
    node.ticket.responsible[node.me.kind] = msg.responsible
    effects: list[Effect] = []
    flight = node.inflight
    if old is not None and flight is not None and not flight.served:
        # Moved to a new responsible node (an update phase integrated a node in front
        # of us): take back the batch the old one will never serve.
        effects.append(Send(old, Withdraw(node.me, flight.number)))
        _reclaim(node)
    node.recompute_tree()
    return effects


def _reclaim(node: VirtualNode) -> None:
    """Put an unserved batch's operations back in front of the own buffer, in order."""
    flight = node.inflight
    assert flight is not None
    ops = [*flight.own.ops, *node.own.ops]
    node.own = OwnBuffer(node.structure)
    for op in ops:
        node.own.add(op)
    if flight.reports_join and node.ticket is not None:
        node.ticket.reported = False
    node.inflight = None


def _on_withdraw(node: VirtualNode, msg: Withdraw) -> list[Effect]:
    if msg.sender in node.child_batches:
        del node.child_batches[msg.sender]
    else:
        node.withdrawn.add((msg.sender, msg.number))
    return []


def join_report(node: VirtualNode) -> int:
    """A joining left node's batch reports its process's join once all three nodes are
    placed (3 joining nodes for the anchor's trigger)."""
    ticket = node.ticket
    if node.mode is not Mode.JOINING or ticket is None or ticket.reported:
        return 0
    if len(ticket.responsible) < len(Kind):
        return 0
    ticket.reported = True
    return len(Kind)


def join_counted(node: VirtualNode, flight: InFlight) -> list[Effect]:
    """The anchor assigned the batch with our join: tell every responsible node, and hold
    the next batch until all three know."""
    ticket = node.ticket
    assert ticket is not None
    ticket.counted = True
    effects: list[Effect] = []
    for kind, responsible in ticket.responsible.items():
        joiner = node.me.sibling(kind)
        flight.holds.add(joiner)
        effects.append(Send(responsible, JoinCounted(node.me, joiner)))
    return effects


def _on_join_counted(node: VirtualNode, msg: JoinCounted) -> list[Effect]:
    if msg.joiner not in node.joiners:
        raise ProtocolError(
            f"{node.me.describe()}: JoinCounted for {msg.joiner.describe()}, "
            "which it does not place"
        )
    node.counted_joiners.add(msg.joiner)
    return [Send(msg.sender, JoinCountedAck(msg.joiner))]


def _on_join_counted_ack(node: VirtualNode, msg: JoinCountedAck) -> list[Effect]:
    flight = node.inflight
    if flight is not None:
        flight.holds.discard(msg.joiner)
        if flight.done():
            node.inflight = None
    return []


# -- the phase ------------------------------------------------------------------------


def enter_phase(node: VirtualNode, old_children: tuple[NodeRef, ...]) -> None:
    """The update grants arrived (or, at the anchor, were assigned)."""
    old_parent = None if node.anchor is not None else node.up
    node.phase = UpdatePhase(old_parent, old_children)


def _quiet(node: VirtualNode) -> bool:
    return node.inflight is None and not node.awaiting and not node.unacked_puts


def progress(node: VirtualNode) -> list[Effect]:
    """Report a stage up the old tree once this node and its old children are done."""
    ph = node.phase
    if ph is None or ph.stage == OVER or ph.reported:
        return []
    done = _quiet(node) if ph.stage == QUIET else ph.duty_done
    if not done or not ph.heard.issuperset(ph.old_children):
        return []
    ph.reported = True
    if ph.old_parent is None:
        return _root_next(node)
    effects: list[Effect] = [Send(ph.old_parent, StageDone(node.me, ph.stage))]
    if ph.stage == LEAVES:
        ph.stage = OVER
        if ph.absorber is not None:
            node.mode = Mode.DEPARTED
    return effects


def _start_stage(node: VirtualNode, stage: int) -> list[Effect]:
    ph = node.phase
    assert ph is not None
    ph.stage, ph.reported, ph.duty_done = stage, False, False
    ph.heard = set()
    effects: list[Effect] = [Send(child, Rewire(stage)) for child in ph.old_children]
    if stage == JOINS:
        effects += _integrate_joiners(node)
    else:
        effects += _start_leaving(node)
    return effects + progress(node)


def _root_next(node: VirtualNode) -> list[Effect]:
    ph = node.phase
    assert ph is not None
    if ph.stage < LEAVES:
        return _start_stage(node, ph.stage + 1)
    ph.stage = OVER
    assert node.anchor is not None
    handover = AnchorHandover(node.anchor.export())
    if ph.absorber is not None:  # the anchor itself left
        node.anchor = node.trigger = None
        node.mode = Mode.DEPARTED
        return [Send(ph.absorber, handover)]
    if node.view.is_anchor:
        return _update_over(node)
    node.anchor = node.trigger = None
    return [Send(node.view.pred, handover)]


def _on_anchor_handover(node: VirtualNode, msg: AnchorHandover) -> list[Effect]:
    if node.view.is_anchor:
        node.anchor = import_anchor(msg.state, node.structure is Structure.STACK)
        node.trigger = UpdateTrigger()
        return _update_over(node)
    # Walk to the minimum: leftwards, or across the cycle edge from the maximum.
    nxt = node.view.succ if node.view.succ_across_cycle else node.view.pred
    return [Send(nxt, msg)]


def _update_over(node: VirtualNode) -> list[Effect]:
    node.phase = None
    node.recompute_tree()
    effects: list[Effect] = [Send(kid, UpdateOver()) for kid in node.kids]
    deferred, node.deferred_joins = node.deferred_joins, []
    for joiner in deferred:
        effects += _on_join_request(node, JoinRequest(None, joiner))
    return effects


# -- stage 2: joins -------------------------------------------------------------------


def _integrate_joiners(node: VirtualNode) -> list[Effect]:
    """Stage 2: put every counted joiner into the ring; joiners not counted yet stay
    joining, placed at whichever node now precedes them."""
    ph = node.phase
    assert ph is not None
    joiners = [j for j in node.joiners if j in node.counted_joiners]
    if not joiners:
        ph.duty_done = True
        return []
    waiting = [j for j in node.joiners if j not in node.counted_joiners]
    old_succ = node.view.succ
    chain = [node.me, *joiners, old_succ]
    effects: list[Effect] = []
    for i, joiner in enumerate(joiners):
        lo, hi = joiner.label, chain[i + 2].label
        entries = node.table.take_where(_keys_in(lo, hi))
        moved = tuple(j for j in waiting if in_interval(j.label, lo, hi))
        integrate = Integrate(node.me, chain[i], chain[i + 2], tuple(entries), moved)
        effects.append(Send(joiner, integrate))
    effects.append(Send(old_succ, SetPred(node.me, joiners[-1])))
    ph.acks = {*joiners, old_succ}
    first = joiners[0]
    node.joiners = [j for j in waiting if not in_interval(j.label, first.label, old_succ.label)]
    node.counted_joiners.clear()
    node.set_view(attrs.evolve(node.view, succ=first))
    return effects


def _on_integrate(node: VirtualNode, msg: Integrate) -> list[Effect]:
    withdrawn = -1
    flight = node.inflight
    if flight is not None and not flight.served:
        # Our relayed batch will never be served now: take its operations back, in order.
        withdrawn = flight.number
        _reclaim(node)
    node.mode = Mode.MEMBER
    node.responsible = None
    node.ticket = None
    node.table.add_entries(msg.entries)
    node.view = View(node.me, msg.pred, msg.succ)
    _adopt(node, list(msg.joiners))
    if node.phase is None:
        node.phase = UpdatePhase(None, (), stage=OVER)
    effects: list[Effect] = [Send(msg.sender, IntegrateAck(node.me, withdrawn))]
    # The joiners that moved here learn their new responsible node.
    effects += [Send(j, JoinAccepted(node.me)) for j in msg.joiners]
    return effects


def _on_integrate_ack(node: VirtualNode, msg: IntegrateAck) -> list[Effect]:
    if msg.withdrawn >= 0:
        if msg.sender in node.child_batches:
            del node.child_batches[msg.sender]
        else:
            node.withdrawn.add((msg.sender, msg.withdrawn))
    return _acked(node, msg.sender)


def _acked(node: VirtualNode, sender: NodeRef) -> list[Effect]:
    ph = node.phase
    assert ph is not None
    if sender in ph.absorbing:
        return [Send(ph.absorbing.pop(sender), Absorbed())]
    ph.acks.discard(sender)
    if ph.stage == JOINS and not ph.acks:
        ph.duty_done = True
    return []


def _on_set_pred(node: VirtualNode, msg: SetPred) -> list[Effect]:
    node.set_view(attrs.evolve(node.view, pred=msg.pred))
    effects: list[Effect] = [Send(msg.sender, SetPredAck(node.me))]
    ph = node.phase
    if ph is not None and ph.asked is not None and ph.absorber is None and ph.asked != msg.pred:
        # A leaver whose predecessor left: ask the new one (the old one's answer, if it
        # still comes, is stale and ignored).
        ph.asked = msg.pred
        effects.append(Send(msg.pred, MayILeave(node.me)))
    return effects


# -- stage 3: leaves ------------------------------------------------------------------


def leave_report(node: VirtualNode) -> int:
    """A leaving process's left node reports the leave of its 3 nodes, once."""
    ticket = node.leave
    if ticket is None or ticket.reported or node.me.kind is not Kind.LEFT:
        return 0
    ticket.reported = True
    return len(Kind)


def _goes_now(node: VirtualNode) -> bool:
    return node.leave is not None and node.leave.goes_now()


def _start_leaving(node: VirtualNode) -> list[Effect]:
    ph = node.phase
    assert ph is not None
    if not _goes_now(node):
        ticket = node.leave
        if ticket is not None and ticket.counted:
            # Held back by joiners: report the leave again, so the anchor starts another
            # phase for it (the three nodes see the same, final, state in stage 3).
            ticket.counted = ticket.reported = False
        ph.duty_done = True
        return []
    ph.asked = node.view.pred
    return [Send(node.view.pred, MayILeave(node.me))]


def _on_may_i_leave(node: VirtualNode, msg: MayILeave) -> list[Effect]:
    granted = not _goes_now(node) or node.mode is not Mode.MEMBER
    return [Send(msg.sender, LeaveAnswer(node.me, granted))]


def _on_leave_answer(node: VirtualNode, msg: LeaveAnswer) -> list[Effect]:
    ph = node.phase
    assert ph is not None
    if msg.sender != ph.asked or msg.sender != node.view.pred or ph.absorber is not None:
        return []  # our predecessor changed since we asked: we asked the new one already
    if not msg.granted:
        return []  # it leaves first; its SetPred will name the node to ask next
    entries = tuple(node.table.take_where(lambda p: True))
    deferred, node.deferred_joins = tuple(node.deferred_joins), []
    ph.absorber = node.view.pred
    return [Send(node.view.pred, Departing(node.me, node.view.succ, entries, deferred))]


def _on_departing(node: VirtualNode, msg: Departing) -> list[Effect]:
    ph = node.phase
    assert ph is not None
    node.table.add_entries(msg.entries)
    node.deferred_joins.extend(j for j in msg.deferred if j not in node.deferred_joins)
    node.set_view(attrs.evolve(node.view, succ=msg.succ))
    ph.absorbing[msg.succ] = msg.sender
    return [Send(msg.succ, SetPred(node.me, node.me))]


def _on_absorbed(node: VirtualNode) -> list[Effect]:
    assert node.phase is not None
    node.phase.duty_done = True
    return []


# -- dispatch -------------------------------------------------------------------------


def handle(node: VirtualNode, msg: MembershipMessage) -> list[Effect]:
    match msg:
        case JoinRequest():
            return _on_join_request(node, msg)
        case JoinAccepted():
            return _on_join_accepted(node, msg)
        case JoinCounted():
            return _on_join_counted(node, msg)
        case JoinCountedAck():
            return _on_join_counted_ack(node, msg)
        case Withdraw():
            return _on_withdraw(node, msg)
        case Integrate():
            return _on_integrate(node, msg)
        case UpdateOver():
            return _update_over(node)
        case AnchorHandover():
            return _on_anchor_handover(node, msg)
        case MayILeave():
            return _on_may_i_leave(node, msg)
        case SetPred():
            return _on_set_pred(node, msg)
    if node.phase is None:
        raise ProtocolError(f"{node.me.describe()}: {msg!r} outside an update phase")
    match msg:
        case StageDone(sender=sender, stage=stage):
            if stage != node.phase.stage:
                raise ProtocolError(
                    f"{node.me.describe()}: StageDone {stage} in stage {node.phase.stage}"
                )
            node.phase.heard.add(sender)
            return []
        case Rewire(stage=stage):
            return _start_stage(node, stage)
        case IntegrateAck():
            return _on_integrate_ack(node, msg)
        case SetPredAck(sender=sender):
            return _acked(node, sender)
        case LeaveAnswer():
            return _on_leave_answer(node, msg)
        case Departing():
            return _on_departing(node, msg)
        case Absorbed():
            return _on_absorbed(node)
    raise ProtocolError(f"unknown message {msg!r}")
