"""A replica's view of its log: the entries after its last snapshot, their terms, the
configurations in them, and how far the local disk has them (Raft §5.3, §7).

The driver keeps the log on disk (``AppendLocal``); this is the replica's own copy of
what it needs to decide: terms for the consistency check and the election restriction,
entries to send, and which configuration is in force (the last one in the log,
committed or not, thesis §4.1).

Memory: a run per term the log holds (``terms.py``), and the entries only until the
disk has them, when the driver gives an :class:`EntryReader` to read them back (as
etcd's ``Storage``): a daemon's log holds up to ``snapshot_log_bytes`` per group, which
must not also sit in memory.  Without a reader (tests, small simulations) every entry
stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from skueue.replication.config import Config
from skueue.replication.messages import Entry
from skueue.replication.terms import TermRuns


class EntryReader(Protocol):
    """Reads back entries the driver's disk holds (everything the replica was told is
    ``Persisted`` and not compacted away by a snapshot)."""

    def read_entries(self, first: int, last: int, bytes_max: int) -> Sequence[Entry]:
        """The entries ``first`` through ``last``, in order, stopping before the one that
        would take their ``Entry.size`` past ``bytes_max`` (at least one)."""
        ...


class RaftLog:
    """Indexes start at 1; index ``snapshot_index`` has ``snapshot_term`` and no entry
    held here (0 and 0 for a log that never snapshotted)."""

    def __init__(self, snapshot_index: int, snapshot_term: int, config: Config,
                 entries: Sequence[Entry] = (), reader: EntryReader | None = None) -> None:
        self.snapshot_index = snapshot_index
        self.snapshot_term = snapshot_term
        self.reader = reader
        self.terms = TermRuns(snapshot_index)
        """The term of each entry after the snapshot."""
        self.stable = snapshot_index
        """Entries through this index are read back from the reader, and not held here
        (with no reader, it stays at the snapshot)."""
        self.held: list[Entry] = []
        """The entries after ``stable``."""
        self.configs: list[tuple[int, Config]] = [(snapshot_index, config)]
        """Each configuration in force from its index on: the snapshot's, then one per
        config entry of the log."""
        # What a replica starts from was read from its disk: with a reader, only the
        # terms are kept (``entries`` may be a lazy sequence, never held whole here).
        for offset, entry in enumerate(entries, snapshot_index + 1):
            self.terms.append(entry.term)
            if entry.kind == "config":
                assert entry.config is not None
                self.configs.append((offset, entry.config))
        if reader is None:
            self.held = list(entries)
        else:
            self.stable = self.last_index
        self._persisted = self.last_index

    @property
    def persisted(self) -> int:
        """The local log is durable through this index (the snapshot is durable)."""
        return self._persisted

    @persisted.setter
    def persisted(self, index: int) -> None:
        self._persisted = index
        if self.reader is not None and index > self.stable:
            del self.held[: index - self.stable]  # the disk gives them back from now on
            self.stable = index
        self.stable = min(self.stable, index)

    @property
    def last_index(self) -> int:
        return self.terms.last

    @property
    def last_term(self) -> int:
        last = self.terms.last_term()
        return self.snapshot_term if last is None else last

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
            return self.terms.at(index)
        return None

    def entry(self, index: int) -> Entry:
        if not self.snapshot_index < index <= self.last_index:
            raise IndexError(f"entry {index} is not held (held: "
                             f"{self.snapshot_index + 1}..{self.last_index})")
        return self.between(index, 0, 1)[0]

    def between(self, first: int, bytes_max: int, count_max: int) -> tuple[Entry, ...]:
        """Entries from ``first`` on, at most ``count_max``, as many as fit in
        ``bytes_max`` (at least one)."""
        last = min(self.last_index, first + count_max - 1)
        out: list[Entry] = []
        if first <= self.stable:
            assert self.reader is not None
            out.extend(self.reader.read_entries(first, min(last, self.stable), bytes_max))
            if first + len(out) <= self.stable:
                return tuple(out)  # the reader stopped at the byte limit
        size = sum(entry.size() for entry in out)
        start = first + len(out) - self.stable - 1
        for entry in self.held[start : start + last - first + 1 - len(out)]:
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
        for entry in entries:
            self.terms.append(entry.term)
        self.held.extend(entries)
        for offset, entry in enumerate(entries):
            if entry.kind == "config":
                assert entry.config is not None
                self.configs.append((first + offset, entry.config))

    def truncate_from(self, index: int) -> None:
        """Drop the entries from ``index`` on (a conflicting tail, Raft §5.3), and the
        configurations they brought."""
        assert index > self.snapshot_index, "a snapshot is never truncated"
        self.terms.truncate_from(index)
        if index > self.stable:
            del self.held[index - self.stable - 1:]
        else:
            self.held = []
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
            index = self.terms.run_start(index) - 1  # the whole run has that term
        return max(index, self.snapshot_index)

    def compact(self, index: int) -> None:
        """Forget the entries through ``index``: a snapshot covers them."""
        if index <= self.snapshot_index:
            return
        term = self.term_at(index)
        assert term is not None and index <= self.last_index
        config = self.config_at(index)
        self.terms.drop_through(index)
        if index > self.stable:
            del self.held[: index - self.stable]
            self.stable = index
        self.snapshot_index, self.snapshot_term = index, term
        self.configs = [(index, config)] + [c for c in self.configs if c[0] > index]
        self.persisted = max(self.persisted, index)

    def restore(self, index: int, term: int, config: Config) -> None:
        """Become the log a snapshot leaves: nothing after ``index``."""
        self.terms = TermRuns(index)
        self.held = []
        self.snapshot_index, self.snapshot_term = index, term
        self.configs = [(index, config)]
        self.stable = self._persisted = index

    def config_at(self, index: int) -> Config:
        """The configuration in force at ``index``."""
        return next(config for at, config in reversed(self.configs) if at <= index)
