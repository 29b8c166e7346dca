"""The replication messages <-> plain values (lists, ints, bytes, strings, bools, None)
that msgpack packs; derived from the classes, every field checked on the way in.

A message travels as ``[kind, field, ...]`` in its class's field order (``kind`` is the
class's ``kind``); an entry as ``[term, kind, data, config]``; a configuration as
``[voters, learners]``.  Nothing here names a field: the field annotations of the
classes in :data:`~skueue.replication.messages.MESSAGE_KINDS` are turned, once at
import, into one encoder and one checking decoder per field (the way ``wire/peer.py``
derives the peer codec).  A value of the wrong type, out of range, over a limit, or a
configuration or entry the classes refuse becomes one :class:`ReplicationCodecError`
naming the field, raised before anything is built: a peer's bad message is its fault,
never a crash.  No pickle, ever.

The module is pure like the rest of the package: the caller packs and unpacks.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any

from skueue.replication.config import Config
from skueue.replication.messages import ENTRY_KINDS, MESSAGE_KINDS, Entry, EntryKind, Message

INT_MAX = 1 << 63
"""Indexes and terms are below this (msgpack's signed 64-bit range)."""
HOST_ID_CHARS_MAX = 256
"""A replica's id: its host id and data-directory nonce, well under this."""
CONFIG_HOSTS_MAX = 64
"""Voters and learners of one group, each (a group has 3 or 5)."""
ENTRIES_PER_MESSAGE_MAX = 65_536
"""Entries in one append (the leader sends at most ``append_bytes_max`` of them)."""
DATA_BYTES_MAX = 64 << 20
"""One entry's data, or one snapshot's: a frame is bounded before it is decoded too."""


class ReplicationCodecError(ValueError):
    """A replication message that does not decode: the sender's fault."""


Decode = Callable[[Any], Any]
Encode = Callable[[Any], Any]


def _int(what: str) -> Decode:
    def decode(x: Any) -> int:
        if type(x) is not int or not 0 <= x < INT_MAX:
            raise ReplicationCodecError(f"{what}: not an integer in [0, 2**63): {x!r:.60}")
        return x
    return decode


def _bool(what: str) -> Decode:
    def decode(x: Any) -> bool:
        if type(x) is not bool:
            raise ReplicationCodecError(f"{what}: not a boolean: {x!r:.60}")
        return x
    return decode


def _bytes(what: str) -> Decode:
    def decode(x: Any) -> bytes:
        if type(x) is not bytes or len(x) > DATA_BYTES_MAX:
            raise ReplicationCodecError(
                f"{what}: not bytes of at most {DATA_BYTES_MAX}: {type(x).__name__}")
        return x
    return decode


def _host(what: str) -> Decode:
    def decode(x: Any) -> str:
        if type(x) is not str or not 0 < len(x) <= HOST_ID_CHARS_MAX:
            raise ReplicationCodecError(
                f"{what}: not a host id of 1 to {HOST_ID_CHARS_MAX} characters: {x!r:.60}")
        return x
    return decode


def _list(x: Any, what: str, most: int) -> list[Any]:
    if type(x) is not list or len(x) > most:
        raise ReplicationCodecError(f"{what}: not a list of at most {most}: {x!r:.60}")
    return x


def encode_config(config: Config) -> list[Any]:
    return [list(config.voters), list(config.learners)]


def decode_config(x: Any, what: str = "config") -> Config:
    voters, learners = _fields(x, what, 2)
    host = _host(f"{what} host")
    ids = [tuple(host(h) for h in _list(v, f"{what} {part}", CONFIG_HOSTS_MAX))
           for v, part in ((voters, "voters"), (learners, "learners"))]
    try:
        return Config(ids[0], ids[1])
    except ValueError as e:
        raise ReplicationCodecError(f"{what}: {e}") from None


def encode_entry(entry: Entry) -> list[Any]:
    config = None if entry.config is None else encode_config(entry.config)
    return [entry.term, entry.kind, entry.data, config]


def decode_entry(x: Any, what: str = "entry") -> Entry:
    term, kind, data, config = _fields(x, what, 4)
    if kind not in ENTRY_KINDS or type(kind) is not str:
        raise ReplicationCodecError(f"{what} kind: not one of {ENTRY_KINDS}: {kind!r:.60}")
    if (config is None) != (kind != "config"):
        raise ReplicationCodecError(f"{what}: a config entry, and only one, has a config")
    return Entry(_int(f"{what} term")(term), typing.cast(EntryKind, kind),
                 _bytes(f"{what} data")(data),
                 None if config is None else decode_config(config, f"{what} config"))


def _entries(what: str) -> Decode:
    def decode(x: Any) -> tuple[Entry, ...]:
        items = _list(x, what, ENTRIES_PER_MESSAGE_MAX)
        return tuple(decode_entry(e, f"{what}[{i}]") for i, e in enumerate(items))
    return decode


def _fields(x: Any, what: str, count: int) -> list[Any]:
    if type(x) is not list or len(x) != count:
        raise ReplicationCodecError(f"{what}: not a list of {count} fields: {x!r:.60}")
    return x


def _field_codec(annotation: Any, what: str) -> tuple[Encode | None, Decode]:
    """The encoder (None: the value travels as it is) and checking decoder of a field."""
    if annotation is int:
        return None, _int(what)
    if annotation is bool:
        return None, _bool(what)
    if annotation is bytes:
        return None, _bytes(what)
    if annotation is Config:
        return encode_config, lambda x: decode_config(x, what)
    if annotation == tuple[Entry, ...]:
        return (lambda es: [encode_entry(e) for e in es]), _entries(what)
    raise TypeError(f"no codec for {what}: {annotation!r}")  # a new field type: add one


_ENCODERS: dict[type, list[Encode | None]] = {}
_DECODERS: dict[str, tuple[type, list[Decode]]] = {}
for _cls in MESSAGE_KINDS:
    _hints = typing.get_type_hints(_cls)
    _codecs = [_field_codec(_hints[f.name], f"{_cls.kind} {f.name}")  # type: ignore[attr-defined]
               for f in dataclasses.fields(_cls)]
    _ENCODERS[_cls] = [enc for enc, _ in _codecs]
    _DECODERS[_cls.kind] = (_cls, [dec for _, dec in _codecs])  # type: ignore[attr-defined]


def encode_message(message: Message) -> list[Any]:
    """``[kind, field, ...]``: plain values for msgpack."""
    out: list[Any] = [message.kind]
    for encode, field in zip(_ENCODERS[type(message)], dataclasses.fields(message),
                             strict=True):
        value = getattr(message, field.name)
        out.append(value if encode is None else encode(value))
    return out


def decode_message(value: Any) -> Message:
    """The message ``value`` encodes; :class:`ReplicationCodecError` if it is not one."""
    if type(value) is not list or not value:
        raise ReplicationCodecError(f"not a replication message: {value!r:.60}")
    kind = value[0]
    known = _DECODERS.get(kind) if type(kind) is str else None
    if known is None:
        raise ReplicationCodecError(f"unknown replication message kind: {kind!r:.60}")
    cls, decoders = known
    if len(value) != len(decoders) + 1:
        raise ReplicationCodecError(
            f"{kind}: {len(value) - 1} fields, not {len(decoders)}")
    return cls(*(decode(x) for decode, x in zip(decoders, value[1:], strict=True)))
