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

from typing import TYPE_CHECKING

from overlay.labels import NodeRef
from skueue.anchor import UpdateTrigger, import_anchor
from skueue.effects import Effect, Send
from skueue.errors import ProtocolError
from skueue.membership_messages import (
    Absorbed,
    AnchorHandover,
    Departing,
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
from skueue.ops import Structure

if TYPE_CHECKING:
    from skueue.node import VirtualNode

from skueue.joining import (
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
from skueue.leaving import (
    leave_report,
    on_absorbed,
    on_departing,
    on_leave_answer,
    on_may_i_leave,
    start_leaving,
)
from skueue.membership_state import (
    JOINS,
    LEAVES,
    LOSSY_WHEN_DEPARTED,
    OVER,
    QUIET,
    JoinTicket,
    LeaveTicket,
    Mode,
    UpdatePhase,
)

__all__ = [
    "LOSSY_WHEN_DEPARTED",
    "JoinTicket",
    "LeaveTicket",
    "Mode",
    "UpdatePhase",
    "enter_phase",
    "handle",
    "join_counted",
    "join_report",
    "joining_tick",
    "leave_report",
    "progress",
    "start_join",
]


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
        effects += integrate_joiners(node)
    else:
        effects += start_leaving(node)
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
        effects += on_join_request(node, JoinRequest(None, joiner))
    return effects


def handle(node: VirtualNode, msg: MembershipMessage) -> list[Effect]:
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
            return on_integrate(node, msg)
        case UpdateOver():
            return _update_over(node)
        case AnchorHandover():
            return _on_anchor_handover(node, msg)
        case MayILeave():
            return on_may_i_leave(node, msg)
        case SetPred():
            return on_set_pred(node, msg)
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
            return on_integrate_ack(node, msg)
        case SetPredAck(sender=sender):
            return acked(node, sender)
        case LeaveAnswer():
            return on_leave_answer(node, msg)
        case Departing():
            return on_departing(node, msg)
        case Absorbed():
            return on_absorbed(node)
    raise ProtocolError(f"unknown message {msg!r}")
