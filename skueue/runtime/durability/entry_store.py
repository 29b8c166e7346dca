"""Where a durable daemon keeps the elements its DHT tables hold: a paged store on disk
(:class:`~skueue.dht.storage.paged.PagedEntryStore`), so that its memory does not grow
with the queue (issue 11: 2 x 10^6 elements of 1 KB across 4 daemons in < 200 MB each).

Theory of operation
-------------------
The input log and its snapshots (:mod:`skueue.runtime.durability.input_log`) are what make a daemon
durable; this store only moves the elements out of memory, and must agree with them:
after a crash, the state is the last snapshot plus the replay of the inputs after it.

- The snapshot pickles each table's record ids, not the elements.  Before it is written
  the store is synced, so every record it names is on disk.
- Removes wait for the snapshot after them.  A replay may take an element again (its Get
  is replayed, and the reply goes back into the link's outbox), so the element must still
  be there until a snapshot no longer names it.  They are applied, and the emptied pages
  collected, once the snapshot is durable.
- At a restart, before the replay, every live record that the restored tables do not
  name is removed: the appends of the lost life (the replay makes them again) and the
  removes that had not been applied yet.  A record the snapshot names that the store no
  longer has, or whose bytes are corrupt, is data lost: the daemon refuses to start,
  in one line, rather than serve a queue with a hole.

Elements that came back from a lease (:class:`~skueue.core.ops.Redelivered`) keep their
bytes in the store like any other; their delivery count and reason, a few bytes, stay in
``extras`` by record id, which the snapshot holds beside the tables.

No fsync per step: an element reaches the store's disk at the next snapshot; until then
its durability is the input log's, which holds the request or message that carried it.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from skueue.core.ops import Item, Redelivered
from skueue.core.process import Process
from skueue.dht.storage.interface import StorageError
from skueue.dht.storage.paged import PagedEntryStore
from skueue.runtime.errors import DaemonError

ENTRIES_DIRECTORY = "entries"  # inside the data directory
_PERSISTENT_ID = "entry-store"  # what a snapshot holds in place of the store


class SnapshotEntryStore:
    """An :class:`~skueue.dht.storage.interface.EntryStore` whose removes wait for the
    next snapshot (module docstring)."""

    def __init__(self, directory: Path, page_bytes: int, mapped_pages_max: int) -> None:
        try:
            self.inner = PagedEntryStore(
                directory, page_bytes=page_bytes, mapped_pages_max=mapped_pages_max
            )
        except StorageError as e:
            raise DaemonError(f"the entry store in {directory} cannot be opened: {e}") from None
        self.removed: list[int] = []
        # record id -> (deliveries, reason) of a Redelivered element (module docstring)
        self.extras: dict[int, tuple[int, str]] = {}

    # -- the EntryStore interface -----------------------------------------------------

    def append(self, position: int, ticket: int, element: Item) -> int:
        if type(element) is Redelivered:
            record = self.inner.append(position, ticket, element.value)  # type: ignore[arg-type]
            self.extras[record] = (element.deliveries, element.reason)
            return record
        return self.inner.append(position, ticket, element)  # type: ignore[arg-type]

    def read(self, record: int) -> Item:
        value = self.inner.read(record)
        extra = self.extras.get(record) if self.extras else None
        return value if extra is None else Redelivered(value, *extra)

    def remove(self, record: int) -> None:
        if self.extras:
            self.extras.pop(record, None)
        self.removed.append(record)

    def live(self) -> Iterator[tuple[int, int, int]]:
        removed = set(self.removed)
        return (r for r in self.inner.live() if r[0] not in removed)

    def sync(self) -> None:
        """Nothing: the input log's sync makes each step durable (module docstring)."""

    def close(self) -> None:
        self.inner.close()

    def __len__(self) -> int:
        return len(self.inner) - len(self.removed)

    # -- around steps and snapshots ---------------------------------------------------

    def end_step(self) -> None:
        """Hand the step's appends to the kernel (no fsync): the engine holds its last
        appends in memory until then, and a process that dies after the step should leave
        them in the page files as it leaves the step's input in the log's (recovery then
        finds what a kill -9 tore, and the replay has less to make again)."""
        self.inner.flush()

    def before_snapshot(self) -> None:
        self.inner.sync()

    def after_snapshot(self) -> None:
        for record in self.removed:
            self.inner.remove(record)
        self.removed.clear()
        self.inner.sync()

    def keep_only(self, named: Iterable[int]) -> int:
        """Remove every live record not in ``named`` (at a restart, before the replay);
        returns how many went.  A named record that is gone or corrupt stops the start.
        Record ids are dense, so a byte per id marks the named ones: a set of 10^6 ids
        would take tens of MB at the moment a restart needs the most."""
        inner = self.inner
        marked = bytearray(inner.next_record)
        count = 0
        for record in named:
            count += 1
            if record < len(marked):  # past the store's end: missing (count - found)
                marked[record] = 1
        corrupt = sum(marked[r] for r in inner.recovery.corrupt if r < len(marked))
        stale = []
        found = 0
        for record, _, _ in inner.live():
            if marked[record]:
                found += 1
            else:
                stale.append(record)
        missing = count - found
        if missing or corrupt:
            raise DaemonError(
                f"the entry store in {inner.directory} lost {missing} and holds "
                f"{corrupt} corrupt elements of the queue's state; restore the data "
                "directory from a backup, or start this member afresh with an empty one"
            )
        for record in stale:
            inner.remove(record)
            self.extras.pop(record, None)
        inner.sync()
        return len(stale)


def attach(process: Process, store: SnapshotEntryStore | None) -> Process:
    """Give ``process``'s tables the store (before any input; None: keep them in memory)."""
    if store is not None:
        for node in process.nodes.values():
            node.store.attach(store)  # type: ignore[arg-type]  # takes Items: wider than bytes
    return process


def named_records(process: Process) -> Iterator[int]:
    for node in process.nodes.values():
        yield from node.store.records()


def dump(state: Any, file: BinaryIO, store: SnapshotEntryStore | None) -> None:
    """Pickle ``state`` into ``file``, the store itself left out (its records are on its
    own disk)."""
    pickler = pickle.Pickler(file, protocol=pickle.HIGHEST_PROTOCOL)
    if store is not None:
        pickler.persistent_id = lambda obj: _PERSISTENT_ID if obj is store else None  # type: ignore[method-assign]
    pickler.dump((state, None if store is None else store.extras))


def load(file: BinaryIO, store: SnapshotEntryStore | None) -> Any:
    """Unpickle what :func:`dump` wrote, with ``store`` back where it was."""
    state, extras = load_apart(file, store)
    if store is not None:
        store.extras = extras or {}
    return state


def load_apart(file: BinaryIO, stand_in: object | None) -> tuple[Any, dict[int, tuple[int, str]]]:
    """What :func:`dump` wrote, with ``stand_in`` where the store was, and the store's
    ``extras`` of that time (the store itself is left as it is now)."""

    def persistent_load(pid: Any) -> Any:
        if pid != _PERSISTENT_ID or stand_in is None:
            raise pickle.UnpicklingError("the snapshot names an entry store this daemon lacks")
        return stand_in

    unpickler = pickle.Unpickler(file)
    unpickler.persistent_load = persistent_load  # type: ignore[method-assign]
    state, extras = unpickler.load()  # noqa: S301 - our own file (runtime/durability/snapshots.py)
    return state, extras or {}
