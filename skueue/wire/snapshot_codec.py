"""A host's state as msgpack bytes and back, without pickle: the typed snapshot codec that
replication needs to ship a snapshot to a new replica (docs/replication.md, §7).

    data = encode_state(host, persistent={store: "entry-store"})
    host = decode_state(data, persistent={"entry-store": store})

Theory of operation
-------------------
Pickle rebuilds whatever class and calls whatever callable its bytes name, so nothing read
from the network may ever be unpickled.  This codec writes the same object graph as
pickle would, but its decoder builds only:

- None, bools, ints, floats, strings and bytes (msgpack's own), and lists, tuples,
  dicts (any hashable keys), sets, frozensets, deques (with their maxlen), arrays
  (typecode and little-endian bytes), Counters, OrderedDicts and bytearrays, each as
  ``[tag, ...]`` (:class:`Tag`);
- objects of the allowlist (:mod:`skueue.wire.snapshot_classes`: the host's dataclasses,
  enums and few plain classes), ``[OBJECT, class, field...]``, made as pickle makes them:
  ``object.__new__`` and the fields set one by one (slots and frozen dataclasses
  included), no ``__init__`` run; enums by class and value.

A class is named by an index into the document's table of class names, and every name
must be in the allowlist: the sender never names a module or a callable.

An object met again is written as ``[REF, n]``: the n-th object of the document, in the
order both sides meet them (a depth-first walk, as pickle's memo), so shared objects stay
shared (the three nodes of a process share their tickets) and cycles close.  An object
that is immutable once made (a tuple, a frozenset) cannot be referred to from inside
itself: the encoder refuses such a cycle, which a host never makes.

Objects the caller keeps out (the daemon's entry store, as pickle's ``persistent_id``
does) travel as ``[PERSISTENT, name]``, the caller's own object put back on decode.

The decoder checks every tag, class name, field count and, for dataclass fields, the
field's annotation (shallowly: :func:`skueue.wire.snapshot_classes.checker`); anything
wrong, malformed msgpack included, raises :class:`SnapshotCodecError` with the path of
what was wrong, never another exception.  Its limits (:class:`SnapshotLimits`) bound the
nesting depth, the values built and the input's size.

The document: ``["skueue-state", FORMAT_VERSION, [class name...], root]``.
"""

from __future__ import annotations

from array import array
from collections import deque
from enum import Enum
from itertools import chain
from operator import attrgetter
from typing import Any

import msgpack

from skueue.wire.snapshot_classes import BY_CLASS, ClassSpec
from skueue.wire.snapshot_decoder import decode_state
from skueue.wire.snapshot_format import (
    ARRAY_TYPECODES,
    BIG_ENDIAN,
    FORMAT_VERSION,
    MAGIC,
    MAPS,
    SCALARS,
    SEQUENCES,
    SnapshotCodecError,
    SnapshotLimits,
    Tag,
    scalars_only,
)

__all__ = ["SnapshotCodecError", "SnapshotLimits", "decode_state", "encode_state"]

_INT_LOW, _INT_HIGH = -(1 << 63), 1 << 64  # msgpack's ints

# -- encoding ---------------------------------------------------------------------------


def encode_state(
    obj: object,
    persistent: dict[Any, str] | None = None,
    limits: SnapshotLimits | None = None,
) -> bytes:
    """``obj`` (a host, or anything made of what the module docstring lists) as msgpack
    bytes; ``persistent``: objects left out, each by the name :func:`decode_state` is
    given it back under."""
    encoder = _Encoder(persistent or {}, limits or SnapshotLimits(), fast=True)
    try:
        root = encoder.value(obj, 0)
        return msgpack.packb([MAGIC, FORMAT_VERSION, encoder.names, root], use_bin_type=True)
    except OverflowError:  # an int beyond 64 bits inside a container taken whole
        encoder = _Encoder(persistent or {}, limits or SnapshotLimits(), fast=False)
        root = encoder.value(obj, 0)
        return msgpack.packb([MAGIC, FORMAT_VERSION, encoder.names, root], use_bin_type=True)


