"""The snapshot codec's decoder (:mod:`skueue.wire.snapshot_codec` says what it does):
msgpack bytes back into a host's state, every tag, class, field count and field type
checked, anything wrong one :class:`SnapshotCodecError` naming where."""

from __future__ import annotations

from array import array
from collections import Counter, OrderedDict, deque
from itertools import chain
from typing import Any

import msgpack

from skueue.wire.snapshot_classes import CLASSES, ClassSpec
from skueue.wire.snapshot_format import (
    ARRAY_TYPECODES,
    BIG_ENDIAN,
    FORMAT_VERSION,
    MAGIC,
    SCALARS,
    SnapshotCodecError,
    SnapshotLimits,
    Tag,
    scalars_only,
)


def decode_state(
    data: bytes,
    persistent: dict[str, Any] | None = None,
    limits: SnapshotLimits | None = None,
) -> Any:
    """What :func:`encode_state` wrote, rebuilt; ``persistent``: the objects it left out,
    by name.  Anything else raises :class:`SnapshotCodecError` (module docstring)."""
    limits = limits or SnapshotLimits()
    if not isinstance(data, bytes | bytearray | memoryview):
        raise SnapshotCodecError(f"expected bytes, got {type(data).__name__}")
    if len(data) > limits.data_bytes_max:
        raise SnapshotCodecError(f"{len(data)} bytes, over data_bytes_max={limits.data_bytes_max}")
    try:
        document = msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=False)
    except Exception as e:  # msgpack's many errors: all one to the caller
        raise SnapshotCodecError(f"not msgpack ({type(e).__name__}: {e})"[:200]) from None
    if (
        type(document) is not list
        or len(document) != 4
        or document[0] != MAGIC
        or type(document[0]) is not str
    ):
        raise SnapshotCodecError(f"not a snapshot (expected [{MAGIC!r}, version, ...])")
    if document[1] != FORMAT_VERSION or type(document[1]) is not int:
        raise SnapshotCodecError(f"format {document[1]!r:.20}, not {FORMAT_VERSION}")
    decoder = _Decoder(_classes(document[2]), persistent or {}, limits)
    try:
        return decoder.value(document[3], 0)
    except RecursionError:  # not reached within depth_max; a guard all the same
        raise SnapshotCodecError("nested too deeply") from None


def _classes(names: Any) -> list[ClassSpec]:
    if type(names) is not list:
        raise SnapshotCodecError("the class table is not a list")
    specs = []
    for i, name in enumerate(names):
        spec = CLASSES.get(name) if type(name) is str else None
        if spec is None:
            raise SnapshotCodecError(f"unknown class {name!r:.80}", f"<class {i}>")
        specs.append(spec)
    return specs


_MAP_TYPES: dict[int, type] = {Tag.DICT: dict, Tag.COUNTER: Counter, Tag.ORDERED_DICT: OrderedDict}
_OPEN = object()  # a tuple or frozenset being rebuilt: not yet there to refer to


