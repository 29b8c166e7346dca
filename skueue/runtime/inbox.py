"""What the daemon's owner takes from its inbox.

Readers of peer links put the host's own inputs there (``PeerMessage``,
``PeerControl``: :mod:`skueue.host.inputs`), and client sessions put ``ClientGone``;
the rest are the daemon's, which the owner turns into host inputs (a client's request
gets its retry key and deadline, a hello its place among the peer's sessions) or acts on
itself (a seed reached for a join, the members probed for a removal, a copy asked for).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from skueue.host.address import Address
from skueue.host.inputs import ClientGone, PeerControl, PeerMessage
from skueue.runtime.network.client_reader import ClientInput


@dataclass(frozen=True, slots=True)
class PeerHello:
    """A peer opened a link to us (``session`` numbers this daemon's peer sessions)."""

    peer: str
    address: Address
    session: int
    # It starts a static cluster and takes us for a member (runtime/network/handshake.py); its
    # incarnation, to refuse it by if it is not one.
    static: bool = False
    nonce: str | None = None


@dataclass(frozen=True, slots=True)
class LinkClosed:
    """A peer's session ``session`` ended."""

    peer: str
    session: int


@dataclass(frozen=True, slots=True)
class JoinReached:
    """A ``skueue join`` reached its seed: the host becomes a joiner of its cluster."""

    seed: str
    address: Address
    client: int
    rid: int


@dataclass(frozen=True, slots=True)
class RemovalProbed:
    """``skueue remove-member``: the members' addresses were tried; those that answered
    (runtime/member_removal.py)."""

    client: int
    rid: int
    members: tuple[str, ...]
    answering: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ChannelFrame:
    """A frame from a member's daemon channel (runtime/network/daemon_channel.py): a
    question or answer of the daemons', not an input of the host."""

    peer: str
    frame: list[object]


@dataclass(frozen=True, slots=True)
class ClientError:
    """Answer a client's request with an error (from a task that could not serve it)."""

    client: int
    rid: int
    message: str
    retryable: bool = True  # False: asking again cannot help (INVALID, not UNAVAILABLE)


@dataclass(slots=True)
class CopyWanted:
    """A member restoring its process asks for our copy of it (runtime/copies.py): the
    owner writes the answer in ``data`` between two steps, then sets ``done``."""

    peer: str
    address: Address  # where it listens, as it advertises
    data: bytes = b""
    done: trio.Event = field(default_factory=trio.Event)


InboxItem = (
    PeerMessage | PeerControl | PeerHello | LinkClosed | ClientInput | ClientGone
    | JoinReached | ClientError | RemovalProbed | ChannelFrame | CopyWanted
)
