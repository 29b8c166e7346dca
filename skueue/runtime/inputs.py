"""What the daemon's owner task takes from its inbox: one frozen class per kind of input.

Reader tasks (peer and client sessions) and helper tasks (a join reaching its seed) put
these in the inbox; only the owner task acts on them, so nothing else touches the host.
"""

from __future__ import annotations

from typing import Any

import attrs

from skueue.core.messages.membership import MembershipMessage
from skueue.core.messages.stages import Message
from skueue.host.address import Address
from skueue.overlay.labels import Kind
from skueue.runtime.sessions import ClientGone, ClientInput


@attrs.frozen
class PeerInput:
    peer: str
    kind: Kind
    message: Message | MembershipMessage
    number: int  # the frame's number on the peer's link (runtime/link_receiver.py)
    encoded: Any = None  # the message as it came (the input log keeps it so)


@attrs.frozen
class PeerControl:
    peer: str
    frame: list[Any]
    number: int


@attrs.frozen
class PeerHello:
    """A peer opened a link to us (``session`` numbers this daemon's peer sessions)."""

    peer: str
    address: Address
    session: int
    # It starts a static cluster and takes us for a member (runtime/handshake.py); its
    # incarnation, to refuse it by if it is not one.
    static: bool = False
    nonce: str | None = None


@attrs.frozen
class PeerGone:
    peer: str
    session: int


@attrs.frozen
class JoinStart:
    """A ``skueue join`` reached its seed: become a joining process of that cluster."""

    seed: str
    client: int
    rid: int


@attrs.frozen
class RemovalProbed:
    """``skueue remove-member``: the members' addresses were tried; those that answered
    (runtime/member_removal.py)."""

    client: int
    rid: int
    members: tuple[str, ...]
    answering: tuple[str, ...]


@attrs.frozen
class ClientError:
    client: int
    rid: int
    message: str


Input = (
    PeerInput | PeerControl | PeerHello | PeerGone | ClientInput | ClientGone | JoinStart
    | ClientError | RemovalProbed
)
