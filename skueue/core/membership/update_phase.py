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
keeps what came (:class:`~skueue.core.membership.state.Incoming`) and acts only when it holds
all of it.

Every message is checked by :func:`check` before anything changes: a message a correct
peer cannot send to this node in its state raises :class:`PeerError`.

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

from collections.abc import Iterable
from typing import TYPE_CHECKING, NoReturn

from skueue.core.anchor import UpdateTrigger, import_anchor
from skueue.core.effects import Effect, Send
from skueue.core.errors import PeerError, ProtocolError
from skueue.core.messages.membership import (
    Absorbed,
    AnchorHandover,
    Departing,
    Entry,
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
from skueue.core.ops import Structure
from skueue.dht.keys import POSITION_MAX, position_key
from skueue.overlay.labels import Kind, NodeRef

if TYPE_CHECKING:
    from skueue.core.node.virtual_node import VirtualNode

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
    leave_report,
    on_absorbed,
    on_departing,
    on_leave_answer,
    on_may_i_leave,
    start_leaving,
)
from skueue.core.membership.state import (
    HANDOVER_BYTES_MAX,
    HANDOVER_OVERHEAD_BYTES,
    JOINS,
    LEAVES,
    LOSSY_WHEN_DEPARTED,
    OVER,
    PARTS_MAX,
    QUIET,
    Incoming,
    JoinTicket,
    LeaveTicket,
    Mode,
    UpdatePhase,
    in_interval,
)

