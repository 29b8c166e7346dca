"""The daemon's write-ahead log of inputs: what it needs to come back after a crash exactly
where it stopped (issue 11).

Theory of operation
-------------------
The core is deterministic: the same inputs in the same order give the same state and the
same effects.  So the daemon logs every input that changes its process (client requests,
peer frames with their link numbers, ticks, hellos and gossip), and the control frames it
sends of its own accord, and syncs the log before it sends anything of the same step
(etcd raft's ``Ready``: saved before messages go out).  At start it replays the log
through the same code: the process, its peers' frame numbers, the outbox of every link
and the retry window come back as they were.  Frames sent again are skipped by the peers
(runtime/network/link_receiver.py); clients that retry get the first attempt's outcome
(host/retries.py).

Files in the data directory:

- ``meta.json``: format version, process id, nonce (the daemon's incarnation, kept across
  restarts), structure and members; a directory of another cluster or version is
  refused.
- ``inputs-NNNNNNNN.log``: records ``u32 length | u32 crc32 | msgpack payload``.  A torn
  or corrupt tail (a crash in the middle of a write) is cut at open, with one log line.
  The records are those of the process's replicated log (docs/replication.md §6.2):
  entries with their index and term, each ``data`` entry one logged input, and the
  replica's hard state (:mod:`skueue.runtime.durability.log_index`).
- ``snapshot.bin``: the state as of an entry, and the segment that follows it.

Sync policies (``--fsync``): ``batch`` (the default) fsyncs once per owner step that
logged anything, before the step's frames and replies go out: an acknowledged operation
survives a crash of the process and of the machine.  ``interval=MS`` fsyncs at most that
often (a power loss may lose the last MS of acknowledged operations; a process crash
loses nothing: the data is in the page cache).  ``never`` leaves it to the kernel.
"""

from __future__ import annotations

import functools
import json
import os
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import attrs
import msgpack
import structlog

from skueue.replication.config import Config, HostId
from skueue.replication.messages import Entry
from skueue.runtime.durability.log_index import (
    HARD_STATE,
    LogIndex,
    UnreadableLog,
    base_record,
    entry_of,
    entry_record,
)
from skueue.runtime.durability.snapshot_file import (
    fsync_directory,
    read_snapshot,
    write_snapshot,
)
from skueue.runtime.errors import DaemonError
from skueue.runtime.operations.tallies import FSYNC_BUCKETS_S, Histogram

log = structlog.get_logger("skueued")

FORMAT = "skueue-input-log"
# 2: the core gained Hurry; 3: batches, grants and anchors per named queue; 4: leases;
# 5: deleting queues (batches, grants and anchors changed; the "d" record);
# 6: peeks (batches and grants changed; the "v" record); 7: a timeout told to a client
# (the "T" record; requests in the snapshot remember it); 8: configuring a queue (the "K"
# record), deletes that say whether the queue existed, structures taken from the queue;
# 9: every record is a host input (skueue/host/inputs.py, codec in runtime/durability/records.py);
# 10: client requests in their version 3 wire form (skueue/host/requests.py);
# 11: DHT keys by blocks of positions (dht/keys.py: the same peer messages now reach other
# owners, so a replay of a version 10 log would route them elsewhere) and the run messages
# (DhtRun, AnswerRun); 12: the log is the process's replicated log (entries with index
# and term, the hard state, a snapshot's base: runtime/durability/log_index.py)
VERSION = 12
_HEADER = struct.Struct(">II")
# The largest record read back (a record holds one client request or one peer frame).
RECORD_BYTES_MAX = 64 * 1024 * 1024
# The log file grows by this much at a time (see InputLog.sync).
EXTENT_BYTES = 16 * 1024 * 1024


_PACKER = msgpack.Packer(use_bin_type=True)  # one for all: packb builds one per call


def _pack(record: Any) -> bytes:
    packed: bytes = _PACKER.pack(record)
    return packed


@attrs.frozen
class SyncPolicy:
    """``batch``, ``interval`` (every ``interval_s`` at most) or ``never``."""

    mode: str = "batch"
    interval_s: float = 0.0

    @classmethod
    def parse(cls, text: str) -> SyncPolicy:
        if text in ("batch", "always"):
            return cls("batch")
        if text == "never":
            return cls("never")
        if text.startswith("interval="):
            try:
                ms = float(text.removeprefix("interval="))
            except ValueError:
                ms = -1.0
            if ms > 0:
                return cls("interval", ms / 1000)
        raise ValueError(f"--fsync: expected always, batch, interval=MS or never, not {text!r}")


