"""A map from positive ints to ints in two flat arrays: the DHT table's index of record ids
when its elements live in an entry store (:mod:`skueue.dht.table`).

A dict costs about 106 bytes per entry (its slot and two int objects); a durable daemon
holding 10^6 entries spent more memory on that index than on everything else together.
Here an entry costs two 8-byte array cells at a load of at most 2/3 (about 24-48 bytes),
at the price of a lookup in Python rather than in C: about a microsecond, against the
milliseconds of CPU an operation takes in the daemon.

Open addressing with linear probing; a removed key leaves a tombstone, and the arrays are
rebuilt when tombstones and keys fill two thirds of them (growing), or when the keys fill
less than a sixteenth (shrinking: a drained queue gives its memory back).  Keys are
positions, 1 .. 2^63 - 1, so 0 and -1 are free to mark empty and removed cells.

Pure: no I/O, clock or randomness.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

_EMPTY = 0
_REMOVED = -1
_CAPACITY_MIN = 8


class IntMap:
    __slots__ = ("_keys", "_values", "_mask", "_size", "_used")

    def __init__(self) -> None:
        self._reset(_CAPACITY_MIN)

    def _reset(self, capacity: int) -> None:
        self._keys = array("q", bytes(8 * capacity))
        self._values = array("q", bytes(8 * capacity))
        self._mask = capacity - 1
        self._size = 0  # keys
        self._used = 0  # keys and tombstones

    def __len__(self) -> int:
        return self._size

    def __contains__(self, key: int) -> bool:
        return self._find(key) >= 0

    def __getitem__(self, key: int) -> int:
        i = self._find(key)
        if i < 0:
            raise KeyError(key)
        return self._values[i]

    def __setitem__(self, key: int, value: int) -> None:
        if key < 1:
            raise ValueError(f"an IntMap key is a position, at least 1, not {key}")
        keys, mask = self._keys, self._mask
        i = _start(key, mask)
        free = -1
        while True:
            k = keys[i]
            if k == key:
                self._values[i] = value
                return
            if k == _EMPTY:
                break
            if k == _REMOVED and free < 0:
                free = i
            i = (i + 1) & mask
        if free < 0:
            free = i
            self._used += 1
        keys[free] = key
        self._values[free] = value
        self._size += 1
        if 3 * self._used > 2 * (mask + 1):
            self._rebuild(2 * (mask + 1) if 3 * self._size > mask + 1 else mask + 1)

    def __delitem__(self, key: int) -> None:
        self.pop(key)

    def pop(self, key: int) -> int:
        i = self._find(key)
        if i < 0:
            raise KeyError(key)
        value = self._values[i]
        self._keys[i] = _REMOVED
        self._size -= 1
        capacity = self._mask + 1
        if capacity > _CAPACITY_MIN and 16 * self._size < capacity:
            self._rebuild(max(_CAPACITY_MIN, capacity // 4))
        return value

    def items(self) -> Iterator[tuple[int, int]]:
        values = self._values
        for i, k in enumerate(self._keys):
            if k > 0:
                yield k, values[i]

    def _find(self, key: int) -> int:
        keys, mask = self._keys, self._mask
        i = _start(key, mask)
        while True:
            k = keys[i]
            if k == key:
                return i
            if k == _EMPTY:
                return -1
            i = (i + 1) & mask

    def _rebuild(self, capacity: int) -> None:
        old = list(self.items())
        self._reset(capacity)
        for key, value in old:
            self[key] = value

    # Pickled as its arrays: a snapshot restores them without rebuilding anything.
    def __getstate__(self) -> tuple[array[int], array[int], int, int]:
        return self._keys, self._values, self._size, self._used

    def __setstate__(self, state: tuple[array[int], array[int], int, int]) -> None:
        self._keys, self._values, self._size, self._used = state
        self._mask = len(self._keys) - 1


def _start(key: int, mask: int) -> int:
    # The high bits folded in, so that keys that step by a power of two still spread.
    return (key ^ (key >> 17) ^ (key >> 31)) & mask
