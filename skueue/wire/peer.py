"""The wire codec for protocol messages: attrs messages <-> plain msgpack arrays.

Every message kind in :data:`skueue.core.messages.stages.MESSAGE_KINDS` is encoded as
``[kind_name, field, ...]`` in field order; node references travel as ``[process, kind]``
(labels are recomputed from the process id rather than trusted).  Decoding checks every
field's type and range and turns anything wrong into one :class:`RemoteProtocolError`,
never a crash deeper in the core.  No pickle, ever.
"""

from __future__ import annotations

from typing import Any

from skueue.core.messages.membership import MEMBERSHIP_KINDS, MembershipMessage
from skueue.core.messages.stages import BatchUp, Get, GetReply, Grants, Message, Put, PutAck
from skueue.wire import peer_membership as wire_membership
from skueue.wire.errors import RemoteProtocolError
from skueue.wire.fields import (
    _bool,
    _int,
    _list,
    decode_batch,
    decode_grant,
    decode_node,
    decode_route,
    element,
    encode_batch,
    encode_grant,
    encode_node,
    encode_route,
)


def encode_message(m: Message | MembershipMessage) -> list[Any]:
    if type(m).__name__ in MEMBERSHIP_KINDS:
        return wire_membership.encode(m)  # type: ignore[arg-type]
    match m:
        case BatchUp():
            return ["BatchUp", encode_node(m.sender), encode_batch(m.batch), m.number]
        case Grants():
            return ["Grants", [encode_grant(g) for g in m.grants], m.busy, m.update, m.number]
        case Put():
            return [
                "Put",
                None if m.route is None else encode_route(m.route),
                m.position,
                m.element,
                m.ticket,
                encode_node(m.requester),
                m.op_id,
                m.ack,
            ]
        case Get():
            return [
                "Get",
                None if m.route is None else encode_route(m.route),
                m.position,
                m.ticket,
                encode_node(m.requester),
                m.op_id,
            ]
        case GetReply():
            return ["GetReply", m.op_id, m.position, m.element]
        case PutAck():
            return ["PutAck", m.op_id]
    raise TypeError(f"not a protocol message: {m!r}")


def decode_message(x: Any) -> Message | MembershipMessage:
    fields = _list(x, "message")
    if not fields or type(fields[0]) is not str:
        raise RemoteProtocolError("message: expected [kind, fields...]")
    kind, rest = fields[0], fields[1:]
    try:
        match kind:
            case "BatchUp":
                sender, batch, number = rest
                return BatchUp(
                    decode_node(sender, "sender"), decode_batch(batch), _int(number, "number")
                )
            case "Grants":
                grants, busy, update, number = rest
                return Grants(
                    tuple(decode_grant(g) for g in _list(grants, "grants")),
                    _bool(busy, "busy"),
                    _bool(update, "update"),
                    _int(number, "number"),
                )
            case "Put":
                route, position, elem, ticket, requester, op_id, ack = rest
                return Put(
                    None if route is None else decode_route(route),
                    _int(position, "position", 1),
                    element(elem),
                    _int(ticket, "ticket"),
                    decode_node(requester, "requester"),
                    _int(op_id, "op id"),
                    _bool(ack, "ack"),
                )
            case "Get":
                route, position, ticket, requester, op_id = rest
                return Get(
                    None if route is None else decode_route(route),
                    _int(position, "position", 1),
                    _int(ticket, "ticket"),
                    decode_node(requester, "requester"),
                    _int(op_id, "op id"),
                )
            case "GetReply":
                op_id, position, elem = rest
                return GetReply(_int(op_id, "op id"), _int(position, "position", 1), element(elem))
            case "PutAck":
                (op_id,) = rest
                return PutAck(_int(op_id, "op id"))
            case _:
                membership = wire_membership.decode(kind, rest)
                if membership is not None:
                    return membership
    except ValueError:
        # Unpacking a field list of the wrong length.
        raise RemoteProtocolError(f"{kind}: wrong number of fields ({len(rest)})") from None
    raise RemoteProtocolError(f"unknown message kind {kind!r:.40}")