class _Decoder:
    def __init__(self, specs: list[ClassSpec], persistent: dict[str, Any],
                 limits: SnapshotLimits) -> None:  # fmt: skip
        self.specs = specs
        self.persistent = persistent
        self.persistent_ids = {id(o) for o in persistent.values()}
        self.limits = limits
        self.objects: list[Any] = []  # by number (the encoder's memo, rebuilt)
        self.count = 0

    def value(self, x: Any, depth: int) -> Any:
        if type(x) in SCALARS:
            return x
        if type(x) is not list or not x or type(x[0]) is not int:
            raise SnapshotCodecError(f"expected a value, got {_shown(x)}")
        if depth >= self.limits.depth_max:
            raise SnapshotCodecError(f"deeper than depth_max={self.limits.depth_max}")
        self._counted(1)
        try:
            return self._build(x, x[0], depth + 1)
        except SnapshotCodecError:
            raise
        except Exception as e:  # a constructor refused (unhashable key, bad enum value...)
            raise SnapshotCodecError(f"{type(e).__name__}: {e}"[:300]) from None

    def _counted(self, values: int) -> None:
        self.count += values
        if self.count > self.limits.objects_max:
            raise SnapshotCodecError(f"more than objects_max={self.limits.objects_max} values")

    def _build(self, x: list[Any], tag: int, depth: int) -> Any:
        if tag == Tag.REF:
            (number,) = _fields(x, 1, "a reference")
            if type(number) is not int or not 0 <= number < len(self.objects):
                raise SnapshotCodecError(f"a reference to object {number!r:.20}, not yet met")
            found = self.objects[number]
            if found is _OPEN:
                raise SnapshotCodecError(f"a reference to object {number} from inside it")
            return found
        if tag == Tag.OBJECT:
            return self._object(x, depth)
        if tag == Tag.LIST or tag == Tag.SET:
            (items,) = _fields(x, 1, "a list or set")
            made: Any = [] if tag == Tag.LIST else set()
            self.objects.append(made)  # before its items, which may refer to it
            made.extend(self._items(items, depth)) if tag == Tag.LIST else made.update(
                self._items(items, depth)
            )
            return made
        if tag == Tag.TUPLE or tag == Tag.FROZENSET:
            (items,) = _fields(x, 1, "a tuple or frozenset")
            number = len(self.objects)
            self.objects.append(_OPEN)
            made = (tuple if tag == Tag.TUPLE else frozenset)(self._items(items, depth))
            self.objects[number] = made
            return made
        if tag == Tag.DICT or tag == Tag.COUNTER or tag == Tag.ORDERED_DICT:
            return self._map(x, tag, depth)
        if tag == Tag.DEQUE:
            maxlen, items = _fields(x, 2, "a deque")
            if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
                raise SnapshotCodecError(f"a deque's maxlen {maxlen!r:.20}")
            made = deque(maxlen=maxlen)
            self.objects.append(made)
            made.extend(self._items(items, depth))
            return made
        if tag == Tag.ARRAY:
            return self._array(x)
        if tag == Tag.BYTEARRAY:
            (data,) = _fields(x, 1, "a bytearray")
            if type(data) is not bytes:
                raise SnapshotCodecError(f"a bytearray of {_shown(data)}")
            made = bytearray(data)
            self.objects.append(made)
            return made
        if tag == Tag.ENUM:
            index, value = _fields(x, 2, "an enum")
            spec = self._spec(index, enum=True)
            member = spec.members.get(value) if type(value) in SCALARS else None
            if member is None or type(member.value) is not type(value):  # True is not 1
                raise SnapshotCodecError(f"{value!r:.40} is not a {spec.name}")
            return member
        if tag == Tag.BIG_INT:
            (data,) = _fields(x, 1, "an int")
            if type(data) is not bytes or len(data) > self.limits.int_bytes_max:
                raise SnapshotCodecError(
                    f"an int of {_shown(data)} (int_bytes_max={self.limits.int_bytes_max})"
                )
            return int.from_bytes(data, "big", signed=True)
        if tag == Tag.PERSISTENT:
            (name,) = _fields(x, 1, "a persistent object")
            if type(name) is not str or name not in self.persistent:
                raise SnapshotCodecError(f"names {name!r:.40}, an object not given to decode")
            return self.persistent[name]
        raise SnapshotCodecError(f"unknown tag {tag}")

    def _items(self, items: Any, depth: int) -> list[Any]:
        if type(items) is not list:
            raise SnapshotCodecError(f"expected a list of items, got {_shown(items)}")
        self._counted(len(items))
        if scalars_only(items):
            return items
        i = 0
        try:
            out = []
            for i, v in enumerate(items):  # noqa: B007 - i names the item that failed
                out.append(v if type(v) in SCALARS else self.value(v, depth))
            return out
        except SnapshotCodecError as e:
            raise e.under(f"[{i}]") from None

    def _map(self, x: list[Any], tag: int, depth: int) -> Any:
        keys, values = _fields(x, 2, "a map")
        made: Any = _MAP_TYPES[tag]()
        self.objects.append(made)
        if (
            type(keys) is list
            and type(values) is list
            and len(keys) == len(values)
            and scalars_only(chain(keys, values))
        ):  # the common case, in one test (a stack's tables hold a small map per position)
            self._counted(2 * len(keys))
            _fill(made, tag, keys, values)
            return made
        keys = self._items(keys, depth)
        try:
            values = self._items(values, depth)
        except SnapshotCodecError as e:  # "[i]" is the i-th value: say its key
            raise e.at_key(keys) from None
        if len(keys) != len(values):
            raise SnapshotCodecError(f"a map of {len(keys)} keys and {len(values)} values")
        _fill(made, tag, keys, values)
        return made

    def _array(self, x: list[Any]) -> array[Any]:
        typecode, data = _fields(x, 2, "an array")
        if type(typecode) is not str or typecode not in ARRAY_TYPECODES:
            raise SnapshotCodecError(f"an array of typecode {typecode!r:.20}")
        made = array(typecode)
        if type(data) is not bytes or len(data) % made.itemsize:
            raise SnapshotCodecError(f"an array's bytes: {_shown(data)}")
        made.frombytes(data)
        if BIG_ENDIAN:
            made.byteswap()
        self.objects.append(made)
        return made

    def _spec(self, index: Any, enum: bool) -> ClassSpec:
        if type(index) is not int or not 0 <= index < len(self.specs):
            raise SnapshotCodecError(f"class {index!r:.20} is not in the class table")
        spec = self.specs[index]
        if spec.is_enum != enum:
            is_not = "is not an enum" if enum else "is an enum, not a class of objects"
            raise SnapshotCodecError(f"{spec.name} {is_not}")
        return spec

    def _object(self, x: list[Any], depth: int) -> Any:
        spec = self._spec(x[1] if len(x) > 1 else None, enum=False)
        if len(x) - 2 != len(spec.fields):
            raise SnapshotCodecError(
                f"a {spec.name} of {len(x) - 2} fields, not {len(spec.fields)}"
            )
        made: Any = object.__new__(spec.cls)
        self.objects.append(made)
        self._counted(len(spec.fields))
        setattr_ = object.__setattr__  # frozen dataclasses and slots alike
        for name, check, raw in zip(spec.fields, spec.checks, x[2:], strict=True):
            try:
                value = raw if type(raw) in SCALARS else self.value(raw, depth)
            except SnapshotCodecError as e:
                raise e.under(f".{name}") from None
            if check is not None and not check(value) and id(value) not in self.persistent_ids:
                want = spec.wants[spec.fields.index(name)]
                raise SnapshotCodecError(
                    f"{spec.name}.{name} is a {type(value).__name__}, not {want}", f".{name}"
                )
            setattr_(made, name, value)
        return made


def _fill(made: Any, tag: int, keys: list[Any], values: list[Any]) -> None:
    pairs = zip(keys, values, strict=True)
    if tag == Tag.ORDERED_DICT:
        made.update(pairs)  # its own order is kept beside the dict's
    else:
        dict.update(made, pairs)  # a Counter's update would add, not set


def _fields(x: list[Any], count: int, what: str) -> list[Any]:
    if len(x) != count + 1:
        raise SnapshotCodecError(f"{what} of {len(x) - 1} fields, not {count}")
    return x[1:]


def _shown(x: Any) -> str:
    return f"{type(x).__name__} {x!r:.40}"
