"""The snapshot codec's format, shared by its encoder (:mod:`skueue.wire.snapshot_codec`)
and its decoder (:mod:`skueue.wire.snapshot_decoder`): the document's tags, its one error
and its limits."""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter, OrderedDict
from enum import IntEnum
from typing import Any

MAGIC = "skueue-state"
FORMAT_VERSION = 1


class SnapshotCodecError(ValueError):
    """A snapshot that is not one this codec writes, or state it cannot write; the
    message names where (a path like ``.clients.process.nodes[<Kind.LEFT: 0>]``)."""

    def __init__(self, problem: str, path: str = "") -> None:
        self.problem, self.path = problem, path
        super().__init__(self._text())

    def _text(self) -> str:
        return f"snapshot at {self.path or 'the top'}: {self.problem}"

    def under(self, step: str) -> SnapshotCodecError:
        """The same error, seen from one level up (``step`` leads to where it was)."""
        self.path = step + self.path
        self.args = (self._text(),)
        return self

    def at_key(self, keys: list[Any]) -> SnapshotCodecError:
        """A map's value's error, its path naming the value's key rather than its index
        among the values."""
        index, bracket, rest = self.path[1:].partition("]")
        if self.path.startswith("[") and bracket and index.isdigit() and int(index) < len(keys):
            self.path = f"[{keys[int(index)]!r:.40}]{rest}"
            self.args = (self._text(),)
        return self


@dataclasses.dataclass(frozen=True, slots=True)
class SnapshotLimits:
    depth_max: int = 100  # nesting; a host's state is about 15 deep
    objects_max: int = 200_000_000  # values built, scalars in containers included
    data_bytes_max: int = 4 << 30  # the encoded snapshot
    int_bytes_max: int = 64  # an int beyond msgpack's 64 bits (a host holds none)


class Tag(IntEnum):
    REF = 0
    LIST = 1
    TUPLE = 2
    DICT = 3
    SET = 4
    FROZENSET = 5
    DEQUE = 6
    ARRAY = 7
    COUNTER = 8
    ORDERED_DICT = 9
    OBJECT = 10
    ENUM = 11
    BIG_INT = 12
    PERSISTENT = 13
    BYTEARRAY = 14


# Values msgpack carries as they are.  (Exact types: an IntEnum is an int, but travels as
# an enum; a bool is not an int here, and needs no range check.)
SCALARS = frozenset({type(None), bool, int, float, str, bytes})
ARRAY_TYPECODES = frozenset("bBhHiIlLqQfd")
BIG_ENDIAN = sys.byteorder == "big"
MAPS: dict[type, Tag] = {dict: Tag.DICT, Counter: Tag.COUNTER, OrderedDict: Tag.ORDERED_DICT}
SEQUENCES: dict[type, Tag] = {
    list: Tag.LIST,
    tuple: Tag.TUPLE,
    set: Tag.SET,
    frozenset: Tag.FROZENSET,
}


def scalars_only(values: Any) -> bool:
    """Whether every value of a container is a scalar msgpack carries as it is (a C-speed
    test: the types of a list of 10^5 ints make a set of one)."""
    return set(map(type, values)) <= SCALARS
