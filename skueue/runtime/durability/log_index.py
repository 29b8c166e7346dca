"""The input log as a replicated log (docs/replication.md §6.2): which entry of the
process's group each record is, and where it lies, so that the replica can start from
the disk and read entries back (:class:`~skueue.replication.log.EntryReader`).

Records of the input log's segments (msgpack lists, framed by
:mod:`skueue.runtime.durability.input_log`):

- ``["e", index, term, kind, data, config]``: an entry of the group's log.  A ``data``
  entry's data is one host input's record (:mod:`skueue.runtime.durability.records`),
  packed; ``config`` is ``[voters, learners]`` for a ``config`` entry, else nil.  An
  entry at an index already written replaces it and everything after (Raft §5.3: a
  follower's conflicting tail; a group of one voter never does it);
- ``["h", term, vote]``: the replica's hard state (Raft's persistent term and vote);
- ``["s", index, term, voters, learners]``: the first records of a segment that follows
  a snapshot, with the hard state: the position and configuration the snapshot is at.

The index keeps 13 bytes of position and kind per entry, a run per term, never the
data.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

from skueue.replication.config import Config, HostId
from skueue.replication.messages import ENTRY_KINDS, Entry
from skueue.replication.terms import TermRuns

ENTRY, HARD_STATE, BASE = "e", "h", "s"
_KIND_CODES = {kind: code for code, kind in enumerate(ENTRY_KINDS)}


class UnreadableLog(ValueError):
    """A record that is no entry, hard state or base this version writes."""


def entry_record(index: int, entry: Entry) -> list[Any]:
    config = entry.config
    plain = None if config is None else [list(config.voters), list(config.learners)]
    return [ENTRY, index, entry.term, entry.kind, entry.data, plain]


def entry_of(record: list[Any]) -> Entry:
    """The entry an ``"e"`` record holds."""
    _, _, term, kind, data, config = record
    return Entry(term, kind, data, None if config is None else Config.of(*config))


def base_record(index: int, term: int, config: Config) -> list[Any]:
    return [BASE, index, term, list(config.voters), list(config.learners)]


class LogIndex:
    def __init__(self) -> None:
        self.hard_state: tuple[int, HostId | None] = (0, None)
        self.base: tuple[int, int, Config] | None = None
        """The snapshot's index, term and configuration (None: no snapshot yet)."""
        self._hold_from(1)

    def _hold_from(self, first: int) -> None:
        self.first = first
        """The index of the first entry held (the snapshot's index + 1)."""
        self.segments = array("i")
        self.offsets = array("q")
        self.terms = TermRuns(first - 1)
        self.kinds = array("b")  # positions in ENTRY_KINDS
        self.configs: dict[int, Config] = {}  # the config entries' configurations

    @property
    def last_index(self) -> int:
        return self.first + len(self.offsets) - 1

    def extend(self, index: int, entries: Sequence[Entry], segment: int,
               offsets: Sequence[int]) -> None:  # fmt: skip
        """Entries from ``index`` on are written at ``offsets`` of ``segment``: they
        replace what the log held from ``index`` on."""
        last = self.last_index
        if not self.first <= index <= last + 1:
            raise UnreadableLog(f"entry {index} written after a log that ends at {last}")
        if index <= last:
            keep = index - self.first
            for column in (self.segments, self.offsets, self.kinds):
                del column[keep:]
            self.terms.truncate_from(index)
            for at in [at for at in self.configs if at >= index]:
                del self.configs[at]
        self.segments.extend([segment] * len(entries))
        self.offsets.extend(offsets)
        for entry in entries:
            self.terms.append(entry.term)
        self.kinds.extend([_KIND_CODES[entry.kind] for entry in entries])
        for at, entry in enumerate(entries, index):
            if entry.config is not None:
                self.configs[at] = entry.config

    def restart_at(self, index: int, term: int, config: Config) -> None:
        """A snapshot at ``index`` covers everything before: nothing is held."""
        self._hold_from(index + 1)
        self.base = (index, term, config)

    def note(self, record: Any, segment: int, offset: int) -> None:
        """Index a record read back at start."""
        try:
            tag = record[0]
            if tag == ENTRY:
                self.extend(record[1], [entry_of(record)], segment, [offset])
            elif tag == HARD_STATE:
                self.hard_state = (record[1], record[2])
            elif tag == BASE:
                index, term = record[1], record[2]
                # A crash between a segment's base and its snapshot leaves the older
                # segment in place: its entries reach this index, and stay.
                if self.last_index < index:
                    self.restart_at(index, term, Config.of(record[3], record[4]))
            else:
                raise UnreadableLog(f"unknown record {tag!r:.20}")
        except (TypeError, ValueError, IndexError) as e:
            raise UnreadableLog(f"a record this version cannot read ({e}): "
                                f"{record!r:.80}") from None  # fmt: skip

    def position(self, index: int) -> tuple[int, int]:
        at = index - self.first
        return self.segments[at], self.offsets[at]

    def holds(self, index: int, segment: int, offset: int) -> bool:
        """Whether the entry at ``offset`` of ``segment`` is the one the log holds at
        ``index`` (not one a later write replaced)."""
        return self.first <= index <= self.last_index and self.position(index) == (
            segment,
            offset,
        )

    def bare_entries(self) -> BareEntries:
        """The entries held, without their data: what the replica starts from (it reads
        the data back when it needs it)."""
        return BareEntries(self)


class BareEntries(Sequence[Entry]):
    """The entries of a :class:`LogIndex` without data, made one at a time as read (a
    log of a million entries is never held as a million objects)."""

    def __init__(self, log: LogIndex) -> None:
        self.log = log

    def __len__(self) -> int:
        return len(self.log.offsets)

    @overload
    def __getitem__(self, at: int) -> Entry: ...
    @overload
    def __getitem__(self, at: slice) -> Sequence[Entry]: ...
    def __getitem__(self, at: int | slice) -> Entry | Sequence[Entry]:
        if isinstance(at, slice):
            return [self[i] for i in range(*at.indices(len(self)))]
        log = self.log
        return Entry(log.terms.at(log.first + at), ENTRY_KINDS[log.kinds[at]], b"",
                     log.configs.get(log.first + at))  # fmt: skip

    def __iter__(self) -> Iterator[Entry]:
        return (self[at] for at in range(len(self)))
