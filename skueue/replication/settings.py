"""A replica's settings and its durable state at start."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from skueue.replication.config import Config, HostId
from skueue.replication.messages import Entry


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    """Times are in ticks (heartbeat intervals, ``heartbeat_interval_s`` in a daemon)."""

    election_ticks: int = 10
    """The least election timeout; each one is drawn from ``[election_ticks,
    2 × election_ticks)`` (Raft §5.2).  A leader that heard from no majority for this
    long steps down (CheckQuorum, thesis §6.2)."""
    heartbeat_ticks: int = 1
    """A leader sends an append (empty if need be) to every replica this often."""
    inflight_appends_max: int = 256
    """Appends sent to one replica and not yet answered, beyond which the leader waits
    (etcd's ``MaxInflightMsgs``)."""
    append_bytes_max: int = 1 << 20
    """Entry bytes in one append (at least one entry always goes)."""
    append_entries_max: int = 1 << 16
    """Entries in one append: no more than the codec takes (``CodecLimits.entries_max``),
    whatever ``append_bytes_max`` allows."""
    pre_vote: bool = True
    """Ask before raising the term (thesis §9.6), so that a replica cut off and back
    does not depose a working leader."""
    campaigns: bool = True
    """False: the replica never stands for election (nor on ``TimeoutNow``), whatever
    its timer says; it still votes, and its timer still runs, which decides whether it
    takes a vote request for a stray (thesis §4.2.3).  A daemon's follower slots without
    ``--failover`` (docs/replication.md §11, stage 2b), and a daemon's replica once it
    stopped leading under failover (runtime/group.py)."""
    check_quorum: bool = True
    """A leader without a majority for an election timeout steps down (thesis §6.2);
    replicas that heard from a leader within the least timeout ignore votes (§4.2.3)."""
    transfer_ticks: int = 0
    """How long a leader handing over waits for its target to take over before it takes
    proposals again (0: ``election_ticks``, thesis §3.10).  Longer where the target
    must first rebuild its state (a daemon's stand-in handing a process back home)."""

    def __post_init__(self) -> None:
        if self.heartbeat_ticks < 1 or self.election_ticks <= self.heartbeat_ticks:
            raise ValueError("need 1 <= heartbeat_ticks < election_ticks")
        if self.transfer_ticks < 0:
            raise ValueError("transfer_ticks must be >= 0")
        if min(self.inflight_appends_max, self.append_bytes_max, self.append_entries_max) < 1:
            raise ValueError(
                "inflight_appends_max, append_bytes_max and append_entries_max must be >= 1")


@dataclass(frozen=True, slots=True)
class DurableState:
    """What a replica's disk held at start: its hard state, its last snapshot's
    position and configuration, and the entries after it."""

    config: Config
    """The configuration in force at the snapshot (or the group's first one)."""
    term: int = 0
    vote: HostId | None = None
    snapshot_index: int = 0
    snapshot_term: int = 0
    entries: Sequence[Entry] = ()
    """The log after ``snapshot_index``, in order.  A replica given an ``EntryReader``
    reads the entries' data back from it, so their ``data`` may be left empty here."""
    may_have_forgotten: bool = False
    """The machine may have lost writes it acked (a reboot under a lax fsync policy):
    the replica neither votes nor counts toward a commit until it caught up (I6)."""
