"""Leaving: counting a leave, and stage 3 of the update phase, where leavers hand their
part to their predecessor, left to right (see :mod:`skueue.core.membership.update_phase`).

A leaver's entries go in bounded pieces (``HandoverPart``, at most the node's
``handover_bytes_max`` bytes each) ahead of the final ``Departing``, which says how many
pieces there are; the predecessor takes over only when it holds every piece, whatever
order they came in."""

from __future__ import annotations

from dataclasses import replace

from skueue.core.effects import Effect, Send
from skueue.core.membership.state import NODE_BYTES_MAX, split_entries
from skueue.core.messages.membership import (
    Departing,
    Entry,
    HandoverPart,
    LeaveAnswer,
    MayILeave,
    SetPred,
)
from skueue.core.parts.node_state import NodeState
from skueue.core.parts.ring import Mode
from skueue.overlay.labels import Kind


def leave_report(node: NodeState) -> int:
    """A leaving process's left node reports the leave of its 3 nodes, once, in a batch
    that leaves no operation of its own buffer behind: operations deferred behind a
    delete or a create (core/intake.py) would otherwise wait for a batch that, once the
    leave is counted, may never come."""
    ticket = node.member.leave
    if ticket is None or ticket.reported or node.me.kind is not Kind.LEFT:
        return 0
    if node.batching.own.deferred:
        return 0
    ticket.reported = True
    return len(Kind)


def leave_counted(node: NodeState) -> None:
    """The anchor assigned the batch that reported our leave: we go in the next phase."""
    ticket = node.member.leave
    assert ticket is not None
    ticket.counted = True


def goes_now(node: NodeState) -> bool:
    return node.member.leave is not None and node.member.leave.goes_now()


def start_leaving(node: NodeState) -> list[Effect]:
    ph = node.member.phase
    assert ph is not None
    if not goes_now(node):
        ticket = node.member.leave
        if ticket is not None and ticket.counted:
            # Held back by joiners: report the leave again, so the anchor starts another
            # phase for it (the three nodes see the same, final, state in stage 3).
            ticket.counted = ticket.reported = False
        ph.finish_duty()
        return []
    ph.ask(node.ring.view.pred)
    return [Send(node.ring.view.pred, MayILeave(node.me))]


def on_may_i_leave(node: NodeState, msg: MayILeave) -> list[Effect]:
    granted = not goes_now(node) or node.ring.mode is not Mode.MEMBER
    if granted and node.member.phase is not None:
        node.member.phase.grant(msg.sender)
    return [Send(msg.sender, LeaveAnswer(node.me, granted))]


def on_leave_answer(node: NodeState, msg: LeaveAnswer) -> list[Effect]:
    ph = node.member.phase
    assert ph is not None
    if msg.sender != ph.asked or msg.sender != node.ring.view.pred or ph.absorber is not None:
        return []  # our predecessor changed since we asked: we asked the new one already
    if not msg.granted:
        return []  # it leaves first; its SetPred will name the node to ask next
    entries = node.store.take_where(lambda queue, position: True)
    deferred, node.member.deferred_joins = tuple(node.member.deferred_joins), []
    pred = node.ring.view.pred
    ph.hand_to(pred)
    node_bytes = NODE_BYTES_MAX * (2 + len(deferred))
    pieces = split_entries(entries, node.member.handover_bytes_max, node_bytes)
    effects: list[Effect] = [
        Send(pred, HandoverPart(node.me, i, piece)) for i, piece in enumerate(pieces[:-1])
    ]
    final = Departing(node.me, node.ring.view.succ, pieces[-1], deferred, len(pieces) - 1)
    return [*effects, Send(pred, final)]


def on_departing(node: NodeState, msg: Departing, entries: list[Entry]) -> list[Effect]:
    """Take the leaver's part over: ``entries`` are all of it, pieces and final message."""
    ph = node.member.phase
    assert ph is not None
    node.store.add_entries(entries)
    deferred = node.member.deferred_joins
    deferred.extend(j for j in msg.deferred if j not in deferred)
    node.ring.set_view(replace(node.ring.view, succ=msg.succ))
    ph.absorb(msg.sender, msg.succ)
    return [Send(msg.succ, SetPred(node.me, node.me))]


def on_absorbed(node: NodeState) -> list[Effect]:
    assert node.member.phase is not None
    node.member.phase.finish_duty()
    return []
