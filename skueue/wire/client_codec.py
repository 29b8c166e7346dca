"""The client protocol's codec, derived from the classes of :mod:`skueue.host`.

Nothing here names a request, a reply or a field.  For every class in
:data:`~skueue.host.requests.REQUEST_CLASSES`, :data:`~skueue.host.replies.REPLY_CLASSES`
and :data:`~skueue.host.results.RESULT_KINDS`, the field annotations (with the markers of
:mod:`skueue.core.messages.field_types` and :mod:`skueue.host.requests`) are turned once,
at import, into one encoder and one checking decoder per field, as :mod:`skueue.wire.peer`
does for the peer messages.  Writing a new request is writing its class.

The wire forms (the frames are listed in :mod:`skueue.wire.client_protocol`):

- a request: ``[KIND, rid, required fields..., {optional fields}]``, the optional ones
  (those with a default) by name, only those not at their default, the map left out
  when empty;
- a reply: ``[KIND, field, ...]``; a result: ``[field, ...]``; both without their trailing
  fields at their defaults;
- a reply's results: ``[result KIND, result, ...]``, or ``[]``.

Decoding a request checks every field and tells apart what ends the connection (a
:class:`~skueue.core.errors.RemoteProtocolError`: garbage) from what is answered alone (an
:class:`~skueue.host.replies.ErrorReply`, ``invalid`` or ``too-large``), as the markers say.
Decoding a reply raises :class:`~skueue.core.errors.RemoteProtocolError` for anything
that is not one.
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Callable
from typing import Any

import msgpack

from skueue.core.errors import RemoteProtocolError
from skueue.core.messages.field_types import INT_MAX, Items, QueueNameRule, Range
from skueue.core.ops import queue_name_problem
from skueue.host.replies import (
    INVALID,
    REPLY_CLASSES,
    TOO_LARGE,
    Done,
    ErrorReply,
    More,
    Reply,
    Results,
)
from skueue.host.requests import REQUEST_CLASSES, Answered, ClientRequest, EachUpTo, UpTo
from skueue.host.results import RESULT_KINDS, Removed, Result
from skueue.wire.client_protocol import REPLY_OVERHEAD_BYTES, RequestLimits

Limits = RequestLimits | None
Encode = Callable[[Any], Any] | None  # None: the value travels as it is
Decode = Callable[[Any, Limits], Any]


class _Problem(Exception):
    """A field's value is wrong: of the wrong type (``shape``) or out of its range."""

    def __init__(self, message: str, shape: bool) -> None:
        super().__init__(message)
        self.message, self.shape = message, shape