@attrs.frozen
class Meta:
    process_id: str
    nonce: str
    structure: str
    members: tuple[str, ...]  # a static member's cluster (empty for one that joined)
    join: tuple[str, str] | None = None  # a joined member's seed: its id and address
    left: bool = False  # it left its cluster: it may not come back as that member
    # A static member's peers as it met them at its first start: (id, address) each.
    addresses: tuple[tuple[str, str], ...] = ()
    # The nonce each peer first said hello with, (id, nonce) each: a restart still
    # knows which incarnation of a peer its link counts belong to, and refuses a peer
    # that came back without its state (runtime/network/peers.py, same_incarnation).
    incarnations: tuple[tuple[str, str], ...] = ()
    # The voters of each group (``--replicas``) at the first start: placement depends
    # on it, so a restart with another value is refused (runtime/startup.py).
    replicas: int = 1
    # With --failover: the members taken for lost for good (runtime/re_replication.py),
    # whose copies the groups this daemon leads replace, after a restart too.
    lost: tuple[str, ...] = ()
    # The groups whose homes moved their copy off this daemon (runtime/re_replication.py,
    # placement): a restart does not open them again where the placement put them.
    dropped: tuple[str, ...] = ()
    # A replicated joiner stepped its JoinStart (runtime/startup.py: it waits for its
    # group's second voter, and a restart before then still waits).
    join_started: bool = False


