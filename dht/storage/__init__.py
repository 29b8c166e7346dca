"""Storage engines for the DHT entries of one daemon, behind one interface (issue 11).

- ``EntryStore`` (interface.py): append / read / remove / live / sync / close.
- ``MemoryEntryStore`` (memory.py): a dict for the simulators; ``crash()`` keeps only what
  was synced.  Pure, like the rest of ``skueue.dht``.
- ``PagedEntryStore`` (paged.py): append-only memory-mapped page files (seed 004), with
  checksums, torn-tail recovery and garbage collection of consumed pages.  The one part of
  ``skueue.dht`` that does I/O; it is imported on first use, so importing this package
  loads neither mmap nor os-level file code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from skueue.dht.storage.interface import (
    CorruptRecord,
    EntryStore,
    FormatMismatch,
    RecoveryReport,
    StorageError,
    StoreLocked,
    UnknownRecord,
)
from skueue.dht.storage.memory import MemoryEntryStore

if TYPE_CHECKING:
    from skueue.dht.storage.paged import PagedEntryStore

__all__ = [
    "CorruptRecord",
    "EntryStore",
    "FormatMismatch",
    "MemoryEntryStore",
    "PagedEntryStore",
    "RecoveryReport",
    "StorageError",
    "StoreLocked",
    "UnknownRecord",
]


def __getattr__(name: str) -> Any:
    if name == "PagedEntryStore":
        return importlib.import_module("skueue.dht.storage.paged").PagedEntryStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
