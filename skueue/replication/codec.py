"""The replication messages <-> plain values (lists, ints, bytes, strings, booleans,
None), derived from the message classes as the peer codec is (``skueue/wire/peer.py``).

A message travels as ``[kind, field, ...]`` in its class's field order, its kind being
the class's ``kind``; an :class:`~skueue.replication.messages.Entry` or a
:class:`~skueue.replication.config.Config` inside it as ``[field, ...]`` (the annotation
says which class it is).  Nothing here names a field: for every class of
:data:`~skueue.replication.messages.MESSAGE_KINDS`, the field annotations are turned
once, when a :class:`ReplicationCodec` is made (the default one at import), into one
encoder and one checking decoder per field.  Writing a new message kind is writing its
class.

Decoding checks every value's type and range, and every class's own rules (its
``__post_init__``: a configuration's hosts sorted, distinct and disjoint, a config entry
with its configuration), before the message exists, and turns anything wrong into one
:class:`ReplicationCodecError` naming the field: a peer's bad bytes never reach the node
as anything else.  There is no msgpack here (the module is pure): the driver packs the
plain value, with ``use_bin_type=True`` so that bytes stay bytes.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any, Literal

from skueue.replication.messages import MESSAGE_KINDS, Entry, Message

INT_END = 1 << 63
"""Every int on the wire is in ``[0, INT_END)``: terms and indexes are never negative,
and msgpack's signed 64 bits carry the rest."""


class ReplicationCodecError(ValueError):
    """A value that is no replication message a correct replica sends (its one line
    names the field); the driver drops the message and blames the sender."""


@dataclasses.dataclass(frozen=True, slots=True)
class CodecLimits:
    """How much one message may carry; beyond it the decoder refuses, so that a peer's
    message never costs more than these to check and to hold."""

    entries_max: int = 1 << 16
    """Entries in one append: an append weighs at most ``append_bytes_max`` (1 MiB by
    default) and every entry at least 16 bytes (``Entry.size``), hence 65,536."""
    data_bytes_max: int = 16 * 1024 * 1024
    """Bytes in one entry's data or one snapshot's data: the most one frame of the
    daemon carries (``frame_bytes_max``)."""
    hosts_max: int = 64
    """Hosts in one configuration's voters, or in its learners: a group has 1, 3 or 5
    voters and a learner or two while it changes; 64 is far beyond any of it."""
    host_id_chars_max: int = 256
    """Characters in one host id (a host's id and its data directory's nonce)."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if getattr(self, field.name) < 1:
                raise ValueError(f"{field.name} must be at least 1")


# The limit on a tuple, by the type of its items (a type, not a field: a new field of
# either type gets its limit without a word here).
_ITEMS_LIMIT: dict[Any, str] = {Entry: "entries_max", str: "hosts_max"}

# ``X | None``'s origin, found without importing ``types`` (not on the purity allowlist).
_UNION = typing.get_origin(int | None)

Encode = Callable[[Any], Any] | None  # None: the value travels as it is
Decode = Callable[[Any], Any]


def _refuse(what: str, expected: str, x: Any) -> ReplicationCodecError:
    return ReplicationCodecError(f"{what}: expected {expected}, got {x!r:.60}")


def _list(x: Any, what: str, length: int | None = None) -> list[Any]:
    if type(x) is not list or (length is not None and len(x) != length):
        raise _refuse(what, "a list" if length is None else f"a list of {length}", x)
    return x


class _Derivation:
    """Turns annotations into codecs under one set of limits."""

    def __init__(self, limits: CodecLimits) -> None:
        self.limits = limits

    def field(self, annotation: Any, what: str) -> tuple[Encode, Decode]:
        """The encoder and the checking decoder for one annotated field type."""
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if annotation is bool:
            return None, lambda x: _bool(x, what)
        if annotation is int:
            return None, lambda x: _int(x, what)
        if annotation is bytes:
            return None, self._bytes(what)
        if annotation is str:
            return None, self._host_id(what)
        if origin is Literal:
            return None, _literal(args, what)
        if origin is _UNION and len(args) == 2 and type(None) in args:
            (inner,) = [a for a in args if a is not type(None)]
            return _optional(*self.field(inner, what))
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return self._sequence(args[0], what)
        if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
            nested = self.cls(annotation, what)
            return nested.encode_fields, nested.decode_fields
        raise TypeError(f"{what}: no replication codec for {annotation!r}")

    def cls(self, cls: type[Any], what: str) -> _ClassCodec:
        hints = typing.get_type_hints(cls)
        names = tuple(f.name for f in dataclasses.fields(cls))
        codecs = [self.field(hints[name], f"{what}.{name}") for name in names]
        return _ClassCodec(
            what, cls, names, tuple(e for e, _ in codecs), tuple(d for _, d in codecs)
        )

    def _bytes(self, what: str) -> Decode:
        most = self.limits.data_bytes_max

        def decode(x: Any) -> bytes:
            if type(x) is not bytes or len(x) > most:
                raise _refuse(what, f"bytes of at most data_bytes_max ({most})", x)
            return x

        return decode

    def _host_id(self, what: str) -> Decode:
        # HostId is str, and the only strings these classes carry (beside their kinds,
        # which are Literals) are host ids.
        most = self.limits.host_id_chars_max

        def decode(x: Any) -> str:
            if type(x) is not str or not 0 < len(x) <= most:
                raise _refuse(what, f"a host id of 1 to host_id_chars_max ({most}) chars", x)
            return x

        return decode

    def _sequence(self, item: Any, what: str) -> tuple[Encode, Decode]:
        limit = _ITEMS_LIMIT.get(item)
        if limit is None:
            raise TypeError(f"{what}: no limit on a tuple of {item!r} (add it to _ITEMS_LIMIT)")
        most: int = getattr(self.limits, limit)
        enc, dec = self.field(item, f"{what}[]")

        def decode(x: Any) -> tuple[Any, ...]:
            items = _list(x, what)
            if len(items) > most:
                raise ReplicationCodecError(
                    f"{what}: {len(items)} items, more than {limit} ({most})"
                )
            return tuple([dec(i) for i in items])

        if enc is None:
            return list, decode
        return (lambda v: [enc(i) for i in v]), decode


def _bool(x: Any, what: str) -> bool:
    if type(x) is not bool:
        raise _refuse(what, "a boolean", x)
    return x


def _int(x: Any, what: str) -> int:
    if type(x) is not int or not 0 <= x < INT_END:
        raise _refuse(what, "an integer in [0, 2**63)", x)
    return x


def _literal(args: tuple[Any, ...], what: str) -> Decode:
    if not all(type(a) is str for a in args):
        raise TypeError(f"{what}: a Literal of strings only, not {args!r}")
    allowed = frozenset(args)

    def decode(x: Any) -> str:
        if type(x) is not str or x not in allowed:
            raise _refuse(what, f"one of {sorted(allowed)}", x)
        return x

    return decode


def _optional(enc: Encode, dec: Decode) -> tuple[Encode, Decode]:
    optional_enc = None if enc is None else (lambda v: None if v is None else enc(v))
    return optional_enc, lambda x: None if x is None else dec(x)


@dataclasses.dataclass(frozen=True, slots=True)
class _ClassCodec:
    """One class's fields as a list in field order, derived from its annotations."""

    what: str
    cls: type[Any]
    names: tuple[str, ...]
    encoders: tuple[Encode, ...]
    decoders: tuple[Decode, ...]

    def encode_fields(self, value: Any) -> list[Any]:
        out: list[Any] = []
        for name, enc in zip(self.names, self.encoders, strict=True):
            v = getattr(value, name)
            out.append(v if enc is None else enc(v))
        return out

    def decode_fields(self, x: Any) -> Any:
        fields = _list(x, self.what, len(self.decoders))
        values = [dec(v) for dec, v in zip(self.decoders, fields, strict=True)]
        try:
            return self.cls(*values)
        except ValueError as e:  # the class's own rules (__post_init__)
            raise ReplicationCodecError(f"{self.what}: {e!s:.200}") from None


