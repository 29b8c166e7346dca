"""What a correct peer can never send to a node in its state, for the messages of Join,
Leave and the update phase (SPEC §8).

:func:`check` runs before :func:`skueue.core.membership.update_phase.handle` changes
anything: a message it refuses raises :class:`RemoteProtocolError`, the sender's fault, and the node
stays as it was.  So every field the handlers rely on (a stage, a sender that is due, a
handover's pieces and entries) is held against the node's state here, once.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import NoReturn

from skueue.core.errors import RemoteProtocolError
from skueue.core.levels import LEVEL_POSITION_MAX
from skueue.core.membership.state import in_interval
from skueue.core.messages.field_types import PARTS_MAX, QueueCounters
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
from skueue.core.ops import PRIORITIES_MAX, is_item
from skueue.core.parts.membership_state import JOINS, LEAVES, OVER
from skueue.core.parts.node_state import NodeState
from skueue.core.parts.ring import Mode
from skueue.dht.keys import POSITION_MAX, position_key
from skueue.overlay.labels import Kind, NodeRef


def _refuse(node: NodeState, why: str) -> NoReturn:
    raise RemoteProtocolError(f"{node.me.describe()}: {why}")


def check(node: NodeState, msg: MembershipMessage) -> None:
    """Raise :class:`RemoteProtocolError` if ``msg`` cannot come from a correct peer now."""
    ph = node.member.phase
    member = node.ring.mode is Mode.MEMBER
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
            if joiner not in node.ring.joiners or sender != joiner.sibling(Kind.LEFT):
                _refuse(node, f"{msg.describe()} for a node it does not place")
            return
        case JoinCountedAck(joiner=joiner):
            flight = node.batching.inflight
            if flight is None or joiner not in flight.holds:
                _refuse(node, f"unexpected {msg.describe()}")
            return
        case Withdraw(sender=sender, number=number):
            if sender not in node.ring.released:
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
            if not member or ph is None or sender != node.ring.view.succ:
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
        case AnchorHandover(state=state, limits=limits):
            if ph is None or node.seat.policy is not None or not member:
                _refuse(node, f"{msg.describe()} outside a phase or at an anchor")
            if not _anchor_state_ok(state):
                _refuse(node, f"{msg.describe()}: not an anchor's counters")
            names = [name for name, _ in limits]
            known = {name for name, _, _ in state}
            if names != sorted(set(names)) or not set(names) <= known or 0 in dict(limits).values():
                _refuse(node, f"{msg.describe()}: limits of other queues, or out of order")
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


def _check_withdrawn(node: NodeState, sender: NodeRef, number: int) -> None:
    if number < -1:
        _refuse(node, f"withdrawn batch number {number}")
    filed = node.batching.child_numbers.get(sender)  # the batch of ``sender`` held here
    if number >= 0 and filed is not None and filed != number:
        _refuse(node, f"withdraws batch #{number} of {sender.describe()}, which sent another")


def _anchor_state_ok(state: tuple[QueueCounters, ...]) -> bool:
    """Every queue once, in name order, each with counters an anchor can hold."""
    names = [name for name, _, _ in state]
    if any(a >= b for a, b in itertools.pairwise(names)):
        return False
    return all(_counters_ok(counters, stack) for _, stack, counters in state)


def _counters_ok(counters: tuple[int, ...], stack: bool) -> bool:
    if not stack and len(counters) != 3:  # a queue with priority levels: ord, then pairs
        pairs = counters[1:]
        return (
            2 <= len(pairs) // 2 <= PRIORITIES_MAX
            and len(pairs) % 2 == 0
            and all(0 <= x <= LEVEL_POSITION_MAX for x in counters)
            and all(1 <= f <= la + 1 for f, la in zip(pairs[0::2], pairs[1::2], strict=True))
        )
    if len(counters) != (4 if stack else 3) or not all(0 <= x <= POSITION_MAX for x in counters):
        return False
    if stack:
        last, ticket, _, base = counters
        return last <= ticket and base + ticket <= POSITION_MAX
    first, last, _ = counters
    return first >= 1 and last >= first - 1


def _sent_by_leaver(node: NodeState, sender: NodeRef) -> bool:
    """A leaver this node let go, which has not finished its handover yet."""
    ph = node.member.phase
    return ph is not None and sender in ph.granted and sender == node.ring.view.succ


def _sent_by_responsible(node: NodeState, sender: NodeRef) -> bool:
    """This joining node's responsible node, once the join was counted."""
    ticket = node.member.ticket
    return (
        node.ring.mode is Mode.JOINING
        and sender == node.ring.responsible
        and ticket is not None
        and ticket.counted
    )


def _check_entries(node: NodeState, entries: Iterable[Entry], lo: int, hi: int) -> None:
    """Entries handed over: positions and tickets in range, keys in ``[lo, hi)``, none
    twice, none that this node holds or that a Get waits for here already."""
    seen: set[tuple[str, int, int]] = set()
    for queue, position, ticket, element in entries:
        at = f"{queue} {position} ticket {ticket}"
        if not 1 <= position <= POSITION_MAX or ticket < 0:
            _refuse(node, f"handed-over entry at {at}")
        if not is_item(element):
            _refuse(node, "an element is bytes or text")
        if (queue, position, ticket) in seen or node.store.has(queue, position, ticket):
            _refuse(node, f"handed-over entry at {at} twice")
        if node.store.waits(queue, position):
            _refuse(node, f"handed-over entry at {at}, for which a Get waits here")
        if not in_interval(position_key(queue, position), lo, hi):
            _refuse(node, f"handed-over entry at {at} is not in the sender's part")
        seen.add((queue, position, ticket))


def _check_handover(
    node: NodeState, sender: NodeRef, final: Departing | Integrate, part: HandoverPart | None
) -> None:
    """The final message and the pieces (``part`` arriving now): consistent counts, and
    when they complete the handover, every entry checked as a whole."""
    have = node.member.incoming.parts.get(sender, {})
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


def _check_part(node: NodeState, msg: HandoverPart) -> None:
    sender = msg.sender
    if not (_sent_by_leaver(node, sender) or _sent_by_responsible(node, sender)):
        _refuse(node, f"{msg.describe()} from a node that hands nothing over here")
    if not 0 <= msg.index < PARTS_MAX or msg.index in node.member.incoming.parts.get(sender, {}):
        _refuse(node, f"{msg.describe()}: index out of range or twice")
    final = node.member.incoming.finals.get(sender)
    if final is not None:
        _check_handover(node, sender, final, msg)


def _check_departing(node: NodeState, msg: Departing) -> None:
    if not _sent_by_leaver(node, msg.sender) or msg.sender in node.member.incoming.finals:
        _refuse(node, f"{msg.describe()} from a node it did not let go")
    if msg.succ in (node.me, msg.sender):
        _refuse(node, f"{msg.describe()} names a successor that cannot be")
    _check_handover(node, msg.sender, msg, None)


def _check_integrate(node: NodeState, msg: Integrate) -> None:
    if not _sent_by_responsible(node, msg.sender) or msg.sender in node.member.incoming.finals:
        _refuse(node, f"{msg.describe()} from a node that is not responsible for it")
    me = node.me
    if me in (msg.pred, msg.succ) or not in_interval(me.label, msg.pred.label, msg.succ.label):
        _refuse(node, f"{msg.describe()}: it does not lie between its new neighbours")
    for j in msg.joiners:
        if j == me or not in_interval(j.label, me.label, msg.succ.label):
            _refuse(node, f"{msg.describe()}: joiner {j.describe()} is not in its part")
    _check_handover(node, msg.sender, msg, None)