class InputLog:
    """The log of one daemon's data directory; opened by :meth:`open`."""

    def __init__(self, directory: Path, meta: Meta, policy: SyncPolicy) -> None:
        self.directory = directory
        self.meta = meta
        self.policy = policy
        # The last snapshot (its file, checked whole; cleared after the restore) and the
        # segment the log continues in.
        self.snapshot_file: Path | None = None
        self.segment = 0
        # The segments after the snapshot, with where their intact records end, and how
        # many records they hold: the replay reads them (records()).
        self.replay_segments: list[tuple[Path, int, int]] = []  # path, number, end
        self.record_count = 0
        self.end = 0  # where the segment's next record goes
        self.fd = -1
        self.allocated = 0
        self.buffer: list[bytes] = []
        self.buffered = 0  # bytes in the buffer
        self.written = False  # written since the last sync (write()), not synced yet
        self.index = LogIndex()  # which entry each record is, and where
        self.hard_state_due = False  # a new term or vote waits for its fsync
        self.last_sync = 0.0
        self.sync_seconds = Histogram(FSYNC_BUCKETS_S)  # each fdatasync of the log (metrics)

    def _read(self) -> None:
        """The snapshot, and the records of the segments after it; older segments (a
        crash right after a snapshot) are deleted."""
        self.segment, self.snapshot_file = read_snapshot(self.directory)
        segments = sorted(_segments(self.directory))
        for number in segments:
            if number < self.segment:
                (self.directory / _segment_name(number)).unlink()
        later = [n for n in segments if n >= self.segment]
        for number in later:
            path = self.directory / _segment_name(number)
            try:  # one read of the segment checks its records and indexes them
                count, end = _check_records(path, functools.partial(self._note, number))
            except UnreadableLog as e:
                raise DaemonError(f"input log {path}: {e}") from None
            self.replay_segments.append((path, number, end))
            self.record_count += count
        if later:
            self.segment = later[-1]
        self.end = end if later else 0
        self._open_segment()

    def _note(self, segment: int, offset: int, record: Any) -> None:
        self.index.note(record, segment, offset)

    def records(self) -> Iterator[Any]:
        """The inputs of the data entries after the snapshot, in log order, for the
        replay, read one at a time: a segment holds up to ``snapshot_log_bytes`` of
        elements, which the replay does not need in memory all at once."""
        for path, segment, end in self.replay_segments:
            for offset, record in _iter_records(path, end):
                if (record[0] == "e" and record[3] == "data"
                        and self.index.holds(record[1], segment, offset)):  # fmt: skip
                    try:
                        yield msgpack.unpackb(record[4], raw=False, use_list=True)
                    except (ValueError, TypeError) as e:  # msgpack's errors are ValueErrors
                        raise DaemonError(f"input log {path}: entry {record[1]} holds no "
                                          f"input this version reads ({e})") from None

    def _open_segment(self) -> None:
        # Written at ``end`` with pwrite; the file is allocated ahead in extents, so that
        # an fsync of an append does not also have to write the file's new size (the
        # reader stops at the zeros after the last record: no record is empty).
        path = self.directory / _segment_name(self.segment)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.allocated = os.fstat(self.fd).st_size

    def snapshot_due(self, segment_bytes_max: int) -> bool:
        return self.end >= segment_bytes_max

    def snapshot(self, dump: Callable[[BinaryIO], None], index: int, term: int,
                 config: Config, keep_tail: bool = True) -> None:  # fmt: skip
        """Replace everything logged through entry ``index`` (of ``term``, under
        ``config``) by what ``dump`` writes (the daemon's whole state at the end of a
        step, after its sync).  The next segment starts with the hard state and the
        snapshot's position, durable before the snapshot is (a crash in between keeps
        the old segment, whose entries reach that far); the old segment is deleted
        once the snapshot is durable."""
        assert not self.buffer, "a snapshot is taken between steps"
        # Entries after the snapshot (a follower's, not committed yet) go on in the next
        # segment, unless the snapshot replaces the whole log (``keep_tail`` False: one
        # a leader sent); a leader snapshots only with none in flight.
        last = self.index.last_index
        tail = self.read_entries(index + 1, last, 1 << 62) if keep_tail and last > index else []
        old, old_fd = self.segment, self.fd
        self.segment, self.end = old + 1, 0
        self._open_segment()
        term_now, vote = self.index.hard_state
        self.index.restart_at(index, term, config)
        self._buffer([HARD_STATE, term_now, vote])
        self._buffer(base_record(index, term, config))
        if tail:
            self.write_entries(index + 1, tail)
        self._write()
        self._fdatasync()
        size = write_snapshot(self.directory, self.segment, dump)
        os.close(old_fd)
        (self.directory / _segment_name(old)).unlink()
        log.info("input log: took a snapshot", bytes=size, segment=self.segment, index=index)

    @classmethod
    def open(cls, directory: Path, meta: Meta, policy: SyncPolicy) -> InputLog:
        """Open (or start) the log in ``directory`` for a daemon described by ``meta``
        (its members may be empty until the daemon has met its peers); a directory
        written for another process or structure, or by another version, is refused."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DaemonError(f"cannot use {directory} as the data directory: {e}") from None
        meta_path = directory / "meta.json"
        if meta_path.exists():
            stored = read_meta(meta_path)
            if (stored.process_id, stored.structure) != (meta.process_id, meta.structure):
                raise DaemonError(
                    f"{directory} holds the data of process {stored.process_id!r} "
                    f"({stored.structure}), not of {meta.process_id!r} ({meta.structure})"
                )
            meta = stored
        else:
            _write_meta(meta_path, meta)
        opened = cls(directory, meta, policy)
        opened._read()
        return opened

    def fresh(self) -> bool:
        """Nothing was logged here yet (a first start)."""
        return not self.record_count and self.snapshot_file is None

    def record_join(self, seed: str, address: str) -> None:
        """A first start that joined through ``seed``: a restart builds the same joining
        process again (and never asks the seed again)."""
        self.meta = attrs.evolve(self.meta, join=(seed, address))
        _write_meta(self.directory / "meta.json", self.meta)

    def record_left(self) -> None:
        """The process has left its cluster (its data is with the others): a restart
        from this directory is refused.  (One that crashed while leaving comes back and
        finishes leaving: its log holds the leave.)"""
        if not self.meta.left:
            self.meta = attrs.evolve(self.meta, left=True)
            _write_meta(self.directory / "meta.json", self.meta)

    def record_members(self, members: list[str], addresses: list[tuple[str, str]]) -> None:
        """A static member's first start: the cluster it met through ``--peers`` (its
        process ids, this one's among them, and the others' addresses).  A restart builds
        the same ring from them and replays the log, without waiting for any peer: one
        that left since, or is down, must not hold the start up."""
        self.meta = attrs.evolve(
            self.meta, members=tuple(sorted(members)), addresses=tuple(sorted(addresses))
        )
        _write_meta(self.directory / "meta.json", self.meta)

    def record_incarnation(self, peer: str, nonce: str) -> None:
        """The first hello of ``peer`` said ``nonce``: kept before the link carries a
        frame, so that no restart takes another incarnation of it for this one."""
        known = dict(self.meta.incarnations)
        if known.get(peer) != nonce:
            known[peer] = nonce
            self.meta = attrs.evolve(self.meta, incarnations=tuple(sorted(known.items())))
            _write_meta(self.directory / "meta.json", self.meta)

    def record_lost(self, hosts: Iterable[str]) -> None:
        """Members taken for lost for good (:attr:`Meta.lost`)."""
        self._record(attrs.evolve(self.meta, lost=tuple(sorted({*self.meta.lost, *hosts}))))

    def record_join_started(self) -> None:
        self._record(attrs.evolve(self.meta, join_started=True))

    def record_dropped(self, groups: Iterable[str]) -> None:
        """Groups whose copy here was moved away (:attr:`Meta.dropped`)."""
        dropped = tuple(sorted({*self.meta.dropped, *groups}))
        self._record(attrs.evolve(self.meta, dropped=dropped))

    def _record(self, meta: Meta) -> None:
        if meta != self.meta:
            self.meta = meta
            _write_meta(self.directory / "meta.json", self.meta)

    # -- the replica's log (the replica's AppendLocal and SaveHardState effects) --------

    def write_entries(self, index: int, entries: Sequence[Entry]) -> None:
        """The log from ``index`` on is now ``entries`` (written at the next sync)."""
        offsets = [self._buffer(entry_record(at, entry)) for at, entry in enumerate(entries, index)]
        self.index.extend(index, entries, self.segment, offsets)

    def save_hard_state(self, term: int, vote: HostId | None) -> None:
        """The replica's term and vote (written, and fsynced whatever the policy, at the
        next sync: a vote forgotten could elect two leaders in one term)."""
        self._buffer([HARD_STATE, term, vote])
        self.index.hard_state = (term, vote)
        self.hard_state_due = True

    def read_entries(self, first: int, last: int, bytes_max: int) -> list[Entry]:
        """The replica's ``EntryReader``: entries the log wrote (and synced), read back
        from their segments, as many as ``bytes_max`` allows (at least one)."""
        out: list[Entry] = []
        size = 0
        for at in range(first, last + 1):
            segment, offset = self.index.position(at)
            entry = entry_of(self._read_record(segment, offset))
            size += entry.size()
            if out and size > bytes_max:
                break
            out.append(entry)
        return out

    def _read_record(self, segment: int, offset: int) -> Any:
        if segment == self.segment:
            return _pread_record(self.fd, offset)
        fd = os.open(self.directory / _segment_name(segment), os.O_RDONLY)
        try:
            return _pread_record(fd, offset)
        finally:
            os.close(fd)

    def _buffer(self, record: list[Any]) -> int:
        """Buffer ``record`` for the next write; where in the segment it will lie."""
        payload = _pack(record)
        framed = _HEADER.pack(len(payload), zlib.crc32(payload)) + payload
        offset = self.end + self.buffered
        self.buffer.append(framed)
        self.buffered += len(framed)
        return offset

    def _write(self) -> None:
        data = b"".join(self.buffer)
        self.buffer.clear()
        self.buffered = 0
        if self.end + len(data) > self.allocated:
            self.allocated = self.end + len(data) + EXTENT_BYTES
            os.posix_fallocate(self.fd, 0, self.allocated)
            os.fsync(self.fd)  # the new size, once per extent
        os.pwrite(self.fd, data, self.end)
        self.end += len(data)

    def write(self) -> None:
        """Write what is buffered, without syncing it: a leader's appends leave after
        this, so that a crash of the process (not of the machine) cannot leave a
        follower holding entries its leader's own log lacks."""
        if self.buffer:
            self._write()
            self.written = True

    def sync(self, now: float) -> None:
        """Write what the step logged and make it durable as the policy says: called
        before the step's frames and replies go out (one fsync per step: group commit)."""
        wrote, self.written = self.written or bool(self.buffer), False
        if self.buffer:
            self._write()
        if wrote and (self.policy.mode == "batch" or self.hard_state_due):
            self.hard_state_due = False
            self._fdatasync()
            return
        if self.policy.mode == "interval" and now - self.last_sync >= self.policy.interval_s:
            self._fdatasync()
            self.last_sync = now

    def _fdatasync(self) -> None:
        began = time.perf_counter()
        os.fdatasync(self.fd)
        self.sync_seconds.observe(time.perf_counter() - began)

    def close(self) -> None:
        os.close(self.fd)


