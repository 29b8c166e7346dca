"""A follower replica of another process's group (docs/replication.md §6.2): the
copy this daemon keeps of the input log of one of the ``k − 1`` processes before it in
ring order (skueue/host/placement.py), and the state that log makes.

It keeps that log in an input log of its own (format 12), in ``replicas/ID`` under the
daemon's data directory, writes what the leader appends, and acknowledges it only
once it is synced, at the end of the owner's step (runtime/replica_driver.py).  It
answers votes (a leader that restarts campaigns); it stands for election itself only
with ``--failover``, once its leader was silent for an election timeout, and the
daemon then serves the process as a stand-in (runtime/stand_in.py).

Once synced, the committed entries are applied to the process's state
(runtime/applied_state.py: its host, its outboxes), with the elements in an entry store
of the slot's own (``replicas/ID/entries``).  Past ``--snapshot-bytes`` the slot
snapshots that state and drops the log before it (:meth:`FollowerSlot.compact_if_due`),
as the daemon does for its own process; a restart restores the snapshot and applies
the rest as the leader's commit reaches it again.

A follower that fell behind its leader's last snapshot gets that snapshot's state
(runtime/snapshot_transfer.py) and goes on from there.  A copy without a state: one
whose leader's state was over ``snapshot_transfer_bytes_max``, whose state differed
from its leader's at a check (a bug), whose elements were damaged, or which a release
before this one wrote.  Such a copy
keeps the log and still counts for the commit; it could not take the process over.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgpack
import structlog

from skueue.host.host import Host
from skueue.replication.config import Config, HostId
from skueue.replication.effects import InstallSnapshot
from skueue.replication.inputs import Applied, SnapshotTaken
from skueue.replication.messages import Message, Snapshot
from skueue.replication.settings import ReplicaSettings
from skueue.runtime.applied_state import AppliedState
from skueue.runtime.durability.entry_store import (
    ENTRIES_DIRECTORY,
    SnapshotEntryStore,
    named_records,
)
from skueue.runtime.durability.input_log import (
    InputLog,
    Meta,
    SyncPolicy,
    directory_name,
    read_meta,
)
from skueue.runtime.durability.snapshot_file import open_snapshot
from skueue.runtime.durability.snapshots import (
    DaemonSnapshot,
    capture_state,
    install_outbox,
    restore,
)
from skueue.runtime.errors import DaemonError
from skueue.runtime.limits import Limits
from skueue.runtime.network.link_sender import LinkSender
from skueue.runtime.replica_driver import ReplicaDriver, SendMessage
from skueue.runtime.snapshot_transfer import Assembly, TransferError, decode_transfer

log = structlog.get_logger("skueued")

REPLICAS_DIRECTORY = "replicas"
# Without ``--failover`` it times elections (to know a stray's vote request from a
# restarted leader's) but never stands in one.
FOLLOWER_SLOT = ReplicaSettings(campaigns=False)
# With it, a copy that holds a state stands once its leader was silent for an election
# timeout (a copy without one could not serve the process).
FAILOVER_SLOT = ReplicaSettings(campaigns=True)
# Entries applied in one owner step, at most (a leader's step appends far less).
APPLY_STEP_BYTES = 4 * 1024 * 1024
# Checks from the leader waiting for this copy to reach their index.
CHECKS_PENDING_MAX = 16

MakeHost = Callable[[SnapshotEntryStore], Host]


class FollowerSlot(ReplicaDriver):
    state: AppliedState | None
    store: SnapshotEntryStore  # the elements of the state's tables
    checks: dict[int, str]  # index -> the leader's digest there, not reached yet
    checked: int  # checks this copy passed
    diverged: int  # and failed
    assembly: Assembly | None  # the parts of a snapshot from the leader, so far
    failover: bool  # it stands for election when its leader is silent (--failover)

    @classmethod
    def open(
        cls,
        data_dir: Path,
        group: str,
        replica: HostId,
        first_config: Config,
        send: SendMessage,
        policy: SyncPolicy,
        meta: Meta,
        make_host: MakeHost | None,
        limits: Limits,
        restart: bool = False,
        failover: bool = False,
    ) -> FollowerSlot:
        """The slot of ``group`` in ``data_dir`` (started empty the first time);
        ``meta`` describes the daemon that keeps it (its nonce, its ``--replicas``);
        ``make_host`` makes the group's process as it stood before its first input
        (None: a copy of a group this daemon did not start with, which has a state only
        from its leader's snapshot: runtime/re_replication.py sends one first).

        A copy found empty at a ``restart`` of its daemon (one restored from its group's
        copies, runtime/restore.py, or whose ``replicas/`` was lost) may have acked
        entries it no longer holds: it starts with the amnesia guard set (I6), so that
        its answers do not count, and its leader starts it over, until it has caught up
        with the leader's commit.  (Else the leader, which knows it acked more, would
        take its refusals for late answers and never send it what it lacks.)"""
        directory = data_dir / REPLICAS_DIRECTORY / directory_name(group)
        slot_meta = Meta(group, meta.nonce, meta.structure, (), replicas=meta.replicas)
        input_log = InputLog.open(directory, slot_meta, policy)
        forgotten = restart and input_log.fresh()
        if forgotten:
            log.info("a copy of another process's log is empty; it counts again once it "
                     "has caught up with its leader", group=group)  # fmt: skip
        slot = cls(group, replica, input_log, first_config, send, FOLLOWER_SLOT, forgotten)
        slot.store = SnapshotEntryStore(directory / ENTRIES_DIRECTORY, limits.entry_page_bytes,
                                        limits.entry_pages_mapped_max)  # fmt: skip
        slot.state = slot._restore(make_host)
        slot.checks, slot.checked, slot.diverged, slot.assembly = {}, 0, 0, None
        slot.failover = failover
        return slot

    def _restore(self, make_host: MakeHost | None) -> AppliedState | None:
        """The state as the last snapshot left it (the entries after it are applied as
        the commit reaches them again), or as the process started (none yet without
        ``make_host``)."""
        input_log, store = self.input_log, self.store
        path, input_log.snapshot_file = input_log.snapshot_file, None
        state = None
        if path is None:
            state = None if make_host is None else AppliedState(make_host(store), 0)
        else:
            try:
                with open_snapshot(path) as f:
                    snapshot = restore(f, store)
            except Exception:  # noqa: BLE001 - an empty one (no state), or unreadable
                log.warning("a replica has no state to apply its group's log to (its "
                            "snapshot holds none); its copy of the log still counts",
                            group=self.group)  # fmt: skip
            else:
                base = input_log.index.base
                assert base is not None
                state = _applied(snapshot, base[0])
        try:
            store.keep_only(() if state is None else named_records(state.host.process))
        except DaemonError as e:
            # The copy only: the daemon serves on, and the copy keeps the log.
            log.warning("a replica's elements are damaged; it keeps the log without a "
                        "state", group=self.group, error=str(e))  # fmt: skip
            state = None
            store.keep_only(())
        return state

    def receive(self, sender: HostId, message: Message) -> None:
        """A replication message; a snapshot that came in parts takes them as its data,
        and is dropped if they are not whole (the leader sends it again)."""
        if isinstance(message, Snapshot) and not message.data and self.assembly is not None:
            parts, self.assembly = self.assembly, None
            if (parts.term, parts.index) == (message.term, message.index):
                if not parts.whole:
                    return
                message = dataclasses.replace(message, data=bytes(parts.data))
        rebuilding = self.node.may_have_forgotten
        super().receive(sender, message)
        if rebuilding and not self.node.may_have_forgotten:
            log.info("a copy of another process's log caught up with its leader; it counts "
                     "again", group=self.group, index=self.node.last_index)  # fmt: skip

    def tick(self) -> None:
        """A heartbeat interval passed: with ``--failover``, a copy that holds a state
        stands for election once its leader was silent for an election timeout."""
        settings = FAILOVER_SLOT if self.failover and self.state is not None else FOLLOWER_SLOT
        if self.node.settings is not settings:
            self.node.settings = settings
        super().tick()

    @property
    def elected(self) -> bool:
        """It won an election: the process is this daemon's to serve (runtime/stand_in.py)."""
        return self.node.role == "leader"

    def take_the_lead(self) -> AppliedState:
        """The state to serve the process from, just elected (runtime/stand_in.py): the
        entries of the log not applied yet are stepped first (the last leader's tail,
        which this replica's ``took_over`` entry commits)."""
        state = self.state
        assert state is not None, "a copy without a state never stands"
        self.checks.clear()
        last = self.node.last_index
        while state.applied < last:
            for index, records in self._committed(state.applied + 1, last):
                state.apply(records)
                state.applied = index
        self.store.end_step()
        return state

    # -- applying -------------------------------------------------------------------------

    def end_step(self, now: float) -> None:
        """Sync and acknowledge what the leader appended (runtime/replica_driver.py),
        then apply what is committed of it."""
        super().end_step(now)
        state = self.state
        if state is None or self.node.commit <= state.applied:
            return
        try:
            self._apply_through(state, self.node.commit)
        except Exception:
            # The leader stepped these inputs: failing here is a bug, of this copy only.
            log.critical("bug: a replica could not apply its group's log; its state is "
                         "dropped", group=self.group, applied=state.applied,
                         exc_info=True)  # fmt: skip
            self._drop_state()
            return
        self.store.end_step()

    def _apply_through(self, state: AppliedState, commit: int) -> None:
        for index, records in self._committed(state.applied + 1, commit):
            state.apply(records)
            state.applied = index
            expected = self.checks.pop(index, None)
            if expected is not None:
                self._compare(state, index, expected)
                if self.state is None:
                    return

    def _committed(self, first: int, last: int) -> Iterator[tuple[int, list[tuple[int, Any]]]]:
        """The records of entries ``first`` to ``last``, at most ``APPLY_STEP_BYTES`` of
        them (a copy far behind, after a restart, catches up over several steps rather
        than holding up its daemon's own process in one), in runs that end at the last
        one read or at an index a check waits for: ``(run's last index, [(index,
        record)...])``."""
        records: list[tuple[int, Any]] = []
        entries = self.input_log.read_entries(first, last, APPLY_STEP_BYTES)
        for index, entry in enumerate(entries, first):
            if entry.kind == "data":
                records.append((index, msgpack.unpackb(entry.data, raw=False)))
            if index in self.checks or index == first + len(entries) - 1:
                yield index, records
                records = []

    def check(self, index: int, digest: str) -> None:
        """The leader's digest of its state at ``index`` (taken at its snapshot there)."""
        state = self.state
        if state is None or index < state.applied:
            return  # past it already (the check came late): nothing to compare
        if index == state.applied:
            self._compare(state, index, digest)
        elif len(self.checks) < CHECKS_PENDING_MAX:
            self.checks[index] = digest

    def _compare(self, state: AppliedState, index: int, expected: str) -> None:
        if state.digest() == expected:
            self.checked += 1
            return
        self.diverged += 1
        log.critical("bug: a replica's state differs from its leader's; it is dropped "
                     "(its copy of the log still counts)", group=self.group,
                     index=index)  # fmt: skip
        self._drop_state()

    def _drop_state(self) -> None:
        """No state from here; its elements leave the store once a snapshot without
        them is durable (the one on disk may still name them)."""
        state, self.state = self.state, None
        self.checks.clear()
        if state is not None:
            for record in named_records(state.host.process):
                self.store.remove(record)

    def acknowledged(self, watermarks: dict[str, int]) -> None:
        """The leader's peers handled its frames up to these numbers."""
        if self.state is not None:
            self.state.acknowledged(watermarks)

    # -- bounded copies -------------------------------------------------------------------

    def compact_if_due(self, segment_bytes_max: int) -> None:
        """Keep the copy bounded: once its log has grown past ``segment_bytes_max`` (the
        daemon's ``--snapshot-bytes``), snapshot the state as of the last entry applied
        (all committed) and drop the log before it.  A copy without a state drops what
        the group committed, an empty snapshot in its place."""
        node, state = self.node, self.state
        index = node.commit if state is None else state.applied
        if not self.input_log.snapshot_due(segment_bytes_max) or index <= node.snapshot_index:
            return
        term = node.term_at(index)
        assert term is not None
        self._snapshot(index, term, node.log.config_at(index), keep_tail=True)
        self.step(Applied(index))
        self.step(SnapshotTaken(index))

    def _snapshot(self, index: int, term: int, config: Config, keep_tail: bool) -> None:
        write_state(self.input_log, self.store, self.state, index, term, config, keep_tail)

    def install(self, snapshot: InstallSnapshot) -> None:
        """The leader's snapshot replaces the whole copy, durably before the ack (the
        input log syncs it): its state (runtime/snapshot_transfer.py), or none where the
        leader sent none or what it sent is not a state."""
        self._drop_state()
        self.state = install_snapshot(self.input_log, self.store, snapshot, self.group)

    def stats(self) -> dict[str, Any]:
        state = self.state
        config = self.node.config
        return {
            "voters": list(config.voters),  # as this copy's log says (re-replication)
            "learners": list(config.learners),
            "applied": None if state is None else state.applied,
            "checked": self.checked,
            "diverged": self.diverged,
            "rebuilding": self.node.may_have_forgotten,
        }

    def close(self) -> None:
        self.input_log.close()
        self.store.close()

    def discard(self) -> None:
        """The copy is no longer wanted (its process left the cluster, or its home moved
        it to another member): it goes, from the disk too (its ``meta.json`` first: a
        crash halfway leaves nothing that opens again)."""
        self.close()
        directory = self.input_log.directory
        (directory / "meta.json").unlink(missing_ok=True)
        shutil.rmtree(directory, ignore_errors=True)


