"""The inputs of a replica: everything that changes a :class:`ReplicaNode`, one frozen
class per kind (the style of ``skueue/host/inputs.py``).

Time comes in as :class:`Tick`, one heartbeat interval each; what the local disk did
comes in as :class:`Persisted`; what the driver's state machine did, as
:class:`Applied` and :class:`SnapshotTaken`.
"""

from __future__ import annotations

from dataclasses import dataclass

from skueue.replication.config import ConfigChange, HostId
from skueue.replication.messages import Message


@dataclass(frozen=True, slots=True)
class Propose:
    """The leader's driver's records of one step, to append as ``data`` entries.  A
    replica that is not the leader (or is handing over) refuses them
    (:class:`~skueue.replication.effects.ProposalRefused`)."""

    data: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class Received:
    """A message from another replica of the group."""

    sender: HostId
    message: Message


@dataclass(frozen=True, slots=True)
class Tick:
    """One heartbeat interval passed."""


@dataclass(frozen=True, slots=True)
class Persisted:
    """The local log is durable through ``index``, whose entry has ``term`` (a write
    that a later truncation replaced is recognized by its term and ignored)."""

    index: int
    term: int


@dataclass(frozen=True, slots=True)
class Applied:
    """The driver's state machine took the entries through ``index``."""

    index: int


@dataclass(frozen=True, slots=True)
class SnapshotTaken:
    """The driver saved its state machine as of ``index`` (applied, and committed):
    the log before it may go."""

    index: int


@dataclass(frozen=True, slots=True)
class ChangeConfig:
    """Change the group's membership by one server (leader only)."""

    change: ConfigChange


@dataclass(frozen=True, slots=True)
class TransferLeader:
    """Hand leadership to ``to`` once its log is the leader's (thesis §3.10)."""

    to: HostId


@dataclass(frozen=True, slots=True)
class Campaign:
    """Stand for election now, without waiting for the election timeout (etcd's
    ``MsgHup``): a daemon whose group has one voter steps it at start, so that it leads
    at once.  A replica that may not campaign (a learner, one that may have forgotten
    acked entries, a leader) ignores it."""


ReplicaInput = (
    Propose | Received | Tick | Persisted | Applied | SnapshotTaken | ChangeConfig
    | TransferLeader | Campaign
)
