"""A simulated machine's disk for the replication simulator (``sim/replicas.py``): the
hard state, the log and the last snapshot, with a sync boundary.

Writes (the replica's ``SaveHardState``, ``AppendLocal`` and ``InstallSnapshot``
effects, kept as they are) go to the page cache at once (``volatile``: what the running
machine reads back) and reach the platter only at the machine's next ``sync``
(``durable``: what a restart finds).  A crash loses the writes since the last sync, or,
with torn writes, all but a prefix of them (the kernel wrote some back on its own): the
durable image is then one the volatile image went through, as a real log file's would be.

A snapshot is written only when nothing is pending (the driver syncs first), so the
durable image never sees a compaction and an older write out of order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from skueue.replication.config import Config, HostId
from skueue.replication.effects import AppendLocal, InstallSnapshot, SaveHardState
from skueue.replication.messages import Entry
from skueue.replication.settings import DurableState

Write = SaveHardState | AppendLocal | InstallSnapshot
StateMachine = list[tuple[int, bytes]]
"""What a simulated machine applied: each ``data`` entry with its index, in order."""


def encode_state(state: StateMachine) -> bytes:
    return json.dumps([[index, data.hex()] for index, data in state]).encode()


def decode_state(data: bytes) -> StateMachine:
    return [(index, bytes.fromhex(hex_data)) for index, hex_data in json.loads(data)]


@dataclass
class DiskImage:
    config: Config
    """The configuration in force at the snapshot (or the group's first one)."""
    term: int = 0
    vote: HostId | None = None
    snapshot_index: int = 0
    snapshot_term: int = 0
    snapshot_data: bytes = b"[]"
    log: list[Entry] = field(default_factory=list)
    """The entries after the snapshot."""

    @property
    def last_index(self) -> int:
        return self.snapshot_index + len(self.log)

    def term_at(self, index: int) -> int | None:
        if index == self.snapshot_index:
            return self.snapshot_term
        if self.snapshot_index < index <= self.last_index:
            return self.log[index - self.snapshot_index - 1].term
        return None

    def entry(self, index: int) -> Entry:
        assert self.snapshot_index < index <= self.last_index, (
            f"entry {index} is not on disk (held {self.snapshot_index + 1}..{self.last_index})")
        return self.log[index - self.snapshot_index - 1]

    def apply(self, write: Write) -> None:
        if isinstance(write, SaveHardState):
            self.term, self.vote = write.term, write.vote
        elif isinstance(write, AppendLocal):
            assert self.snapshot_index < write.index <= self.last_index + 1, (
                f"append at {write.index} to a log holding "
                f"{self.snapshot_index + 1}..{self.last_index}")
            del self.log[write.index - self.snapshot_index - 1:]
            self.log.extend(write.entries)
        else:
            self.snapshot_index, self.snapshot_term = write.index, write.last_term
            self.config, self.snapshot_data, self.log = write.config, write.data, []

    def compact(self, index: int, term: int, config: Config, data: bytes) -> None:
        """A snapshot as of ``index`` replaces the log through it."""
        assert self.term_at(index) == term, f"snapshot at {index} of term {term} not in the log"
        del self.log[: index - self.snapshot_index]
        self.snapshot_index, self.snapshot_term = index, term
        self.config, self.snapshot_data = config, data

    def copy(self) -> DiskImage:
        return DiskImage(self.config, self.term, self.vote, self.snapshot_index,
                         self.snapshot_term, self.snapshot_data, list(self.log))

    def durable_state(self, with_data: bool = True) -> DurableState:
        """What a replica starts from; ``with_data=False`` leaves the entries' data out
        (a replica that reads them back from the disk must not need it)."""
        entries = self.log if with_data else [
            Entry(e.term, e.kind, b"", e.config) for e in self.log]
        return DurableState(self.config, self.term, self.vote, self.snapshot_index,
                            self.snapshot_term, tuple(entries))


class SimDisk:
    def __init__(self, config: Config) -> None:
        self.durable = DiskImage(config)
        self.volatile = DiskImage(config)
        self.pending: list[Write] = []

    def write(self, write: Write) -> None:
        self.volatile.apply(write)
        self.pending.append(write)

    def sync(self) -> None:
        for write in self.pending:
            self.durable.apply(write)
        self.pending = []

    def crash(self, kept: int) -> None:
        """Lose the pending writes but the first ``kept``."""
        for write in self.pending[:kept]:
            self.durable.apply(write)
        self.pending = []
        self.volatile = self.durable.copy()

    def read_entries(self, first: int, last: int, bytes_max: int) -> list[Entry]:
        """The replica's ``EntryReader``: what the running machine reads back (the page
        cache's image), as much as ``bytes_max`` allows (at least one entry)."""
        out: list[Entry] = []
        size = 0
        for index in range(first, last + 1):
            entry = self.volatile.entry(index)
            size += entry.size()
            if out and size > bytes_max:
                break
            out.append(entry)
        return out

    def snapshot(self, index: int, term: int, config: Config, data: bytes) -> None:
        assert not self.pending, "a snapshot is written on a synced disk"
        self.durable.compact(index, term, config, data)
        self.volatile.compact(index, term, config, data)
