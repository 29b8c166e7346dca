"""Requests a client may send again: a retry gets the first attempt's outcome, never a
second effect (issue 11, item 5; as NATS de-duplicates by ``Msg-Id`` and Kafka's
idempotent producer by sequence number).

A client that names a session in its hello (``{"session": id}``) makes every request of
its own unique by ``(session, rid)``, across its connections.  When a connection breaks
in the middle of a request, the client cannot know whether it took effect; it reconnects
and sends the same request again:

- still running: the new connection takes over the first attempt (its reply goes there);
- finished: the stored reply is sent again, with the same results: an enqueue is not
  made twice, and the elements a dequeue removed are not lost with the broken reply;
- unknown (never arrived, or forgotten): it runs as new.

Finished requests are remembered, oldest forgotten first, up to
``retry_window_requests_max`` requests and ``retry_window_bytes_max`` bytes of results.
A retry that comes later than that runs again: the window bounds the time within which a
client must retry (see the README).  Elements forgotten here that no client received
count in ``dropped_results``.
"""

from __future__ import annotations

import marshal
import operator
import typing
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from skueue.host.results import RECORD_KINDS, Results

RetryKey = tuple[str, int]  # (client session, request id)

# Defaults of the runtime's limits of the same names.
RETRY_WINDOW_REQUESTS_MAX = 100_000
RETRY_WINDOW_BYTES_MAX = 64 * 1024 * 1024

# Bytes counted per finished request on top of its packed results: its entry in the
# window, its key and its record (measured with tracemalloc, test_retries.py).
REQUEST_OVERHEAD_BYTES = 240


@dataclass(slots=True)
class Finished:
    # The results, packed (:func:`pack`): a result as a Python object took about ten
    # times its packed size, and a window of enqueue results held that way was a third
    # of a durable daemon's memory.  Unpacked only for a retry.
    packed: bytes
    delivered: bool  # the reply went to a connected client at least once
    removed: int  # elements it removed (lost with it if never delivered)

    @property
    def bytes(self) -> int:
        return len(self.packed) + REQUEST_OVERHEAD_BYTES

    def results(self) -> Results:
        return unpack(self.packed)


@dataclass(slots=True)
class RetryWindow:
    requests_max: int = RETRY_WINDOW_REQUESTS_MAX
    bytes_max: int = RETRY_WINDOW_BYTES_MAX
    finished: OrderedDict[RetryKey, Finished] = field(default_factory=OrderedDict)
    bytes: int = 0

    def get(self, key: RetryKey) -> Finished | None:
        return self.finished.get(key)

    def finish(self, key: RetryKey, results: Results, delivered: bool, removed: int) -> int:
        """Remember a finished request; the elements lost by forgetting older ones that
        no client received."""
        finished = self.finished[key] = Finished(pack(results), delivered, removed)
        self.bytes += finished.bytes
        lost = 0
        while self.finished and (
            len(self.finished) > self.requests_max or self.bytes > self.bytes_max
        ):
            _, old = self.finished.popitem(last=False)
            self.bytes -= old.bytes
            if not old.delivered:
                lost += old.removed
        return lost


# -- packing ----------------------------------------------------------------------------
# In memory only (never stored or sent), so any compact form will do: ``marshal``'s,
# which is the interpreter's own, fast and pure.  Version 2, which has no references
# between objects: the packed size then depends on the values alone, and the window
# forgets the same requests when a replay fills it again.
_MARSHAL_VERSION = 2
_FIELDS = {kind: tuple(f.name for f in fields(kind)) for kind in RECORD_KINDS.values()}


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A record's fields as a tuple, at C speed."""
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda r: (one(r),)
    return operator.attrgetter(*names)


def _nesting(kind: type) -> tuple[int, ...]:
    """The fields of ``kind`` that may hold a record or a tuple (taken apart in a row)."""

    def nests(hint: Any) -> bool:
        return (is_dataclass(hint) or typing.get_origin(hint) is tuple
                or any(nests(a) for a in typing.get_args(hint)))  # fmt: skip

    hints = typing.get_type_hints(kind)
    return tuple(i for i, name in enumerate(_FIELDS[kind]) if nests(hints[name]))


_ROWS = {kind: _getter(names) for kind, names in _FIELDS.items()}
_NESTING = {kind: _nesting(kind) for kind in RECORD_KINDS.values()}


def pack(results: Results) -> bytes:
    """``(KIND, (field, ...), ...)``: the results' kind once (a request's are of one),
    then each result's fields; a record inside a field as ``[KIND, field, ...]``."""
    if not results:
        return marshal.dumps((), _MARSHAL_VERSION)
    kind = type(results[0])
    rows = list(map(_ROWS[kind], results))
    nesting = _NESTING[kind]
    if len(nesting) == 1:  # a removed element's lease: most often None
        (i,) = nesting
        rows = [row if row[i] is None else tuple(map(_plain, row)) for row in rows]
    elif nesting:
        rows = [tuple(map(_plain, row)) for row in rows]
    return marshal.dumps((kind.KIND, *rows), _MARSHAL_VERSION)


def unpack(packed: bytes) -> Results:
    plain = marshal.loads(packed)
    if not plain:
        return ()
    kind = RECORD_KINDS[plain[0]]
    return tuple(kind(*map(_record, row)) for row in plain[1:])


def _plain(value: Any) -> Any:
    names = _FIELDS.get(type(value))
    if names is not None:
        return [value.KIND, *[_plain(getattr(value, n)) for n in names]]
    if type(value) is tuple:
        return tuple(map(_plain, value))
    return value


def _record(value: Any) -> Any:
    if type(value) is list:
        return RECORD_KINDS[value[0]](*map(_record, value[1:]))
    if type(value) is tuple:
        return tuple(map(_record, value))
    return value
