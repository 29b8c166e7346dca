"""The input log's records: one host input (:mod:`skueue.host.inputs`) each, encoded by a
codec derived from the input classes.

A record is ``[tag, field, field, ...]``: the class's ``tag``, then its fields in the
order they are declared, each by the encoder its annotation picks (plain values as
they are; a node kind as its number; a protocol message by the peer codec; a client
request by the client codec).  :func:`record_of` writes records, :func:`input_of` reads
them; nothing else does.  A record this version cannot read (another version's) raises
:class:`UnreadableRecord`, which the daemon turns into one line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skueue.core.errors import RemoteProtocolError
from skueue.host.inputs import INPUT_KINDS, Input
from skueue.host.replies import ErrorReply
from skueue.overlay.labels import Kind
from skueue.wire.client_codec import decode_request, encode_request
from skueue.wire.peer import decode_message, encode_message


class UnreadableRecord(ValueError):
    """A log record this version cannot read back."""


@dataclass(frozen=True)
class _LogLimits:
    """The limits a logged request is read back under: none (it was checked when it
    arrived, against the limits of the day)."""

    value_bytes_max: int = 1 << 62
    ops_per_request_max: int = 1 << 62
    frame_bytes_max: int = 1 << 62


def _request_of(x: Any) -> Any:
    request = decode_request(x, _LogLimits())
    if isinstance(request, ErrorReply):
        raise UnreadableRecord(f"a logged request: {request.message}")
    return request


Encode = Callable[[Any], Any]
_PLAIN: tuple[Encode, Encode] = (lambda x: x, lambda x: x)
_BY_TYPE: dict[str, tuple[Encode, Encode]] = {
    "Kind": (int, Kind),
    "Message | MembershipMessage": (encode_message, decode_message),
    "ClientRequest": (encode_request, _request_of),
}
"""Encoders and decoders of the field types that are not plain msgpack values, by the
annotation's text (the classes use postponed annotations)."""


@dataclass(frozen=True)
class _Codec:
    kind: type
    names: tuple[str, ...]
    encoders: tuple[Encode, ...]
    decoders: tuple[Encode, ...]


def _codec(kind: type) -> _Codec:
    fields = [f for f in dataclasses.fields(kind) if f.name != "encoded"]
    pairs = [_BY_TYPE.get(str(f.type), _PLAIN) for f in fields]
    return _Codec(kind, tuple(f.name for f in fields), tuple(p[0] for p in pairs),
                  tuple(p[1] for p in pairs))  # fmt: skip


_CODECS = {tag: _codec(kind) for tag, kind in INPUT_KINDS.items()}


def record_of(item: Input) -> list[Any]:
    """The log record of ``item`` (a protocol message that came with its wire form is
    logged in it, not encoded again)."""
    codec = _CODECS[item.tag]
    values = [item.tag]
    for name, encode in zip(codec.names, codec.encoders, strict=True):
        if name == "message" and getattr(item, "encoded", None) is not None:
            values.append(item.encoded)  # type: ignore[union-attr]
        else:
            values.append(encode(getattr(item, name)))
    return values


def input_of(record: Any) -> Input:
    """The input a record holds; :class:`UnreadableRecord` if it is none this version
    writes."""
    if not isinstance(record, list) or not record or type(record[0]) is not str:
        raise UnreadableRecord(f"not a record: {record!r:.80}")
    codec = _CODECS.get(record[0])
    if codec is None or len(record) != len(codec.names) + 1:
        raise UnreadableRecord(f"a record this version cannot replay: {record!r:.80}")
    try:
        values = [decode(x) for decode, x in zip(codec.decoders, record[1:], strict=True)]
        item: Input = codec.kind(*values)
    except (TypeError, ValueError, RemoteProtocolError) as e:
        raise UnreadableRecord(
            f"a record this version cannot replay ({e}): {record!r:.80}"
        ) from None
    return item

