"""The peer codec, derived from the message classes: messages <-> plain msgpack arrays.

A message travels as ``[kind_name, field, ...]`` in the class's field order.  Nothing
here names a kind or a field: for every class in
:data:`~skueue.core.messages.stages.MESSAGE_KINDS` and
:data:`~skueue.core.messages.membership.MEMBERSHIP_KINDS`, the field annotations
(with their :mod:`~skueue.core.messages.field_types` markers) are turned once, at
import, into one encoder and one checking decoder per field.  Writing a new message kind
is writing its class.

Nested protocol types (node references, batches, grants, routes) have one codec each in
:mod:`skueue.wire.fields`; node references travel as ``[process, kind]`` (labels are
recomputed, not trusted).  Decoding checks every field's type and range and turns
anything wrong into one :class:`RemoteProtocolError`, never a crash deeper in the core.
No pickle, ever.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any

from skueue.core.batch import Batches, RunGrant
from skueue.core.errors import RemoteProtocolError
from skueue.core.messages.field_types import Items, QueueNameRule, Range
from skueue.core.messages.membership import MEMBERSHIP_KINDS, MembershipMessage
from skueue.core.messages.stages import MESSAGE_KINDS, Message
from skueue.core.ops import Redelivered
from skueue.overlay.labels import NodeRef
from skueue.overlay.routing import Route
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
    encode_item,
    encode_node,
    encode_route,
    item,
    queue_name,
)

Encode = Callable[[Any], Any] | None  # None: the value travels as it is
Decode = Callable[[Any], Any]

# The protocol's own types, each with one codec.
NESTED: dict[type, tuple[Callable[[Any], Any], Callable[[Any, str], Any]]] = {
    NodeRef: (encode_node, decode_node),
    Batches: (encode_batch, lambda x, what: decode_batch(x)),
    RunGrant: (encode_grant, lambda x, what: decode_grant(x)),
    Route: (encode_route, lambda x, what: decode_route(x)),
}


def field_codec(annotation: Any, what: str) -> tuple[Encode, Decode]:
    """The encoder and the checking decoder for one annotated field type."""
    markers: tuple[Any, ...] = ()
    if typing.get_origin(annotation) is typing.Annotated:
        annotation, *rest = typing.get_args(annotation)
        markers = tuple(rest)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is bool:
        return None, lambda x: _bool(x, what)
    if annotation is str and any(isinstance(m, QueueNameRule) for m in markers):
        return None, lambda x: queue_name(x, what)
    if annotation is int:
        bounds = next((m for m in markers if isinstance(m, Range)), Range())
        low, high = bounds.low, bounds.high

        def decode_int(x: Any) -> int:
            if type(x) is int and low <= x < high:  # the common case, without a call
                return x
            return _int(x, what, low, high)  # raises, with the message

        return None, decode_int
    if annotation in NESTED:
        encode, decode = NESTED[annotation]
        return encode, lambda x: decode(x, what)
    if origin is types.UnionType and set(args) == {bytes, str}:  # an Element
        return None, lambda x: element(x, what)
    if origin is types.UnionType and set(args) == {bytes, str, Redelivered}:  # an Item
        return encode_item, lambda x: item(x, what)
    if origin is types.UnionType and all(dataclasses.is_dataclass(a) for a in args):
        return _nested_message(args, what)
    if origin is types.UnionType and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        enc, dec = field_codec(inner, what)
        optional_enc = None if enc is None else (lambda v: None if v is None else enc(v))
        return optional_enc, lambda x: None if x is None else dec(x)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        count = next((m for m in markers if isinstance(m, Items)), Items())
        return _sequence(args[0], what, count)
    if origin is tuple:
        return _fixed(args, what)
    raise TypeError(f"{what}: no wire codec for {annotation!r}")


def _sequence(item: Any, what: str, count: Items) -> tuple[Encode, Decode]:
    enc, dec = field_codec(item, f"{what} item")

    def decode(x: Any) -> tuple[Any, ...]:
        items = _list(x, what)
        if not count.least <= len(items) <= count.most:
            raise RemoteProtocolError(
                f"{what}: expected {count.least} to {count.most} items, got {len(items)}"
            )
        return tuple(dec(i) for i in items)

    if enc is None:
        return list, decode
    return (lambda v: [enc(i) for i in v]), decode


def _nested_message(classes: tuple[type[Any], ...], what: str) -> tuple[Encode, Decode]:
    """A message inside a message (a DHT bundle's): one of ``classes``, in its own wire
    form.  (The codecs are looked up when used: they are built after this.)"""
    allowed = frozenset(c.__name__ for c in classes)

    def decode(x: Any) -> Any:
        fields = _list(x, what)
        if not fields or type(fields[0]) is not str or fields[0] not in allowed:
            raise RemoteProtocolError(f"{what}: expected one of {sorted(allowed)}")
        return CODECS[fields[0]].decode(fields[1:])

    return (lambda m: encode_message(m)), decode


def _fixed(items: tuple[Any, ...], what: str) -> tuple[Encode, Decode]:
    codecs = [field_codec(a, f"{what} {i}") for i, a in enumerate(items)]
    n = len(codecs)

    def encode(v: Any) -> list[Any]:
        return [x if enc is None else enc(x) for (enc, _), x in zip(codecs, v, strict=True)]

    def decode(x: Any) -> tuple[Any, ...]:
        return tuple(dec(i) for (_, dec), i in zip(codecs, _list(x, what, n), strict=True))

    return encode, decode


@dataclasses.dataclass(frozen=True, slots=True)
class KindCodec:
    """One message class's wire form, derived from its fields."""

    kind: str
    cls: type[Any]
    names: tuple[str, ...]
    encoders: tuple[Encode, ...]
    decoders: tuple[Decode, ...]

    @classmethod
    def of(cls, message_class: type[Any]) -> KindCodec:
        hints = typing.get_type_hints(message_class, include_extras=True)
        names = tuple(f.name for f in dataclasses.fields(message_class))
        codecs = [field_codec(hints[name], name) for name in names]
        return cls(
            message_class.__name__,
            message_class,
            names,
            tuple(enc for enc, _ in codecs),
            tuple(dec for _, dec in codecs),
        )

    def encode(self, m: Any) -> list[Any]:
        out: list[Any] = [self.kind]
        for name, enc in zip(self.names, self.encoders, strict=True):
            value = getattr(m, name)
            out.append(value if enc is None else enc(value))
        return out

    def decode(self, rest: list[Any]) -> Any:
        if len(rest) != len(self.decoders):
            raise RemoteProtocolError(f"{self.kind}: wrong number of fields ({len(rest)})")
        return self.cls(*[dec(x) for dec, x in zip(self.decoders, rest, strict=True)])


CODECS: dict[str, KindCodec] = {
    kind: KindCodec.of(cls) for kind, cls in {**MESSAGE_KINDS, **MEMBERSHIP_KINDS}.items()
}
_BY_CLASS: dict[type[Any], KindCodec] = {codec.cls: codec for codec in CODECS.values()}


def encode_message(m: Message | MembershipMessage) -> list[Any]:
    codec = _BY_CLASS.get(type(m))
    if codec is None:
        raise TypeError(f"not a protocol message: {m!r}")
    return codec.encode(m)


def decode_message(x: Any) -> Message | MembershipMessage:
    fields = _list(x, "message")
    if not fields or type(fields[0]) is not str:
        raise RemoteProtocolError("message: expected [kind, fields...]")
    codec = CODECS.get(fields[0])
    if codec is None:
        raise RemoteProtocolError(f"unknown message kind {fields[0]!r:.40}")
    result: Message | MembershipMessage = codec.decode(fields[1:])
    return result