__all__ = [
    "HANDOVER_BYTES_MAX",
    "HANDOVER_OVERHEAD_BYTES",
    "LOSSY_WHEN_DEPARTED",
    "Incoming",
    "JoinTicket",
    "LeaveTicket",
    "Mode",
    "UpdatePhase",
    "check",
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


def _on_final(node: VirtualNode, msg: Departing | Integrate) -> list[Effect]:
    """The last message of a handover: act if every piece is here, else wait for them."""
    if not node.incoming.complete(msg.sender, msg):
        node.incoming.finals[msg.sender] = msg
        return []
    return _take_over(node, msg)


def _on_part(node: VirtualNode, msg: HandoverPart) -> list[Effect]:
    node.incoming.parts.setdefault(msg.sender, {})[msg.index] = msg.entries
    final = node.incoming.finals.get(msg.sender)
    if final is None or not node.incoming.complete(msg.sender, final):
        return []
    return _take_over(node, final)


def _take_over(node: VirtualNode, final: Departing | Integrate) -> list[Effect]:
    entries = node.incoming.take(final.sender, final)
    if isinstance(final, Departing):
        return on_departing(node, final, entries)
    return on_integrate(node, final, entries)


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
            return _on_final(node, msg)
        case Absorbed():
            return on_absorbed(node)
    raise ProtocolError(f"unknown message {msg!r}")


# -- checks: what a correct peer can never send, found before anything changes ----------


def _refuse(node: VirtualNode, why: str) -> NoReturn:
    raise PeerError(f"{node.me.describe()}: {why}")


def check(node: VirtualNode, msg: MembershipMessage) -> None:
    """Raise :class:`PeerError` if ``msg`` cannot come from a correct peer now."""
    ph = node.phase
    member = node.mode is Mode.MEMBER
    match msg:
        case JoinRequest(route=route, joiner=joiner):
            if route is not None and route.target != joiner.label:
                _refuse(node, f"{msg.describe()} routed to another point")
            return
        case JoinAccepted(responsible=responsible):
            if responsible.process == node.me.process:
                _refuse(node, f"{msg.describe()} from its own process")
            return
        case JoinAcceptedAck(joiner=joiner):
            if ph is None or joiner not in ph.moves_unconfirmed:
                _refuse(node, f"unexpected {msg.describe()}")
            return
        case JoinCounted(sender=sender, joiner=joiner):
            if joiner not in node.joiners or sender != joiner.sibling(Kind.LEFT):
                _refuse(node, f"{msg.describe()} for a node it does not place")
            return
        case JoinCountedAck(joiner=joiner):
            flight = node.inflight
            if flight is None or joiner not in flight.holds:
                _refuse(node, f"unexpected {msg.describe()}")
            return
        case Withdraw(sender=sender, number=number):
            if sender not in node.released:
                _refuse(node, f"{msg.describe()} from a node it does not relay")
            _check_withdrawn(node, sender, number)
            return
        case Integrate():
            _check_integrate(node, msg)
            return
        case HandoverPart():
            _check_part(node, msg)
            return
        case MayILeave(sender=sender):
            if not member or ph is None or sender != node.view.succ:
                _refuse(node, f"{msg.describe()}, which is not its successor in a phase")
            return
        case SetPred(sender=sender, pred=pred):
            if member and ph is None:
                _refuse(node, f"{msg.describe()} outside an update phase")
            if node.me in (sender, pred):
                _refuse(node, f"{msg.describe()} names the node itself")
            return
        case UpdateOver():
            if member and (ph is None or ph.stage != OVER):
                _refuse(node, "UpdateOver before its phase is over")
            return
        case AnchorHandover(state=state):
            if ph is None or node.anchor is not None or not member:
                _refuse(node, f"{msg.describe()} outside a phase or at an anchor")
            if not _anchor_state_ok(state, node.structure is Structure.STACK):
                _refuse(node, f"{msg.describe()}: not an anchor's counters")
            return
    if ph is None:
        _refuse(node, f"{msg.describe()} outside an update phase")
    match msg:
        case StageDone(sender=sender, stage=stage):
            if stage != ph.stage or ph.reported:
                _refuse(node, f"StageDone {stage} in stage {ph.stage}")
            if sender not in ph.old_children or sender in ph.heard:
                _refuse(node, f"{msg.describe()}: not an old child that is still due")
        case Rewire(stage=stage):
            if ph.old_parent is None or not ph.reported or stage != ph.stage + 1:
                _refuse(node, f"Rewire {stage} in stage {ph.stage}")
            if stage not in (JOINS, LEAVES):
                _refuse(node, f"Rewire {stage}")
        case IntegrateAck(sender=sender, withdrawn=withdrawn):
            if sender not in ph.acks:
                _refuse(node, f"{msg.describe()} from a node it did not integrate")
            _check_withdrawn(node, sender, withdrawn)
        case SetPredAck(sender=sender):
            if sender not in ph.acks and sender not in ph.absorbing:
                _refuse(node, f"{msg.describe()}, which it did not ask")
        case LeaveAnswer(sender=sender):
            if sender not in ph.asked_all:
                _refuse(node, f"{msg.describe()} from a node it did not ask")
        case Departing():
            _check_departing(node, msg)
        case Absorbed():
            if ph.absorber is None or ph.duty_done:
                _refuse(node, "Absorbed before it handed over")
        case _:
            _refuse(node, f"unknown message {msg!r:.80}")


def _check_withdrawn(node: VirtualNode, sender: NodeRef, number: int) -> None:
    if number < -1:
        _refuse(node, f"withdrawn batch number {number}")
    if number >= 0 and sender in node.child_batches and node.child_numbers[sender] != number:
        _refuse(node, f"withdraws batch #{number} of {sender.describe()}, which sent another")


def _anchor_state_ok(state: tuple[int, ...], stack: bool) -> bool:
    if len(state) != 3 or not all(0 <= x <= POSITION_MAX for x in state):
        return False
    if stack:
        last, ticket, _ = state
        return last <= ticket
    first, last, _ = state
    return first >= 1 and last >= first - 1


def _sent_by_leaver(node: VirtualNode, sender: NodeRef) -> bool:
    """A leaver this node let go, which has not finished its handover yet."""
    ph = node.phase
    return ph is not None and sender in ph.granted and sender == node.view.succ


def _sent_by_responsible(node: VirtualNode, sender: NodeRef) -> bool:
    """This joining node's responsible node, once the join was counted."""
    ticket = node.ticket
    return (
        node.mode is Mode.JOINING
        and sender == node.responsible
        and ticket is not None
        and ticket.counted
    )


def _check_entries(node: VirtualNode, entries: Iterable[Entry], lo: int, hi: int) -> None:
    """Entries handed over: positions and tickets in range, keys in ``[lo, hi)``, none
    twice, none that this node holds or that a Get waits for here already."""
    stack = node.structure is Structure.STACK
    seen: set[tuple[int, int]] = set()
    for position, ticket, element in entries:
        if not 1 <= position <= POSITION_MAX or ticket < 0 or (not stack and ticket):
            _refuse(node, f"handed-over entry at {position} ticket {ticket}")
        if not isinstance(element, bytes | str):
            _refuse(node, "an element is bytes or text")
        if (position, ticket) in seen or ticket in node.table.entries.get(position, {}):
            _refuse(node, f"handed-over entry at {position} ticket {ticket} twice")
        if position in node.table.waiting:
            _refuse(node, f"handed-over entry at {position}, for which a Get waits here")
        if not in_interval(position_key(position), lo, hi):
            _refuse(node, f"handed-over entry at {position} is not in the sender's part")
        seen.add((position, ticket))


def _check_handover(
    node: VirtualNode, sender: NodeRef, final: Departing | Integrate, part: HandoverPart | None
) -> None:
    """The final message and the pieces (``part`` arriving now): consistent counts, and
    when they complete the handover, every entry checked as a whole."""
    have = node.incoming.parts.get(sender, {})
    if not 0 <= final.parts <= PARTS_MAX or any(i >= final.parts for i in have):
        _refuse(node, f"{final.describe()} does not fit the pieces that came")
    if part is not None and part.index >= final.parts:
        _refuse(node, f"{part.describe()} beyond the {final.parts} pieces announced")
    if len(have) + (part is not None) < final.parts:
        return
    entries: list[Entry] = [e for piece in have.values() for e in piece]
    entries += final.entries
    if part is not None:
        entries += part.entries
    if isinstance(final, Departing):
        lo, hi = sender.label, final.succ.label
    else:
        lo, hi = node.me.label, final.succ.label
    _check_entries(node, entries, lo, hi)


def _check_part(node: VirtualNode, msg: HandoverPart) -> None:
    sender = msg.sender
    if not (_sent_by_leaver(node, sender) or _sent_by_responsible(node, sender)):
        _refuse(node, f"{msg.describe()} from a node that hands nothing over here")
    if not 0 <= msg.index < PARTS_MAX or msg.index in node.incoming.parts.get(sender, {}):
        _refuse(node, f"{msg.describe()}: index out of range or twice")
    final = node.incoming.finals.get(sender)
    if final is not None:
        _check_handover(node, sender, final, msg)


def _check_departing(node: VirtualNode, msg: Departing) -> None:
    if not _sent_by_leaver(node, msg.sender) or msg.sender in node.incoming.finals:
        _refuse(node, f"{msg.describe()} from a node it did not let go")
    if msg.succ in (node.me, msg.sender):
        _refuse(node, f"{msg.describe()} names a successor that cannot be")
    _check_handover(node, msg.sender, msg, None)


def _check_integrate(node: VirtualNode, msg: Integrate) -> None:
    if not _sent_by_responsible(node, msg.sender) or msg.sender in node.incoming.finals:
        _refuse(node, f"{msg.describe()} from a node that is not responsible for it")
    me = node.me
    if me in (msg.pred, msg.succ) or not in_interval(me.label, msg.pred.label, msg.succ.label):
        _refuse(node, f"{msg.describe()}: it does not lie between its new neighbours")
    for j in msg.joiners:
        if j == me or not in_interval(j.label, me.label, msg.succ.label):
            _refuse(node, f"{msg.describe()}: joiner {j.describe()} is not in its part")
    _check_handover(node, msg.sender, msg, None)