def directory_name(process_id: str) -> str:
    """A directory name for a process id (an address has a colon, an IPv6 one brackets)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in process_id)


def _segment_name(number: int) -> str:
    return f"inputs-{number:08d}.log"


def _segments(directory: Path) -> list[int]:
    numbers = []
    for path in directory.glob("inputs-*.log"):
        digits = path.name.removeprefix("inputs-").removesuffix(".log")
        if digits.isdigit():
            numbers.append(int(digits))
    return numbers


def read_meta(path: Path) -> Meta:
    """A data directory's ``meta.json``."""
    try:
        raw = json.loads(path.read_text())
        if raw.get("format") != FORMAT or raw.get("version") != VERSION:
            raise DaemonError(
                f"{path.parent} was written by another version of skueued "
                f"({raw.get('format')!r} version {raw.get('version')!r}; this one reads "
                f"{FORMAT!r} version {VERSION}); to upgrade, drain the queues and start "
                "every member with an empty directory"
            )
        join = raw.get("join")
        return Meta(
            raw["process_id"],
            raw["nonce"],
            raw["structure"],
            tuple(raw["members"]),
            None if join is None else (str(join[0]), str(join[1])),
            bool(raw.get("left", False)),
            tuple((str(peer), str(at)) for peer, at in raw.get("addresses", ())),
            tuple((str(peer), str(nonce)) for peer, nonce in raw.get("incarnations", ())),
            int(raw.get("replicas", 1)),
            tuple(str(host) for host in raw.get("lost", ())),
            tuple(str(group) for group in raw.get("dropped", ())),
            bool(raw.get("join_started", False)),
        )
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DaemonError(f"{path} is not a skueued data directory's meta file: {e}") from None