def copies_on_disk(data_dir: Path) -> list[str]:
    """The processes whose copies ``data_dir`` holds (under ``replicas/``), by the
    process id each copy's ``meta.json`` names."""
    found = []
    for meta in sorted((data_dir / REPLICAS_DIRECTORY).glob("*/meta.json")):
        found.append(read_meta(meta).process_id)
    return found


def write_state(
    input_log: InputLog,
    store: SnapshotEntryStore,
    state: AppliedState | None,
    index: int,
    term: int,
    config: Config,
    keep_tail: bool,
) -> None:
    """Write ``state`` (or none) as the log's snapshot at ``index``; the elements
    removed since the last one go once it is durable."""
    dump: Callable[[BinaryIO], None] = _nothing
    if state is not None:
        dump = lambda f: capture_state(f, state.host, state.handled,  # noqa: E731
                                       state.outboxes, store)  # fmt: skip
    store.before_snapshot()
    input_log.snapshot(dump, index, term, config, keep_tail=keep_tail)
    store.after_snapshot()


def install_snapshot(
    input_log: InputLog, store: SnapshotEntryStore, snapshot: InstallSnapshot, group: str
) -> AppliedState | None:
    """A snapshot from the group's leader as the log's, durably: its state, or none
    where the leader sent none or what it sent is not a state (a follower slot, or a
    home that is a backup of its process: runtime/failover.py)."""
    state = None
    if snapshot.data:
        first_new = store.inner.next_record
        try:
            received = decode_transfer(snapshot.data, store)
        except TransferError as e:
            log.warning("a replica's snapshot from its leader holds no state it can "
                        "take; it keeps the log from there without one",
                        group=group, index=snapshot.index, error=str(e))  # fmt: skip
            for record, _, _ in list(store.live()):
                if record >= first_new:  # appended by the decoding
                    store.remove(record)
        else:
            state = _applied(received, snapshot.index)
    if state is None:
        log.warning("a replica fell behind its leader's last snapshot and got no state "
                    "with it; it keeps the log from there, without a state",
                    group=group, index=snapshot.index)  # fmt: skip
    write_state(input_log, store, state, snapshot.index, snapshot.last_term, snapshot.config,
                keep_tail=False)  # fmt: skip
    return state


def _applied(snapshot: DaemonSnapshot, index: int) -> AppliedState:
    outboxes = {}
    for peer, (blobs, next_number, base) in snapshot.outboxes.items():
        link = outboxes[peer] = LinkSender()
        install_outbox(link, blobs, next_number, base)
    return AppliedState(snapshot.host, index, dict(snapshot.handled), outboxes)


def _nothing(_f: BinaryIO) -> None:
    """The snapshot of a copy without a state."""
