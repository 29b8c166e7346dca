"""A replica's view of its log: the entries after its last snapshot, their terms, the
configurations in them, and how far the local disk has them (Raft §5.3, §7).

The driver keeps the log on disk (``AppendLocal``); this is the replica's own copy of
what it needs to decide: terms for the consistency check and the election restriction,
entries to send, and which configuration is in force (the last one in the log,
committed or not, thesis §4.1).
"""

from __future__ import annotations

from collections.abc import Sequence

from skueue.replication.config import Config
from skueue.replication.messages import Entry


class RaftLog:
    """Indexes start at 1; index ``snapshot_index`` has ``snapshot_term`` and no entry
    held here (0 and 0 for a log that never snapshotted)."""

    def __init__(self, snapshot_index: int, snapshot_term: int, config: Config,
                 entries: Sequence[Entry] = ()) -> None:
        self.snapshot_index = snapshot_index
        self.snapshot_term = snapshot_term
        self.entries: list[Entry] = []
        self.configs: list[tuple[int, Config]] = [(snapshot_index, config)]
        """Each configuration in force from its index on: the snapshot's, then one per
        config entry of the log."""
        self.persisted = snapshot_index
        """The local log is durable through this index (the snapshot is durable)."""
        self.append(entries)
        self.persisted = self.last_index  # what a replica starts from was read from disk

    @property
    def last_index(self) -> int:
        return self.snapshot_index + len(self.entries)

    @property
    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.snapshot_term

    @property
    def config(self) -> Config:
        """The configuration in force: the last in the log."""
        return self.configs[-1][1]

    @property
    def config_index(self) -> int:
        """The index of the entry that made the configuration in force."""
        return self.configs[-1][0]

    @property
    def snapshot_config(self) -> Config:
        return self.configs[0][1]

    def term_at(self, index: int) -> int | None:
        """The term of the entry at ``index``; None where the log does not say (before
        the snapshot, or past the end)."""
        if index == self.snapshot_index:
            return self.snapshot_term
        if self.snapshot_index < index <= self.last_index:
            return self.entries[index - self.snapshot_index - 1].term
        return None

    def entry(self, index: int) -> Entry:
        if not self.snapshot_index < index <= self.last_index:
            raise IndexError(f"entry {index} is not held (held: "
                             f"{self.snapshot_index + 1}..{self.last_index})")
        return self.entries[index - self.snapshot_index - 1]

    def between(self, first: int, bytes_max: int, count_max: int) -> tuple[Entry, ...]:
        """Entries from ``first`` on, at most ``count_max``, as many as fit in
        ``bytes_max`` (at least one)."""
        out: list[Entry] = []
        size = 0
        start = first - self.snapshot_index - 1
        for entry in self.entries[start : start + count_max]:
            size += entry.size()
            if out and size > bytes_max:
                break
            out.append(entry)
        return tuple(out)

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Whether a log ending at ``(last_index, last_term)`` is at least as up to date
        as this one (Raft §5.4.1)."""
        return (last_term, last_index) >= (self.last_term, self.last_index)

    def append(self, entries: Sequence[Entry]) -> None:
        """Add ``entries`` after the last one."""
        first = self.last_index + 1
        self.entries.extend(entries)
        for offset, entry in enumerate(entries):
            if entry.kind == "config":
                assert entry.config is not None
                self.configs.append((first + offset, entry.config))

    def truncate_from(self, index: int) -> None:
        """Drop the entries from ``index`` on (a conflicting tail, Raft §5.3), and the
        configurations they brought."""
        assert index > self.snapshot_index, "a snapshot is never truncated"
        del self.entries[index - self.snapshot_index - 1:]
        while self.configs[-1][0] >= index:
            self.configs.pop()
        self.persisted = min(self.persisted, index - 1)

    def conflict_hint(self, prev_index: int, prev_term: int) -> int:
        """Where a leader whose ``prev_index`` has ``prev_term`` should try next: the last
        index at or before both ``prev_index − 1`` and this log's end whose term is not
        above ``prev_term`` (a later term there cannot be the leader's entry: a leader's
        terms never decrease along its log)."""
        index = min(prev_index - 1, self.last_index)
        while index > self.snapshot_index and (self.term_at(index) or 0) > prev_term:
            index -= 1
        return max(index, self.snapshot_index)

    def compact(self, index: int) -> None:
        """Forget the entries through ``index``: a snapshot covers them."""
        if index <= self.snapshot_index:
            return
        term = self.term_at(index)
        assert term is not None and index <= self.last_index
        config = self.config_at(index)
        del self.entries[: index - self.snapshot_index]
        self.snapshot_index, self.snapshot_term = index, term
        self.configs = [(index, config)] + [c for c in self.configs if c[0] > index]
        self.persisted = max(self.persisted, index)

    def restore(self, index: int, term: int, config: Config) -> None:
        """Become the log a snapshot leaves: nothing after ``index``."""
        self.entries = []
        self.snapshot_index, self.snapshot_term = index, term
        self.configs = [(index, config)]
        self.persisted = index

    def config_at(self, index: int) -> Config:
        """The configuration in force at ``index``."""
        return next(config for at, config in reversed(self.configs) if at <= index)