class ReplicationCodec:
    """The codecs of every kind of :data:`MESSAGE_KINDS` under ``limits``, derived once."""

    def __init__(self, limits: CodecLimits | None = None) -> None:
        self.limits = limits or CodecLimits()
        derive = _Derivation(self.limits)
        self.by_kind: dict[str, _ClassCodec] = {}
        for cls in MESSAGE_KINDS:
            kind = getattr(cls, "kind", None)
            if type(kind) is not str or kind in self.by_kind:
                raise TypeError(f"{cls.__name__}: needs a kind of its own, not {kind!r}")
            self.by_kind[kind] = derive.cls(cls, kind)
        self._by_class = {codec.cls: codec for codec in self.by_kind.values()}

    def encode(self, message: Message) -> list[Any]:
        """``[kind, field, ...]``: plain values for msgpack (with ``use_bin_type``)."""
        codec = self._by_class.get(type(message))
        if codec is None:
            raise TypeError(f"not a replication message: {message!r:.80}")
        return [message.kind, *codec.encode_fields(message)]

    def decode(self, value: Any) -> Message:
        """The message ``value`` carries, checked; else :class:`ReplicationCodecError`."""
        if type(value) is not list or not value or type(value[0]) is not str:
            raise _refuse("message", "[kind, field, ...]", value)
        codec = self.by_kind.get(value[0])
        if codec is None:
            raise ReplicationCodecError(f"unknown replication message kind {value[0]!r:.40}")
        if len(value) - 1 != len(codec.decoders):
            raise ReplicationCodecError(
                f"{codec.what}: expected {len(codec.decoders)} fields, got {len(value) - 1}"
            )
        message: Message = codec.decode_fields(value[1:])
        return message


DEFAULT_CODEC = ReplicationCodec()


def encode_message(message: Message) -> list[Any]:
    return DEFAULT_CODEC.encode(message)


def decode_message(value: Any) -> Message:
    return DEFAULT_CODEC.decode(value)
