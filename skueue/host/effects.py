"""What a host asks its driver to do: data only, carried out by the daemon (sockets, the
log, events) or by a simulator (its network and its clients).

A step's effects go out only after the step's inputs are durable: the driver syncs the
log first (etcd raft's ``Ready``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skueue.core.effects import Send
from skueue.host.inputs import Frame
from skueue.host.replies import Reply as ClientReply


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer client ``client`` (one request's reply, or an error)."""

    client: int
    reply: ClientReply


@dataclass(frozen=True, slots=True)
class SendControl:
    """Send a control frame (gossip, a departure) to process ``peer``."""

    peer: str
    frame: Frame


@dataclass(frozen=True, slots=True)
class DropPeer:
    """``peer`` sent what the host refuses (its fault; nothing changed): end its link."""

    peer: str
    why: str
    what: str = ""  # the message refused, described


@dataclass(frozen=True, slots=True)
class ForgetPeer:
    """``peer`` left the cluster or was removed from it for good: close its link and stop
    trying to reach it."""

    peer: str
    removed: bool = False


@dataclass(frozen=True, slots=True)
class Joined:
    """This process is in the ring now (a join went through)."""


@dataclass(frozen=True, slots=True)
class Left:
    """This process left its cluster: it may not come back as that member.  Unless it
    was the last member (``alone``, and it held nothing), its data is with the others
    now, and the driver tells every member (with the counters it keeps itself)."""

    alone: bool


@dataclass(frozen=True, slots=True)
class Warn:
    """Something the operator should read in the log (the host has no logger)."""

    event: str
    fields: dict[str, Any]


HostEffect = Send | Reply | SendControl | DropPeer | ForgetPeer | Joined | Left | Warn
