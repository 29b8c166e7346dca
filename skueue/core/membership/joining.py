"""Joining: placing a joiner at its responsible node, counting the join, and stage 2 of
the update phase, where counted joiners enter the ring
(see :mod:`skueue.core.membership.update_phase`)."""

from __future__ import annotations

from dataclasses import replace

from skueue.core.effects import Effect, Send
from skueue.core.errors import ProtocolError
from skueue.core.membership.state import (
    JOIN_RETRY_TICKS,
    NODE_BYTES_MAX,
    in_interval,
    keys_in,
    split_entries,
)
from skueue.core.messages.membership import (
    Absorbed,
    Entry,
    HandoverPart,
    Integrate,
    IntegrateAck,
    JoinAccepted,
    JoinAcceptedAck,
    JoinCounted,
    JoinCountedAck,
    JoinRequest,
    MayILeave,
    SetPred,
    SetPredAck,
    Withdraw,
)
from skueue.core.parts.membership_state import OVER, UpdatePhase
from skueue.core.parts.node_state import NodeState
from skueue.core.parts.ring import Mode
from skueue.overlay.labels import Kind, NodeRef
from skueue.overlay.routing import next_hop, start_route
from skueue.overlay.view import View


def start_join(node: NodeState) -> list[Effect]:
    assert node.member.contact is not None
    node.member.join_wait_ticks = 1
    return [Send(node.member.contact, JoinRequest(None, node.me))]


def joining_tick(node: NodeState) -> list[Effect]:
    """Repeat the join request until a responsible node answers."""
    if node.ring.responsible is not None or node.member.contact is None:
        return []
    node.member.join_wait_ticks += 1
    if node.member.join_wait_ticks % JOIN_RETRY_TICKS:
        return []
    return [Send(node.member.contact, JoinRequest(None, node.me))]


def on_join_request(node: NodeState, msg: JoinRequest) -> list[Effect]:
    joiner = msg.joiner
    if node.ring.mode is not Mode.MEMBER:
        # A joining contact passes the request on to where it asked itself.
        return [Send(node.member.contact, msg)] if node.member.contact is not None else []
    if node.member.phase is not None:
        if joiner not in node.member.deferred_joins:
            node.member.deferred_joins.append(joiner)
        return []
    route = msg.route or start_route(node.ring.view, joiner.label)
    hop, route = next_hop(node.ring.view, route)
    if hop is not None:
        return [Send(hop, JoinRequest(route, joiner))]
    if joiner == node.me:
        return []  # a late copy: the joiner is already in the ring
    if joiner not in node.ring.joiners:
        node.ring.adopt([joiner])
    return [Send(joiner, JoinAccepted(node.me))]


def on_join_accepted(node: NodeState, msg: JoinAccepted) -> list[Effect]:
    confirm: list[Effect] = [Send(msg.responsible, JoinAcceptedAck(node.me))] if msg.confirm else []
    if node.ring.mode is not Mode.JOINING or node.ring.responsible == msg.responsible:
        return confirm
    if not msg.confirm and node.ring.responsible is not None:
        # A late answer to an earlier request: only a move (confirmed) changes the node
        # that places us once one has.
        return []
    old = node.ring.responsible
    assert node.member.ticket is not None
    node.member.ticket.responsible[node.me.kind] = msg.responsible
    effects: list[Effect] = []
    flight = node.batching.inflight
    if old is not None and node.me.kind is Kind.LEFT:
        # Moved to a new responsible node (an update phase integrated a node in front
        # of us): take back the batch the old one will never serve, and tell it either
        # way, so that it stops taking batches from us.
        number = -1
        if flight is not None and not flight.served:
            number = flight.number
            reclaim(node)
        effects.append(Send(old, Withdraw(node.me, number)))
    node.ring.placed_at(msg.responsible)
    return effects + confirm


def reclaim(node: NodeState) -> None:
    """Put an unserved batch's operations back in front of the own buffer, in order."""
    flight = node.batching.reclaim()
    if flight.reports_join and node.member.ticket is not None:
        node.member.ticket.reported = False  # reported again with the next batch


def on_withdraw(node: NodeState, msg: Withdraw) -> list[Effect]:
    node.ring.settled(msg.sender)
    node.batching.take_back(msg.sender, msg.number)
    return []


def join_report(node: NodeState) -> int:
    """A joining left node's batch reports its process's join once all three nodes are
    placed (3 joining nodes for the anchor's trigger)."""
    ticket = node.member.ticket
    if node.ring.mode is not Mode.JOINING or ticket is None or ticket.reported:
        return 0
    if len(ticket.responsible) < len(Kind):
        return 0
    ticket.reported = True
    return len(Kind)


def join_counted(node: NodeState) -> list[Effect]:
    """The anchor assigned the batch with our join: tell every responsible node, and hold
    the next batch until all three know."""
    ticket = node.member.ticket
    assert ticket is not None
    ticket.counted = True
    effects: list[Effect] = []
    for kind, responsible in ticket.responsible.items():
        joiner = node.me.sibling(kind)
        node.batching.hold(joiner)
        effects.append(Send(responsible, JoinCounted(node.me, joiner)))
    return effects


