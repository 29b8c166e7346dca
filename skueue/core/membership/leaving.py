"""Leaving: counting a leave, and stage 3 of the update phase, where leavers hand their
part to their predecessor, left to right (see :mod:`skueue.core.membership.update_phase`).

A leaver's entries go in bounded pieces (``HandoverPart``, at most the node's
``handover_bytes_max`` bytes each) ahead of the final ``Departing``, which says how many
pieces there are; the predecessor takes over only when it holds every piece, whatever
order they came in."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from skueue.core.effects import Effect, Send
from skueue.core.membership.state import NODE_BYTES_MAX, Mode, split_entries
from skueue.core.messages.membership import (
    Departing,
    Entry,
    HandoverPart,
    LeaveAnswer,
    MayILeave,
    SetPred,
)
from skueue.overlay.labels import Kind

if TYPE_CHECKING:
    from skueue.core.node.virtual_node import VirtualNode


def leave_report(node: VirtualNode) -> int:
    """A leaving process's left node reports the leave of its 3 nodes, once."""
    ticket = node.leave
    if ticket is None or ticket.reported or node.me.kind is not Kind.LEFT:
        return 0
    ticket.reported = True
    return len(Kind)


def goes_now(node: VirtualNode) -> bool:
    return node.leave is not None and node.leave.goes_now()


def start_leaving(node: VirtualNode) -> list[Effect]:
    ph = node.phase
    assert ph is not None
    if not goes_now(node):
        ticket = node.leave
        if ticket is not None and ticket.counted:
            # Held back by joiners: report the leave again, so the anchor starts another
            # phase for it (the three nodes see the same, final, state in stage 3).
            ticket.counted = ticket.reported = False
        ph.duty_done = True
        return []
    ph.asked = node.view.pred
    ph.asked_all.add(node.view.pred)
    return [Send(node.view.pred, MayILeave(node.me))]


def on_may_i_leave(node: VirtualNode, msg: MayILeave) -> list[Effect]:
    granted = not goes_now(node) or node.mode is not Mode.MEMBER
    if granted and node.phase is not None:
        node.phase.granted.add(msg.sender)
    return [Send(msg.sender, LeaveAnswer(node.me, granted))]


def on_leave_answer(node: VirtualNode, msg: LeaveAnswer) -> list[Effect]:
    ph = node.phase
    assert ph is not None
    if msg.sender != ph.asked or msg.sender != node.view.pred or ph.absorber is not None:
        return []  # our predecessor changed since we asked: we asked the new one already
    if not msg.granted:
        return []  # it leaves first; its SetPred will name the node to ask next
    entries = node.table.take_where(lambda p: True)
    deferred, node.deferred_joins = tuple(node.deferred_joins), []
    ph.absorber = pred = node.view.pred
    pieces = split_entries(entries, node.handover_bytes_max, NODE_BYTES_MAX * (2 + len(deferred)))
    effects: list[Effect] = [
        Send(pred, HandoverPart(node.me, i, piece)) for i, piece in enumerate(pieces[:-1])
    ]
    final = Departing(node.me, node.view.succ, pieces[-1], deferred, len(pieces) - 1)
    return [*effects, Send(pred, final)]


def on_departing(node: VirtualNode, msg: Departing, entries: list[Entry]) -> list[Effect]:
    """Take the leaver's part over: ``entries`` are all of it, pieces and final message."""
    ph = node.phase
    assert ph is not None
    ph.granted.discard(msg.sender)
    node.table.add_entries(entries)
    node.deferred_joins.extend(j for j in msg.deferred if j not in node.deferred_joins)
    node.set_view(replace(node.view, succ=msg.succ))
    ph.absorbing[msg.succ] = msg.sender
    return [Send(msg.succ, SetPred(node.me, node.me))]


def on_absorbed(node: VirtualNode) -> list[Effect]:
    assert node.phase is not None
    node.phase.duty_done = True
    return []
