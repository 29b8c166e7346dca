"""Join, Leave and the update phase (SPEC §8, paper §IV), on top of the node's stages.

Theory of operation
-------------------
Joins and leaves are lazy.  A joining node is routed to its *responsible* node ``v``
(the node with ``v <= label < succ(v)``), which introduces itself, relays the joiner's
batches as if it were a child, and counts the join in its next batch.  A leaving node
counts its own leave in its next batch and stops taking operations.  The anchor starts
an *update phase* when its trigger fires (:class:`skueue.core.anchor.UpdateTrigger`): the
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

Handovers of entries (a joiner's at integration, a leaver's at departure) go in pieces
of bounded size: ``HandoverPart`` messages and a final ``Integrate`` or ``Departing``
that says how many pieces went ahead.  Messages overtake each other, so the receiver
keeps what came (:class:`~skueue.core.parts.membership_state.Incoming`) and acts only when it holds
all of it.

Every message is checked (:mod:`skueue.core.membership.checks`) before anything
changes: a message a correct peer cannot send to this node in its state raises
:class:`~skueue.core.errors.RemoteProtocolError`.

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

from skueue.core.anchor import import_anchors
from skueue.core.effects import Effect, Send
from skueue.core.errors import ProtocolError
from skueue.core.membership.checks import check
from skueue.core.membership.joining import (
    acked,
    integrate_joiners,
    join_counted,
    join_report,
    joining_tick,
    on_integrate,
    on_integrate_ack,
    on_join_accepted,
    on_join_accepted_ack,
    on_join_counted,
    on_join_counted_ack,
    on_join_request,
    on_set_pred,
    on_withdraw,
    start_join,
)
from skueue.core.membership.leaving import (
    leave_counted,
    leave_report,
    on_absorbed,
    on_departing,
    on_leave_answer,
    on_may_i_leave,
    start_leaving,
)
from skueue.core.messages.membership import (
    Absorbed,
    AnchorHandover,
    Departing,
    HandoverPart,
    Integrate,
    IntegrateAck,
    JoinAccepted,
    JoinAcceptedAck,
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
from skueue.core.parts.membership_state import JOINS, LEAVES, OVER, QUIET, UpdatePhase
from skueue.core.parts.node_state import NodeState
from skueue.overlay.labels import NodeRef

# The membership protocol as the node drives it.
__all__ = [
    "check",
    "enter_phase",
    "handle",
    "join_counted",
    "join_report",
    "joining_tick",
    "leave_counted",
    "leave_report",
    "progress",
    "start_join",
]


def enter_phase(node: NodeState, old_children: tuple[NodeRef, ...]) -> None:
    """The update grants arrived (or, at the anchor, were assigned)."""
    old_parent = None if node.seat.policy is not None else node.ring.up
    node.member.phase = UpdatePhase(old_parent, old_children)
    node.member.phases_entered += 1
    node.store.owners.forget()  # the ring may change now


def _quiet(node: NodeState) -> bool:
    return node.batching.inflight is None and node.store.quiet()


def progress(node: NodeState) -> list[Effect]:
    """Report a stage up the old tree once this node and its old children are done."""
    ph = node.member.phase
    if ph is None or ph.stage == OVER or ph.reported:
        return []
    done = _quiet(node) if ph.stage == QUIET else ph.duty_done
    if not done or not ph.heard.issuperset(ph.old_children):
        return []
    ph.report()
    if ph.old_parent is None:
        return _root_next(node)
    effects: list[Effect] = [Send(ph.old_parent, StageDone(node.me, ph.stage))]
    if ph.stage == LEAVES:
        ph.end()
        if ph.absorber is not None:
            node.ring.depart()
    return effects


def _start_stage(node: NodeState, stage: int) -> list[Effect]:
    ph = node.member.phase
    assert ph is not None
    ph.begin(stage)
    effects: list[Effect] = [Send(child, Rewire(stage)) for child in ph.old_children]
    if stage == JOINS:
        effects += integrate_joiners(node)
    else:
        effects += start_leaving(node)
    return effects + progress(node)


def _root_next(node: NodeState) -> list[Effect]:
    ph = node.member.phase
    assert ph is not None
    if ph.stage < LEAVES:
        return _start_stage(node, ph.stage + 1)
    ph.end()
    if ph.absorber is not None:  # the anchor itself left
        handover = AnchorHandover(*node.seat.hand_over())
        node.ring.depart()
        return [Send(ph.absorber, handover)]
    if node.ring.view.is_anchor:
        return _update_over(node)
    return [Send(node.ring.view.pred, AnchorHandover(*node.seat.hand_over()))]


def _on_anchor_handover(node: NodeState, msg: AnchorHandover) -> list[Effect]:
    if node.ring.view.is_anchor:
        node.seat.take(import_anchors(msg.state, msg.floor, msg.limits))
        return _update_over(node)
    # Walk to the minimum: leftwards, or across the cycle edge from the maximum.
    nxt = node.ring.view.succ if node.ring.view.succ_across_cycle else node.ring.view.pred
    return [Send(nxt, msg)]


def _update_over(node: NodeState) -> list[Effect]:
    node.member.phase = None
    node.ring.recompute_tree()
    effects: list[Effect] = [Send(kid, UpdateOver()) for kid in node.ring.kids]
    deferred, node.member.deferred_joins = node.member.deferred_joins, []
    for joiner in deferred:
        effects += on_join_request(node, JoinRequest(None, joiner))
    return effects


def _on_final(node: NodeState, msg: Departing | Integrate) -> list[Effect]:
    """The last message of a handover: act if every piece is here, else wait for them."""
    if not node.member.incoming.complete(msg.sender, msg):
        node.member.incoming.finals[msg.sender] = msg
        return []
    return _take_over(node, msg)


def _on_part(node: NodeState, msg: HandoverPart) -> list[Effect]:
    node.member.incoming.parts.setdefault(msg.sender, {})[msg.index] = msg.entries
    final = node.member.incoming.finals.get(msg.sender)
    if final is None or not node.member.incoming.complete(msg.sender, final):
        return []
    return _take_over(node, final)


def _take_over(node: NodeState, final: Departing | Integrate) -> list[Effect]:
    entries = node.member.incoming.take(final.sender, final)
    if isinstance(final, Departing):
        return on_departing(node, final, entries)
    return on_integrate(node, final, entries)


def handle(node: NodeState, msg: MembershipMessage) -> list[Effect]:
    match msg:
        case JoinRequest():
            return on_join_request(node, msg)
        case JoinAccepted():
            return on_join_accepted(node, msg)
        case JoinAcceptedAck():
            return on_join_accepted_ack(node, msg)
        case JoinCounted():
            return on_join_counted(node, msg)
        case JoinCountedAck():
            return on_join_counted_ack(node, msg)
        case Withdraw():
            return on_withdraw(node, msg)
        case Integrate():
            return _on_final(node, msg)
        case HandoverPart():
            return _on_part(node, msg)
        case UpdateOver():
            return _update_over(node)
        case AnchorHandover():
            return _on_anchor_handover(node, msg)
        case MayILeave():
            return on_may_i_leave(node, msg)
        case SetPred():
            return on_set_pred(node, msg)
    if node.member.phase is None:
        raise ProtocolError(f"{node.me.describe()}: {msg!r} outside an update phase")
    match msg:
        case StageDone(sender=sender, stage=stage):
            if stage != node.member.phase.stage:
                raise ProtocolError(
                    f"{node.me.describe()}: StageDone {stage} in stage {node.member.phase.stage}"
                )
            node.member.phase.hear(sender)
            return []
        case Rewire(stage=stage):
            return _start_stage(node, stage)
        case IntegrateAck():
            return on_integrate_ack(node, msg)
        case SetPredAck(sender=sender):
            return acked(node, sender)
        case LeaveAnswer():
            return on_leave_answer(node, msg)
        case Departing():
            return _on_final(node, msg)
        case Absorbed():
            return on_absorbed(node)
    raise ProtocolError(f"unknown message {msg!r}")
