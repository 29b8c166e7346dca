"""The wire codec for Join, Leave and update-phase messages (see :mod:`skueue.wire.peer`).

Same conventions: ``[kind_name, field, ...]``, node references as ``[process, kind]``, DHT
entries as ``[position, ticket, element]``; every field checked on the way in.
"""

from __future__ import annotations

from typing import Any

from skueue.core.membership.state import PARTS_MAX
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
from skueue.wire.errors import RemoteProtocolError
from skueue.wire.fields import (
    _bool,
    _int,
    _list,
    decode_node,
    decode_route,
    element,
    encode_node,
    encode_route,
)

ENTRIES_MAX = 1 << 24


def _nodes(x: Any, what: str) -> tuple[Any, ...]:
    return tuple(decode_node(n, what) for n in _list(x, what))


def _entries(x: Any) -> tuple[Entry, ...]:
    items = _list(x, "entries")
    if len(items) > ENTRIES_MAX:
        raise RemoteProtocolError("entries: too many")
    out = []
    for item in items:
        position, ticket, elem = _list(item, "entry", 3)
        out.append(
            (_int(position, "entry position", 1), _int(ticket, "entry ticket"), element(elem))
        )
    return tuple(out)


def encode(m: MembershipMessage) -> list[Any]:
    match m:
        case JoinRequest():
            route = None if m.route is None else encode_route(m.route)
            return ["JoinRequest", route, encode_node(m.joiner)]
        case JoinAccepted():
            return ["JoinAccepted", encode_node(m.responsible), m.confirm]
        case JoinAcceptedAck():
            return ["JoinAcceptedAck", encode_node(m.joiner)]
        case JoinCounted():
            return ["JoinCounted", encode_node(m.sender), encode_node(m.joiner)]
        case JoinCountedAck():
            return ["JoinCountedAck", encode_node(m.joiner)]
        case Withdraw():
            return ["Withdraw", encode_node(m.sender), m.number]
        case StageDone():
            return ["StageDone", encode_node(m.sender), m.stage]
        case Rewire():
            return ["Rewire", m.stage]
        case Integrate():
            return [
                "Integrate",
                encode_node(m.sender),
                encode_node(m.pred),
                encode_node(m.succ),
                [list(e) for e in m.entries],
                [encode_node(j) for j in m.joiners],
                m.parts,
            ]
        case IntegrateAck():
            return ["IntegrateAck", encode_node(m.sender), m.withdrawn]
        case SetPred():
            return ["SetPred", encode_node(m.sender), encode_node(m.pred)]
        case SetPredAck():
            return ["SetPredAck", encode_node(m.sender)]
        case MayILeave():
            return ["MayILeave", encode_node(m.sender)]
        case LeaveAnswer():
            return ["LeaveAnswer", encode_node(m.sender), m.granted]
        case Departing():
            return [
                "Departing",
                encode_node(m.sender),
                encode_node(m.succ),
                [list(e) for e in m.entries],
                [encode_node(j) for j in m.deferred],
                m.parts,
            ]
        case HandoverPart():
            return [
                "HandoverPart",
                encode_node(m.sender),
                m.index,
                [list(e) for e in m.entries],
            ]
        case Absorbed():
            return ["Absorbed"]
        case AnchorHandover():
            return ["AnchorHandover", list(m.state)]
        case UpdateOver():
            return ["UpdateOver"]
    raise TypeError(f"not a membership message: {m!r}")


def decode(kind: str, rest: list[Any]) -> MembershipMessage | None:
    """The message, or None when ``kind`` is not a membership kind."""
    match kind:
        case "JoinRequest":
            route, joiner = rest
            return JoinRequest(
                None if route is None else decode_route(route), decode_node(joiner, "joiner")
            )
        case "JoinAccepted":
            responsible, confirm = rest
            return JoinAccepted(decode_node(responsible, "responsible"), _bool(confirm, "confirm"))
        case "JoinAcceptedAck":
            (joiner,) = rest
            return JoinAcceptedAck(decode_node(joiner, "joiner"))
        case "JoinCounted":
            sender, joiner = rest
            return JoinCounted(decode_node(sender, "sender"), decode_node(joiner, "joiner"))
        case "JoinCountedAck":
            (joiner,) = rest
            return JoinCountedAck(decode_node(joiner, "joiner"))
        case "Withdraw":
            sender, number = rest
            return Withdraw(decode_node(sender, "sender"), _int(number, "number", -1))
        case "StageDone":
            sender, stage = rest
            return StageDone(decode_node(sender, "sender"), _int(stage, "stage", 1, 4))
        case "Rewire":
            (stage,) = rest
            return Rewire(_int(stage, "stage", 2, 4))
        case "Integrate":
            sender, pred, succ, entries, joiners, parts = rest
            return Integrate(
                decode_node(sender, "sender"),
                decode_node(pred, "pred"),
                decode_node(succ, "succ"),
                _entries(entries),
                _nodes(joiners, "joiners"),
                _int(parts, "parts", 0, PARTS_MAX + 1),
            )
        case "IntegrateAck":
            sender, withdrawn = rest
            return IntegrateAck(decode_node(sender, "sender"), _int(withdrawn, "withdrawn", -1))
        case "SetPred":
            sender, pred = rest
            return SetPred(decode_node(sender, "sender"), decode_node(pred, "pred"))
        case "SetPredAck":
            (sender,) = rest
            return SetPredAck(decode_node(sender, "sender"))
        case "MayILeave":
            (sender,) = rest
            return MayILeave(decode_node(sender, "sender"))
        case "LeaveAnswer":
            sender, granted = rest
            return LeaveAnswer(decode_node(sender, "sender"), _bool(granted, "granted"))
        case "Departing":
            sender, succ, entries, deferred, parts = rest
            return Departing(
                decode_node(sender, "sender"),
                decode_node(succ, "succ"),
                _entries(entries),
                _nodes(deferred, "deferred"),
                _int(parts, "parts", 0, PARTS_MAX + 1),
            )
        case "HandoverPart":
            sender, index, entries = rest
            return HandoverPart(
                decode_node(sender, "sender"), _int(index, "index", 0, PARTS_MAX), _entries(entries)
            )
        case "Absorbed":
            () = rest
            return Absorbed()
        case "AnchorHandover":
            (state,) = rest
            values = tuple(_int(v, "anchor state") for v in _list(state, "anchor state", 3))
            return AnchorHandover(values)
        case "UpdateOver":
            () = rest
            return UpdateOver()
    return None