def on_join_counted(node: NodeState, msg: JoinCounted) -> list[Effect]:
    if msg.joiner not in node.ring.joiners:
        raise ProtocolError(
            f"{node.me.describe()}: JoinCounted for {msg.joiner.describe()}, "
            "which it does not place"
        )
    node.member.counted_joiners.add(msg.joiner)
    return [Send(msg.sender, JoinCountedAck(msg.joiner))]


def on_join_counted_ack(node: NodeState, msg: JoinCountedAck) -> list[Effect]:
    node.batching.release_hold(msg.joiner)
    return []


def integrate_joiners(node: NodeState) -> list[Effect]:
    """Stage 2: put every counted joiner into the ring; joiners not counted yet stay
    joining, placed at whichever node now precedes them."""
    ph = node.member.phase
    assert ph is not None
    joiners = [j for j in node.ring.joiners if j in node.member.counted_joiners]
    if not joiners:
        ph.finish_duty()
        return []
    waiting = [j for j in node.ring.joiners if j not in node.member.counted_joiners]
    old_succ = node.ring.view.succ
    chain = [node.me, *joiners, old_succ]
    effects: list[Effect] = []
    for i, joiner in enumerate(joiners):
        lo, hi = joiner.label, chain[i + 2].label
        entries = node.store.take_where(keys_in(lo, hi))
        moved = tuple(j for j in waiting if in_interval(j.label, lo, hi))
        node_bytes = NODE_BYTES_MAX * (3 + len(moved))
        pieces = split_entries(entries, node.member.handover_bytes_max, node_bytes)
        for index, piece in enumerate(pieces[:-1]):
            effects.append(Send(joiner, HandoverPart(node.me, index, piece)))
        parts = len(pieces) - 1
        integrate = Integrate(node.me, chain[i], chain[i + 2], pieces[-1], moved, parts)
        effects.append(Send(joiner, integrate))
    effects.append(Send(old_succ, SetPred(node.me, joiners[-1])))
    ph.await_acks({*joiners, old_succ})
    staying = [j for j in waiting if not in_interval(j.label, joiners[0].label, old_succ.label)]
    node.member.counted_joiners.clear()
    node.ring.let_in(joiners[0], staying)
    return effects


def on_integrate(node: NodeState, msg: Integrate, entries: list[Entry]) -> list[Effect]:
    """Enter the ring; ``entries`` are all of the handover, pieces and final message."""
    withdrawn = -1
    flight = node.batching.inflight
    if flight is not None and not flight.served:
        # Our relayed batch will never be served now: take its operations back, in order.
        withdrawn = flight.number
        reclaim(node)
    node.member.ticket = None
    node.store.add_entries(entries)
    node.ring.enter(View(node.me, msg.pred, msg.succ))
    node.ring.adopt(list(msg.joiners))
    if node.member.phase is None:
        node.member.phase = UpdatePhase(None, (), stage=OVER)
    ack = IntegrateAck(node.me, withdrawn)
    if not msg.joiners:
        return [Send(msg.sender, ack)]
    # The joiners that moved here learn their new responsible node, and confirm it before
    # the phase can end: a join counted later is then reported here, not to the old node.
    node.member.phase.await_moves(set(msg.joiners), ack, msg.sender)
    return [Send(j, JoinAccepted(node.me, confirm=True)) for j in msg.joiners]


def on_join_accepted_ack(node: NodeState, msg: JoinAcceptedAck) -> list[Effect]:
    ph = node.member.phase
    if ph is None or msg.joiner not in ph.moves_unconfirmed:
        raise ProtocolError(f"{node.me.describe()}: unexpected {msg.describe()}")
    last = ph.move_confirmed(msg.joiner)
    if last is None:
        return []
    ack, to = last
    return [Send(to, ack)]


def on_integrate_ack(node: NodeState, msg: IntegrateAck) -> list[Effect]:
    node.ring.settled(msg.sender)
    node.batching.take_back(msg.sender, msg.withdrawn)
    return acked(node, msg.sender)


def acked(node: NodeState, sender: NodeRef) -> list[Effect]:
    ph = node.member.phase
    assert ph is not None
    leaver = ph.absorbed(sender)
    if leaver is not None:
        return [Send(leaver, Absorbed())]
    ph.acked(sender)
    return []


def on_set_pred(node: NodeState, msg: SetPred) -> list[Effect]:
    node.ring.set_view(replace(node.ring.view, pred=msg.pred))
    effects: list[Effect] = [Send(msg.sender, SetPredAck(node.me))]
    ph = node.member.phase
    if ph is not None and ph.asked is not None and ph.absorber is None and ph.asked != msg.pred:
        # A leaver whose predecessor left: ask the new one (the old one's answer, if it
        # still comes, is stale and ignored).
        ph.ask(msg.pred)
        effects.append(Send(msg.pred, MayILeave(node.me)))
    return effects
