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

Not built yet either: the follower does not apply the entries to a host of its own,
and does not compact its copy (it grows with the leader's log; the leader's snapshots
are not sent).
"""

from __future__ import annotations

from pathlib import Path

from skueue.replication.config import Config, HostId
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

    def close(self) -> None:
        self.input_log.close()
