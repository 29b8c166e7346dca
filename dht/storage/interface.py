"""The one small interface every storage engine offers, its errors and its recovery report.

A daemon keeps the DHT entries its virtual nodes store (``skueue.dht.table``) in an
``EntryStore``: each entry (position, ticket, element) is appended once, read when a Get
takes it, and removed out of order (a stack pops the top; leases remove anywhere).  Record
ids are plain ints, strictly increasing per store; the table maps its entries to them.
After a crash, the ids of appends no sync covered may be handed out again (those appends
never became durable, so no durable record ever shares an id with another).

``sync()`` is the group commit: one call per protocol step makes every append and remove
of the step durable before the step's messages and replies leave (etcd raft's ``Ready``).
At start, ``live()`` gives what is needed to rebuild the table's index.

Pure: this module imports no I/O, clock or randomness, so simulators can type against it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class StorageError(Exception):
    """Something is wrong with stored data or with how a store is used."""


class CorruptRecord(StorageError):
    """A record's checksum does not match: its bytes are not what was appended."""

    def __init__(self, record: int, why: str) -> None:
        super().__init__(f"record {record} is corrupt: {why}")
        self.record = record
        self.why = why


class UnknownRecord(StorageError, KeyError):
    """No live record has this id (never appended, removed, or cut off at recovery)."""

    def __init__(self, record: int) -> None:
        super().__init__(record)
        self.record = record

    def __str__(self) -> str:
        return f"no live record {self.record}"


class FormatMismatch(StorageError):
    """The directory holds another format (version, magic) than this engine writes."""


class StoreLocked(StorageError):
    """Another store (in this or another process) has the directory open."""


@runtime_checkable
class EntryStore(Protocol):
    """What the DHT table will keep its entries in; every engine offers exactly this."""

    def append(self, position: int, ticket: int, element: bytes) -> int:
        """Store one entry; returns its record id (strictly increasing per store)."""
        ...

    def read(self, record: int) -> bytes:
        """The element of a live record, its checksum verified (else ``CorruptRecord``)."""
        ...

    def remove(self, record: int) -> None:
        """Remove a live record; any record, in any order."""
        ...

    def live(self) -> Iterator[tuple[int, int, int]]:
        """``(record, position, ticket)`` of every live record, in append order."""
        ...

    def sync(self) -> None:
        """Make every append and remove so far durable."""
        ...

    def close(self) -> None:
        """Sync and release the store; it may not be used afterwards."""
        ...

    def __len__(self) -> int:
        """The number of live records."""
        ...


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What opening a store found on disk besides the records it recovered intact."""

    live: int = 0
    """Live records recovered (corrupt ones included: they are still listed by live())."""
    removed_seen: int = 0
    """Removed records whose slots were still on disk (their pages not yet collected)."""
    cut: tuple[int, ...] = ()
    """Record ids cut off at the tail: their append never became durable (a torn write)."""
    corrupt: tuple[int, ...] = ()
    """Record ids before the tail whose slot or element fails its checksum."""
    truncated_files: tuple[str, ...] = ()
    """Page files shorter than a page (a torn extension); they were extended with zeros."""
    orphan_files: tuple[str, ...] = ()
    """Page files past the recovered tail or fully removed; deleted at open."""
    next_record: int = 0
    """The id the next append gets."""

    @property
    def clean(self) -> bool:
        return not (self.cut or self.corrupt or self.truncated_files)

    def describe(self) -> str:
        """One stable line for logs and test output."""
        parts = [f"live={self.live}", f"removed_seen={self.removed_seen}"]
        parts.append(f"next_record={self.next_record}")
        if self.cut:
            parts.append(f"cut={_ids(self.cut)}")
        if self.corrupt:
            parts.append(f"corrupt={_ids(self.corrupt)}")
        if self.truncated_files:
            parts.append(f"truncated={','.join(self.truncated_files)}")
        if self.orphan_files:
            parts.append(f"orphans_deleted={len(self.orphan_files)}")
        return "RecoveryReport " + " ".join(parts)


def _ids(ids: tuple[int, ...]) -> str:
    """A short rendering of record ids: a few, then the count."""
    shown = ",".join(str(i) for i in ids[:8])
    return f"[{shown}{',...' if len(ids) > 8 else ''}]({len(ids)})"
