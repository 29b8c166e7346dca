"""What a replica asks of its driver, in the order it must be done (etcd raft's
``Ready``: write the log and the hard state, then send, then apply).

A step's effects come as one list.  The driver carries them out in that order, with one
rule about time: a :class:`Send` whose ``after_sync`` is set leaves only once every
:class:`AppendLocal` and :class:`SaveHardState` of this step *and of every earlier step*
is durable (a vote or an ack must never be sent for what a crash could still take back,
I7); the leader's appends
go at once, in parallel with its own write (thesis §10.2.1), because the leader counts
itself only once :class:`~skueue.replication.inputs.Persisted` says its write is durable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from skueue.replication.config import Config, HostId
from skueue.replication.messages import Entry, Message

Role = Literal["follower", "pre_candidate", "candidate", "leader"]


@dataclass(frozen=True, slots=True)
class SaveHardState:
    """Persist the term and the vote before anything that depends on them leaves."""

    term: int
    vote: HostId | None


@dataclass(frozen=True, slots=True)
class AppendLocal:
    """Write ``entries`` to the local log from ``index`` on, replacing whatever the log
    held from ``index`` on (a follower's conflicting tail, Raft §5.3)."""

    index: int
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class Send:
    to: HostId
    message: Message
    after_sync: bool


@dataclass(frozen=True, slots=True)
class Commit:
    """The commit index is now ``index``: apply the log through it (a follower), or
    release what the steps through it held back (the leader)."""

    index: int


@dataclass(frozen=True, slots=True)
class SendSnapshot:
    """The leader no longer keeps what ``to`` needs next: send it the driver's snapshot
    as of ``index`` (a :class:`~skueue.replication.messages.Snapshot` of ``term`` with
    these fields and the driver's data)."""

    to: HostId
    term: int
    index: int
    last_term: int
    config: Config


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """Replace the state machine and the whole log with the snapshot: the log is empty
    after ``index``, whose entry had ``last_term``.  Durable before the reply leaves."""

    index: int
    last_term: int
    config: Config
    data: bytes


@dataclass(frozen=True, slots=True)
class RoleChanged:
    """The replica's role, term or known leader changed."""

    role: Role
    term: int
    leader: HostId | None


@dataclass(frozen=True, slots=True)
class ProposalRefused:
    """Not appended: this replica does not lead the group now (``leader``, if known,
    does), or it is handing over, or a change was refused (``reason``)."""

    leader: HostId | None
    term: int
    reason: str


ReplicaEffect = (
    SaveHardState | AppendLocal | Send | Commit | SendSnapshot | InstallSnapshot
    | RoleChanged | ProposalRefused
)