def _write_meta(path: Path, meta: Meta) -> None:
    raw = {"format": FORMAT, "version": VERSION, **attrs.asdict(meta)}
    raw["members"] = list(meta.members)
    raw["join"] = None if meta.join is None else list(meta.join)
    raw["addresses"] = [list(pair) for pair in meta.addresses]
    raw["incarnations"] = [list(pair) for pair in meta.incarnations]
    raw["lost"] = list(meta.lost)
    raw["dropped"] = list(meta.dropped)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(raw, indent=1))
    with open(temporary, "rb") as f:
        os.fsync(f.fileno())
    os.replace(temporary, path)
    fsync_directory(path.parent)


def _check_records(path: Path, each: Callable[[int, Any], None]) -> tuple[int, int]:
    """How many whole, intact records the segment holds, and where they end; a torn or
    corrupt tail is cut off the file (the allocated, never written rest after the records
    is all zeros).  Reads one record at a time, and hands each intact one to ``each``
    with its offset."""
    if not path.exists():
        return 0, 0
    size = path.stat().st_size
    count = offset = 0
    with path.open("rb") as f:
        while True:
            body = _next_record(f, offset, size)
            if body is None:
                break
            each(offset, msgpack.unpackb(body, raw=False, use_list=True))
            count += 1
            offset += _HEADER.size + len(body)
        f.seek(offset)
        torn = any(chunk.strip(b"\0") for chunk in iter(lambda: f.read(1 << 20), b""))
    if torn:
        log.warning(
            "input log: cut a torn or corrupt tail (a crash in the middle of a write)",
            path=str(path),
            kept_records=count,
            cut_bytes=size - offset,
        )
        with open(path, "r+b") as f:
            f.truncate(offset)
            os.fsync(f.fileno())
    return count, offset


def _iter_records(path: Path, end: int) -> Iterator[tuple[int, Any]]:
    """The records of a segment up to ``end`` (checked by :func:`_check_records`), each
    with its offset."""
    with path.open("rb") as f:
        offset = 0
        while offset < end:
            body = _next_record(f, offset, end)
            assert body is not None, f"{path} changed under the replay"
            yield offset, msgpack.unpackb(body, raw=False, use_list=True)
            offset += _HEADER.size + len(body)


def _pread_record(fd: int, offset: int) -> Any:
    """The record at ``offset`` of an open segment (one the index points at)."""
    length, crc = _HEADER.unpack(os.pread(fd, _HEADER.size, offset))
    body = os.pread(fd, length, offset + _HEADER.size)
    if len(body) != length or zlib.crc32(body) != crc:
        raise DaemonError(f"input log: the record at {offset} changed on disk under us")
    return msgpack.unpackb(body, raw=False, use_list=True)


def _next_record(f: BinaryIO, offset: int, size: int) -> bytes | None:
    """The body of the record at ``offset`` (the file is positioned there), or None where
    the intact records stop."""
    header = f.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    length, crc = _HEADER.unpack(header)
    if length == 0 or length > RECORD_BYTES_MAX or offset + _HEADER.size + length > size:
        return None
    body = f.read(length)
    if len(body) != length or zlib.crc32(body) != crc:
        return None
    return body
