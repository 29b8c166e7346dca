"""A follower replica of another process's group (docs/replication.md §6.2): the
copy this daemon keeps of the input log of one of the ``k − 1`` processes before it in
ring order (skueue/host/placement.py).

It keeps that log in an input log of its own (format 12), in ``replicas/ID`` under the
daemon's data directory, writes what the leader appends, and acknowledges it only
once it is synced, at the end of the owner's step (runtime/replica_driver.py).  It
answers votes (a leader that restarts campaigns), and it never campaigns itself
(``ReplicaSettings.campaigns`` off).  That is the half of the group a
failover needs (stage 2b of §11, not built): until then only the home daemon leads its
process, and a follower's copy is what lets a majority acknowledge a step.

Not built yet either: the follower does not apply the entries to a host of its own.
Its copy is kept bounded all the same: past ``--snapshot-bytes`` it drops what the
group committed (:meth:`FollowerSlot.compact_if_due`), so it holds the inputs since
then, not yet a state they apply to.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from skueue.replication.config import Config, HostId
from skueue.replication.effects import InstallSnapshot
from skueue.replication.inputs import Applied, SnapshotTaken
from skueue.replication.settings import ReplicaSettings
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy, directory_name
from skueue.runtime.replica_driver import ReplicaDriver, SendMessage

REPLICAS_DIRECTORY = "replicas"
# It times elections (to know a stray's vote request from a restarted leader's) but never
# stands in one.
FOLLOWER_SLOT = ReplicaSettings(campaigns=False)


class FollowerSlot(ReplicaDriver):
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
    ) -> FollowerSlot:
        """The slot of ``group`` in ``data_dir`` (started empty the first time);
        ``meta`` describes the daemon that keeps it (its nonce, its ``--replicas``)."""
        directory = data_dir / REPLICAS_DIRECTORY / directory_name(group)
        slot_meta = Meta(group, meta.nonce, meta.structure, (), replicas=meta.replicas)
        input_log = InputLog.open(directory, slot_meta, policy)
        return cls(group, replica, input_log, first_config, send, FOLLOWER_SLOT)

    def compact_if_due(self, segment_bytes_max: int) -> None:
        """Keep the copy bounded: once its log has grown past ``segment_bytes_max`` (the
        daemon's ``--snapshot-bytes``), drop what the group committed.  An empty
        snapshot stands for it: until followers apply the entries to a host of their
        own (failover, stage 2b), there is no state to keep, and a follower never
        sends the entries it dropped (only a leader sends entries)."""
        node, input_log = self.node, self.input_log
        index = node.commit
        if not input_log.snapshot_due(segment_bytes_max) or index <= node.snapshot_index:
            return
        term = node.term_at(index)
        assert term is not None
        input_log.snapshot(_nothing, index, term, node.log.config_at(index))
        self.step(Applied(index))
        self.step(SnapshotTaken(index))

    def install(self, snapshot: InstallSnapshot) -> None:
        """The leader's (empty) snapshot replaces the whole copy, durably before the
        ack (the input log syncs it)."""
        self.input_log.snapshot(_nothing, snapshot.index, snapshot.last_term,
                                snapshot.config, keep_tail=False)  # fmt: skip

    def close(self) -> None:
        self.input_log.close()


def _nothing(_f: BinaryIO) -> None:
    """A follower slot's snapshot: no state (it applies nothing yet)."""