class _Encoder:
    def __init__(self, persistent: dict[Any, str], limits: SnapshotLimits, fast: bool) -> None:
        # id -> the object's number, or its persistent name (never a number: a str)
        self.memo: dict[int, int | str] = {id(o): name for o, name in persistent.items()}
        self.count = 0
        self.names: list[str] = []
        self.class_index: dict[type, int] = {}
        self.limits = limits
        self.fast = fast  # containers of scalars taken whole (False: every int checked)
        self.open: set[int] = set()  # the tuples and frozensets being written

    def value(self, obj: Any, depth: int) -> Any:
        kind = type(obj)
        if kind in SCALARS:
            if kind is int and not _INT_LOW <= obj < _INT_HIGH:
                return [Tag.BIG_INT, obj.to_bytes((obj.bit_length() + 8) // 8, "big", signed=True)]
            return obj
        if isinstance(obj, Enum):  # by value: the decoder looks the member up
            if type(obj.value) not in SCALARS:
                raise SnapshotCodecError(f"{obj!r:.60}: an enum whose value is no scalar")
            return [Tag.ENUM, self._class(kind), obj.value]
        seen = self.memo.get(id(obj))
        if seen is not None:
            if type(seen) is not int:
                return [Tag.PERSISTENT, seen]
            if id(obj) in self.open:
                raise SnapshotCodecError(
                    f"a {kind.__name__} that holds itself (a cycle through an immutable object)"
                )
            return [Tag.REF, seen]
        if depth >= self.limits.depth_max:
            raise SnapshotCodecError(f"deeper than depth_max={self.limits.depth_max}")
        self.memo[id(obj)] = self.count  # numbered as the decoder will meet it
        self.count += 1
        return self._container(obj, kind, depth + 1)

    def _container(self, obj: Any, kind: type, depth: int) -> Any:
        tag = SEQUENCES.get(kind)
        if tag is not None:
            if tag is Tag.TUPLE or tag is Tag.FROZENSET:  # made only once its items are
                self.open.add(id(obj))
                items = self._items(obj, depth)
                self.open.discard(id(obj))
                return [tag, items]
            return [tag, self._items(obj, depth)]
        tag = MAPS.get(kind)
        if tag is not None:
            if self.fast and scalars_only(chain(obj, obj.values())):  # one test, as decoded
                return [tag, list(obj), list(obj.values())]
            keys = self._items(obj.keys(), depth)
            try:
                return [tag, keys, self._items(obj.values(), depth)]
            except SnapshotCodecError as e:
                raise e.at_key(list(obj.keys())) from None
        if kind is deque:
            return [Tag.DEQUE, obj.maxlen, self._items(obj, depth)]
        if kind is array:
            if obj.typecode not in ARRAY_TYPECODES:
                raise SnapshotCodecError(f"an array of typecode {obj.typecode!r}")
            data = obj
            if BIG_ENDIAN:
                data = array(obj.typecode, obj)
                data.byteswap()
            return [Tag.ARRAY, obj.typecode, data.tobytes()]
        if kind is bytearray:
            return [Tag.BYTEARRAY, bytes(obj)]
        spec = BY_CLASS.get(kind)
        if spec is None:
            raise SnapshotCodecError(
                f"{kind.__module__}.{kind.__qualname__} is not a snapshot class"
            )
        _check_attributes(obj, spec)
        try:
            values = _getter(spec)(obj)
        except AttributeError as e:  # a slot never set: pickle would leave it out
            raise SnapshotCodecError(f"a {spec.name} without {e.name}") from None
        return [Tag.OBJECT, self._class(kind), *self._fields(values, spec, depth)]

    def _items(self, values: Any, depth: int) -> list[Any]:
        items = list(values)
        if self.fast and scalars_only(items):
            return items
        out = []
        for i, v in enumerate(items):
            try:
                plain = type(v) in SCALARS and (self.fast or type(v) is not int)
                out.append(v if plain else self.value(v, depth))
            except SnapshotCodecError as e:
                raise e.under(f"[{i}]") from None
        return out

    def _fields(self, values: tuple[Any, ...], spec: ClassSpec, depth: int) -> list[Any]:
        out = []
        for name, v in zip(spec.fields, values, strict=True):
            try:
                plain = type(v) in SCALARS and (self.fast or type(v) is not int)
                out.append(v if plain else self.value(v, depth))
            except SnapshotCodecError as e:
                raise e.under(f".{name}") from None
        return out

    def _class(self, kind: type) -> int:
        index = self.class_index.get(kind)
        if index is None:
            if kind not in BY_CLASS:
                raise SnapshotCodecError(f"{kind.__qualname__} is not a snapshot class")
            index = self.class_index[kind] = len(self.names)
            self.names.append(kind.__name__)
        return index


_GETTERS: dict[str, Any] = {}


def _getter(spec: ClassSpec) -> Any:
    getter = _GETTERS.get(spec.name)
    if getter is None:
        one = attrgetter(*spec.fields) if spec.fields else (lambda o: ())
        getter = one if len(spec.fields) != 1 else (lambda o: (one(o),))
        _GETTERS[spec.name] = getter
    return getter


def _check_attributes(obj: Any, spec: ClassSpec) -> None:
    """An object holds exactly its class's fields, or part of it would be lost."""
    attributes = getattr(obj, "__dict__", None)
    if attributes is not None and len(attributes) != len(spec.fields):
        extra = sorted(set(attributes) - set(spec.fields))
        missing = sorted(set(spec.fields) - set(attributes))
        raise SnapshotCodecError(
            f"a {spec.name} with attributes {extra} the codec does not know and without "
            f"{missing} (skueue/wire/snapshot_classes.py lists what it writes)"
        )
