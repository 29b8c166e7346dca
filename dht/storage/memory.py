"""A dict-backed entry store for the simulators, which also models crashes.

Theory of operation: the store keeps two states, the live one every call sees and the
durable one a crash falls back to.  Appends and removes change the live state at once and
are queued; ``sync()`` applies the queue to the durable state (so a sync costs what the
step changed, not the size of the store), and ``crash()`` throws the queue away and starts
again from the durable state, as a process that dies between two syncs would.  Record ids
after a crash continue from the last synced id, as the paged engine's do.

Pure: no I/O, clock or randomness, so the simulators may use it.  Elements may be of any
type (simulations use str); ``MemoryEntryStore[bytes]`` is an ``EntryStore``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from skueue.dht.storage.interface import StorageError, UnknownRecord

Element = TypeVar("Element")

_REMOVE = None  # a queued remove; an append queues its entry


class MemoryEntryStore(Generic[Element]):
    """Entries in a dict; ``crash()`` keeps only what ``sync()`` made durable."""

    __slots__ = ("_live", "_durable", "_pending", "_next", "_durable_next", "_closed")

    def __init__(self) -> None:
        # record -> (position, ticket, element); dicts keep insertion (= append) order
        self._live: dict[int, tuple[int, int, Element]] = {}
        self._durable: dict[int, tuple[int, int, Element]] = {}
        self._pending: list[tuple[int, tuple[int, int, Element] | None]] = []
        self._next = 0
        self._durable_next = 0
        self._closed = False

    def append(self, position: int, ticket: int, element: Element) -> int:
        self._check_open()
        record = self._next
        self._next += 1
        entry = (position, ticket, element)
        self._live[record] = entry
        self._pending.append((record, entry))
        return record

    def read(self, record: int) -> Element:
        self._check_open()
        try:
            return self._live[record][2]
        except KeyError:
            raise UnknownRecord(record) from None

    def remove(self, record: int) -> None:
        self._check_open()
        if self._live.pop(record, None) is None:
            raise UnknownRecord(record)
        self._pending.append((record, _REMOVE))

    def live(self) -> Iterator[tuple[int, int, int]]:
        self._check_open()
        for record, (position, ticket, _) in list(self._live.items()):
            yield record, position, ticket

    def sync(self) -> None:
        self._check_open()
        for record, entry in self._pending:
            if entry is _REMOVE:
                del self._durable[record]
            else:
                self._durable[record] = entry
        self._pending.clear()
        self._durable_next = self._next

    def crash(self) -> None:
        """Lose every append and remove since the last ``sync()``."""
        self._check_open()
        self._live = dict(self._durable)
        self._pending.clear()
        self._next = self._durable_next

    def close(self) -> None:
        if not self._closed:
            self.sync()
            self._closed = True

    def __len__(self) -> int:
        return len(self._live)

    @property
    def unsynced(self) -> int:
        """Appends and removes a crash would lose now."""
        return len(self._pending)

    def describe(self) -> str:
        return f"MemoryEntryStore live={len(self._live)} unsynced={len(self._pending)}"

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("the store is closed")