class _Answer(Exception):
    """A bad field that is answered alone (``code``); the connection serves on."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


_UNIONS = (types.UnionType, typing.Union)  # X | Y, and Optional[Annotated[...]]


def _split(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    if typing.get_origin(annotation) is typing.Annotated:
        base, *markers = typing.get_args(annotation)
        return base, tuple(markers)
    return annotation, ()


def _marker(markers: tuple[Any, ...], kind: type[Any]) -> Any:
    return next((m for m in markers if isinstance(m, kind)), None)


def field_codec(annotation: Any, kind: str, name: str) -> tuple[Encode, Decode]:
    """The encoder and the checking decoder of one field of a request, reply or result
    (``kind``'s field ``name``): they raise :class:`RemoteProtocolError` or, where the
    markers say so, :class:`_Answer`."""
    base, markers = _split(annotation)
    origin, args = typing.get_origin(base), typing.get_args(base)
    if origin in _UNIONS and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        enc, dec = field_codec(inner, kind, name)
        return _optional(enc), lambda x, limits: None if x is None else dec(x, limits)
    if any(isinstance(m, QueueNameRule) for m in markers):
        return None, _queue_name(kind)
    if _is_results(base):
        return _results_codec(kind, name)
    enc, dec = _value_codec(base, markers, kind, name)
    answered = _marker(markers, Answered)
    strict = answered is None

    def checked(x: Any, limits: Limits) -> Any:
        try:
            return dec(x, limits)
        except _Problem as p:
            if strict or (p.shape and not answered.types):
                raise RemoteProtocolError(p.message) from None
            raise _Answer(INVALID, p.message) from None

    return enc, checked


def _optional(enc: Encode) -> Encode:
    if enc is None:
        return None
    return lambda v: None if v is None else enc(v)


def _queue_name(kind: str) -> Decode:
    """A queue name: always answered (it is the user's, not the client's, to get right)."""

    def decode(x: Any, limits: Limits) -> str:
        problem = queue_name_problem(x)
        if problem is not None:
            raise _Answer(INVALID, f"{kind}: {problem}")
        return typing.cast(str, x)

    return decode


def _value_codec(
    base: Any, markers: tuple[Any, ...], kind: str, name: str
) -> tuple[Encode, Decode]:
    """A value's codec, raising :class:`_Problem` (the caller decides its blame)."""
    what = f"{kind}: {name}"
    origin, args = typing.get_origin(base), typing.get_args(base)
    if base is bool:

        def decode_bool(x: Any, limits: Limits) -> bool:
            if type(x) is not bool:
                raise _Problem(f"{what} must be true or false", True)
            return x

        return None, decode_bool
    if base is int:
        return None, _int_codec(markers, kind, name)
    if base is bytes or base is str:
        return None, _text_codec(base, markers, what)
    if origin is typing.Literal:
        allowed = frozenset(args)
        shown = ", ".join(repr(a) for a in args)

        def decode_choice(x: Any, limits: Limits) -> Any:
            if type(x) is not str or x not in allowed:
                raise _Problem(f"{what} must be one of {shown}, not {x!r:.30}", True)
            return x

        return None, decode_choice
    if base is dict or origin is dict:

        def decode_map(x: Any, limits: Limits) -> dict[str, Any]:
            if type(x) is not dict or not all(type(k) is str for k in x):
                raise _Problem(f"{what} must be a map", True)
            return x

        return None, decode_map
    if base is typing.Any:
        return None, lambda x, limits: x
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _sequence_codec(args[0], markers, kind, name)
    if dataclasses.is_dataclass(base):
        record = RecordCodec.of(typing.cast(type[Any], base))
        return record.encode, lambda x, limits: record.decode(x)
    raise TypeError(f"{what}: no client wire codec for {base!r}")


def _int_codec(markers: tuple[Any, ...], kind: str, name: str) -> Decode:
    bounds = _marker(markers, Range) or Range()
    low, high = bounds.low, bounds.high
    up_to: UpTo | None = _marker(markers, UpTo)

    def describe(limits: Limits) -> str:
        if up_to is not None and limits is not None:
            return f"an integer from {low} to {getattr(limits, up_to.limit)}"
        if high == INT_MAX:
            return "a non-negative integer" if low == 0 else f"an integer of at least {low}"
        return f"an integer from {low} to {high - 1}"

    def decode(x: Any, limits: Limits) -> int:
        if type(x) is not int or not low <= x < high:
            message = f"{kind}: {name} must be {describe(limits)}"
            raise _Problem(message, type(x) is not int)
        if up_to is not None and limits is not None and x > getattr(limits, up_to.limit):
            top = getattr(limits, up_to.limit)
            raise _Answer(TOO_LARGE, f"{kind}: a {name} of {x} exceeds the limit of {top}")
        return x

    return decode


def _text_codec(base: type[Any], markers: tuple[Any, ...], what: str) -> Decode:
    """bytes, or a string (with ``Items``: of that many characters)."""
    length = _marker(markers, Items)
    noun = "bytes" if base is bytes else "a string"
    if length is not None:
        noun += f" of {length.least} to {length.most} characters"

    def decode(x: Any, limits: Limits) -> Any:
        if type(x) is not base:
            raise _Problem(f"{what} must be {noun}, got {type(x).__name__}", True)
        if length is not None and not length.least <= len(x) <= length.most:
            raise _Problem(f"{what} must be {noun}", False)
        return x

    return decode


def _sequence_codec(
    item: Any, markers: tuple[Any, ...], kind: str, name: str
) -> tuple[Encode, Decode]:
    """A tuple field: a list on the wire.  Its items' problems are the list's shape."""
    count = _marker(markers, Items) or Items()
    up_to: UpTo | None = _marker(markers, UpTo)
    each: EachUpTo | None = _marker(markers, EachUpTo)
    item_enc, item_dec = _value_codec(*_split(item), kind, name)
    plain = item in (bytes, str) and item_enc is None  # checked by type alone, at speed
    if count.least == 1 and count.most == INT_MAX:
        expected = f"{kind}: expected a non-empty list of {name}"
    elif count.most == INT_MAX:
        expected = f"{kind}: expected a list of {name}"
    else:
        expected = f"{kind}: expected a list of {count.least} to {count.most} {name}"

    def decode(x: Any, limits: Limits) -> tuple[Any, ...]:
        if type(x) is not list:
            raise _Problem(expected, True)
        if not count.least <= len(x) <= count.most:
            raise _Problem(expected, False)
        if plain and all(type(i) is item for i in x):
            items = tuple(x)
        else:
            try:
                items = tuple(item_dec(i, limits) for i in x)
            except _Problem as p:
                raise _Problem(p.message, True) from None
        if limits is not None and up_to is not None:
            top = getattr(limits, up_to.limit)
            if len(items) > top:
                raise _Answer(TOO_LARGE, f"{kind}: {len(items)} {name} exceed the limit of {top}")
        if limits is not None and each is not None:
            top = getattr(limits, each.limit)
            largest = max(len(i) for i in items)
            if largest > top:
                message = f"{kind}: a {each.noun} of {largest} bytes exceeds the limit of {top}"
                raise _Answer(TOO_LARGE, message)
        return items

    if item_enc is None:
        return list, decode
    return (lambda v: [item_enc(i) for i in v]), decode


def _is_results(base: Any) -> bool:
    """``tuple[Result, ...]``: a reply's results (records of one kind, tagged once)."""
    args = typing.get_args(base)
    return (
        typing.get_origin(base) is tuple
        and len(args) == 2
        and args[1] is Ellipsis
        and typing.get_origin(args[0]) in _UNIONS
        and all(dataclasses.is_dataclass(a) for a in typing.get_args(args[0]))
    )


def _results_codec(kind: str, name: str) -> tuple[Encode, Decode]:
    def decode(x: Any, limits: Limits) -> Results:
        if type(x) is not list:
            raise RemoteProtocolError(f"{kind}: {name} must be a list")
        return decode_results(x)

    return encode_results, decode


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields of these names as a tuple, at C speed."""
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda r: (one(r),)
    if not names:
        return lambda r: ()
    return operator.attrgetter(*names)


@dataclasses.dataclass(frozen=True, slots=True)
class RecordCodec:
    """A reply's or a result's wire form, derived from its fields: ``[field, ...]``,
    without its trailing fields at their defaults."""

    cls: type[Any]
    names: tuple[str, ...]
    encoders: tuple[Encode, ...]
    decoders: tuple[Decode, ...]
    required: int  # fields without a default, all first
    defaults: tuple[Any, ...]  # of the others
    values: Callable[[Any], tuple[Any, ...]]  # a record's fields, in order (at C speed)
    plain: int  # how many fields, from the first, travel as they are (no encoder)
    head: Callable[[Any], tuple[Any, ...]]  # its fields without a default
    # The others (one: its value; several: a tuple), when every default is None.
    tail: Callable[[Any], Any] | None

    @classmethod
    def of(cls, record: type[Any]) -> RecordCodec:
        hints = typing.get_type_hints(record, include_extras=True)
        fields = dataclasses.fields(record)
        kind = typing.cast(str, getattr(record, "KIND", record.__name__))
        codecs = [field_codec(hints[f.name], kind, f.name) for f in fields]
        defaults = tuple(f.default for f in fields if f.default is not dataclasses.MISSING)
        names = tuple(f.name for f in fields)
        required = len(fields) - len(defaults)
        return cls(
            record, names,
            tuple(enc for enc, _ in codecs),
            tuple(dec for _, dec in codecs),
            required, defaults, _getter(names),
            next((i for i, (enc, _) in enumerate(codecs) if enc is not None), len(codecs)),
            _getter(names[:required]),
            operator.attrgetter(*names[required:])
            if defaults and all(d is None for d in defaults) else None,
        )  # fmt: skip

    def encode_all(self, records: tuple[Any, ...]) -> list[list[Any]]:
        """:meth:`encode` of each; at C speed when none of them needs more than its
        plain, required fields (every result a request has but a leased remove's)."""
        if self.plain >= self.required:
            if self.required == len(self.names):
                return list(map(list, map(self.values, records)))
            if self.tail is not None:
                tails = list(map(self.tail, records))
                unset = None if len(self.defaults) == 1 else (None,) * len(self.defaults)
                if tails.count(unset) == len(tails):
                    return list(map(list, map(self.head, records)))
        return list(map(self.encode, records))

    def encode(self, r: Any) -> list[Any]:
        values = self.values(r)
        n, required, defaults = len(values), self.required, self.defaults
        while n > required and values[n - 1] == defaults[n - 1 - required]:
            n -= 1
        if n < len(values):
            values = values[:n]
        if n <= self.plain:
            return list(values)
        return [v if enc is None else enc(v) for enc, v in zip(self.encoders, values)]  # noqa: B905

    def decode(self, x: Any) -> Any:
        if type(x) is not list or not self.required <= len(x) <= len(self.names):
            raise RemoteProtocolError(
                f"{self.cls.__name__}: expected a list of {self.required} to "
                f"{len(self.names)} fields, got {x!r:.60}"
            )
        try:
            return self.cls(*[dec(v, None) for dec, v in zip(self.decoders, x, strict=False)])
        except _Answer as a:  # no reply or result field is answered: all are the sender's
            raise RemoteProtocolError(a.message) from None


_RECORDS: dict[type[Any], RecordCodec] = {c: RecordCodec.of(c) for c in RESULT_KINDS.values()}


def encode_results(results: Results) -> list[Any]:
    """A request's results for the wire: ``[KIND, result, ...]`` (``[]``: none)."""
    if not results:
        return []
    record = type(results[0])
    kinds = set(map(type, results))
    if len(kinds) > 1:  # our bug: a request's results are of one kind
        raise TypeError(f"results of several kinds: {sorted(k.__name__ for k in kinds)}")
    return [typing.cast(Any, record).KIND, *_RECORDS[record].encode_all(results)]


def decode_results(x: list[Any]) -> Results:
    if not x:
        return ()
    record = RESULT_KINDS.get(x[0]) if type(x[0]) is str else None
    if record is None:
        raise RemoteProtocolError(f"results: unknown kind {x[0]!r:.30}")
    codec = _RECORDS[record]
    return tuple(codec.decode(r) for r in x[1:])


_REPLIES: dict[str, RecordCodec] = {c.KIND: RecordCodec.of(c) for c in REPLY_CLASSES}
_REPLY_KINDS: dict[type[Any], str] = {codec.cls: kind for kind, codec in _REPLIES.items()}


def encode_reply(reply: Reply) -> list[Any]:
    return [_REPLY_KINDS[type(reply)], *_REPLIES[reply.KIND].encode(reply)]


def decode_reply(frame: Any) -> Reply:
    """The reply a frame carries; :class:`RemoteProtocolError` when it is none."""
    if type(frame) is not list or not frame or type(frame[0]) is not str:
        raise RemoteProtocolError(f"unexpected reply {frame!r:.60}")
    codec = _REPLIES.get(frame[0])
    if codec is None:
        raise RemoteProtocolError(f"unexpected reply {frame!r:.60}")
    reply: Reply = codec.decode(frame[1:])
    return reply


# -- requests ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class RequestCodec:
    """One request class's wire form, derived from its fields."""

    cls: type[Any]
    kind: str
    required: tuple[tuple[str, Encode, Decode], ...]  # after the rid, in order
    optional: dict[str, tuple[Encode, Decode, Any]]  # by name: with its default
    not_a_map: str  # what is said of a bad map

    @classmethod
    def of(cls, request: type[Any]) -> RequestCodec:
        hints = typing.get_type_hints(request, include_extras=True)
        fields = dataclasses.fields(request)
        if fields[0].name != "rid":
            raise TypeError(f"{request.__name__}: a request's first field is its rid")
        kind: str = request.KIND
        required, optional = [], {}
        for f in fields[1:]:
            enc, dec = field_codec(hints[f.name], kind, f.name)
            if f.default is dataclasses.MISSING:
                required.append((f.name, enc, dec))
            else:
                optional[f.name] = (enc, dec, f.default)
        place = len(required) + 3
        ordinal = {3: "3rd", 4: "4th", 5: "5th"}.get(place, f"{place}th")
        names = ", ".join(f'"{n}"' for n in sorted(optional))
        return cls(request, kind, tuple(required), optional,
                   f"{kind}: the {ordinal} field is a map of {names}")  # fmt: skip

    def fits(self, length: int) -> bool:
        n = len(self.required) + 2
        return length == n or (length == n + 1 and bool(self.optional))

    def encode(self, request: Any) -> list[Any]:
        out: list[Any] = [self.kind, request.rid]
        for name, enc, _ in self.required:
            value = getattr(request, name)
            out.append(value if enc is None else enc(value))
        options = {}
        for name, (enc, _, default) in self.optional.items():
            value = getattr(request, name)
            if value is not None and value != default:
                options[name] = value if enc is None else enc(value)
        if options:
            out.append(options)
        return out

    def decode(self, frame: list[Any], limits: RequestLimits) -> Any:
        rid = frame[1]
        values: dict[str, Any] = {}
        answer: _Answer | None = None
        n = len(self.required) + 2
        for (name, _, dec), x in zip(self.required, frame[2:n], strict=True):
            try:
                values[name] = dec(x, limits)
            except _Answer as a:
                answer = answer or a
        if len(frame) > n:
            options = frame[n]
            if type(options) is not dict or not options.keys() <= self.optional.keys():
                raise RemoteProtocolError(self.not_a_map)
            for name, x in options.items():
                if x is None:
                    continue  # as if left out
                try:
                    values[name] = self.optional[name][1](x, limits)
                except _Answer as a:
                    answer = answer or a
        if answer is not None:
            return ErrorReply(rid, answer.message, answer.code)
        request = self.cls(rid, **values)
        problem = request.problem() if hasattr(request, "problem") else None
        if problem is not None:
            return ErrorReply(rid, f"{self.kind}: {problem}", INVALID)
        return request


_REQUESTS: dict[str, RequestCodec] = {c.KIND: RequestCodec.of(c) for c in REQUEST_CLASSES}
_REQUEST_KINDS: dict[type[Any], RequestCodec] = {c.cls: c for c in _REQUESTS.values()}
_RID_MAX = 1 << 63


def encode_request(request: ClientRequest) -> list[Any]:
    return _REQUEST_KINDS[type(request)].encode(request)


def decode_request(frame: Any, limits: RequestLimits) -> ClientRequest | ErrorReply:
    """The request in ``frame``, or the :class:`~skueue.host.replies.ErrorReply` that
    answers a bad one alone; anything malformed raises :class:`RemoteProtocolError`
    (the connection ends)."""
    if type(frame) is not list or not frame or type(frame[0]) is not str:
        raise RemoteProtocolError("request: expected [kind, rid, ...]")
    kind = frame[0]
    if len(frame) < 2 or type(frame[1]) is not int or not 0 <= frame[1] < _RID_MAX:
        raise RemoteProtocolError(f"{kind!r:.30}: the request id must be a non-negative integer")
    codec = _REQUESTS.get(kind)
    if codec is None or not codec.fits(len(frame)):
        raise RemoteProtocolError(f"unknown request {kind!r:.30} with {len(frame)} fields")
    decoded: ClientRequest | ErrorReply = codec.decode(frame, limits)
    return decoded


# -- replies on the wire ------------------------------------------------------------------


def reply_frames(reply: Done, frame_bytes_max: int) -> list[More | Done]:
    """A ``done`` reply as zero or more ``more`` replies and one ``done``, each within
    ``frame_bytes_max`` once encoded (a single result larger than that goes alone)."""
    budget = frame_bytes_max - REPLY_OVERHEAD_BYTES
    parts: list[list[Result]] = [[]]
    size = 0
    for result in reply.results:
        n = len(msgpack.packb(_RECORDS[type(result)].encode(result), use_bin_type=True))
        if parts[-1] and size + n > budget:
            parts.append([])
            size = 0
        parts[-1].append(result)
        size += n
    pieces: list[More | Done] = [More(reply.rid, tuple(p)) for p in parts[:-1]]
    return [*pieces, Done(reply.rid, tuple(parts[-1]))]


def reply_elements(reply: object) -> int:
    """Removed elements a reply carries (a remove's or a peek's results with a value)."""
    if not isinstance(reply, More | Done):
        return 0
    return sum(1 for r in reply.results if type(r) is Removed and r.value is not None)
