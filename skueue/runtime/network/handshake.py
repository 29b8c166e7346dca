"""The peer handshake: ``["hello-peer", id, address, nonce]`` from the daemon that opens a
link, answered with ``["hello-peer", id, address, nonce, handled]``, checked.  With a
cluster key, each hello ends with ``{"challenge": ..., "proof": ...}`` and the opener's
first frame proves it knows the key too (:mod:`skueue.runtime.security.peer_auth`).

A daemon starting a static cluster (``--peers``, its first start) says so in its hellos
(``{"static": true}`` in the same map): it takes the daemon it greets for a member of
the cluster it starts.  A daemon that knows its members already and has no such member
refuses it for good, with one line saying to use ``--join`` (issue 28, item 2), before
anything of the cluster changes.

Every hello says which peer protocol its daemon speaks (``{"protocol": N}`` in the same
map; a hello without it is of protocol 1).  Members of one cluster must speak the same:
the DHT's placement of positions and the messages that carry them changed between
versions (issue 30: keys by blocks of positions, runs in one message), so a member of
another version is refused for good, in one line, before anything of ours changes.

``handled`` is how many of the opener's frames the answering daemon has handled: the
opener sends again everything after it (:mod:`skueue.runtime.network.link_sender`).

The nonce is new at every start of a daemon: a hello that comes back with our own nonce
was our own (an address of ours in ``--peers``), and a known id with a new nonce is a
member that restarted (see :meth:`skueue.runtime.network.peers.PeerLinks.same_incarnation`).
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from skueue.core.errors import RemoteProtocolError
from skueue.host.address import Address, AddressError, parse_address
from skueue.runtime.errors import DaemonError
from skueue.runtime.security.peer_auth import auth_map
from skueue.runtime.security.tls import socket_of

# The peer protocol this daemon speaks.  1: per-position DHT keys (up to issue 29);
# 2: DHT keys by blocks of positions and runs in one message (issue 30); 3: the daemon
# channel carries stats and removal checks (runtime/network/daemon_channel.py); 4: it
# carries a home's word that a copy of its group is dropped (runtime/re_replication.py);
# 5: and each member's word that it is alive (runtime/member_silence.py).
PEER_PROTOCOL = 5


class PeerProtocolMismatch(RemoteProtocolError):
    """The peer speaks another peer protocol: refused for good (retrying cannot help)."""


@attrs.frozen
class PeerGreeting:
    """What a peer's hello says."""

    process: str
    address: str  # as advertised
    nonce: str | None
    handled: int  # of our frames (0 in an opener's hello, which does not say)
    auth: dict[str, Any] | None = None  # challenge (and proof) with a cluster key
    static: bool = False  # the opener starts a static cluster it takes us for a member of
    channel: bool = False  # the opener's daemon channel, not a link (daemon_channel.py)
    replicas: int = 1  # its --replicas: every member must run with the same (0: "yours")
    copy: bool = False  # the opener restores its process from our copy (runtime/copies.py)


def parse_peer_hello(hello: Any) -> PeerGreeting:
    """Check ``["hello-peer", id, address, nonce?, handled?, {auth, static}?]``."""
    auth, static, channel, copy, protocol, replicas = None, False, False, False, 1, 1
    if isinstance(hello, list) and len(hello) > 3 and isinstance(hello[-1], dict):
        options = dict(hello[-1])
        static = options.pop("static", False)
        channel = options.pop("channel", False)
        copy = options.pop("copy", False)
        if not all(type(flag) is bool for flag in (static, channel, copy)):
            raise RemoteProtocolError("hello-peer: static, channel and copy must be true or false")
        protocol = options.pop("protocol", 1)
        replicas = options.pop("replicas", 1)
        if type(protocol) is not int:
            raise RemoteProtocolError("hello-peer: protocol must be a number")
        if type(replicas) is not int:
            raise RemoteProtocolError("hello-peer: replicas must be a number")
        auth, hello = (auth_map(options) if options else None), hello[:-1]
    if (
        not isinstance(hello, list)
        or len(hello) not in (3, 4, 5)
        or hello[0] != "hello-peer"
        or type(hello[1]) is not str
        or not hello[1]
        or type(hello[2]) is not str
        or (len(hello) >= 4 and type(hello[3]) is not str)
        or (len(hello) == 5 and (type(hello[4]) is not int or hello[4] < 0))
    ):
        raise RemoteProtocolError(
            'hello-peer: expected ["hello-peer", id, address, nonce, handled?]'
        )
    if protocol != PEER_PROTOCOL:
        raise PeerProtocolMismatch(
            f"{hello[1]} speaks peer protocol {protocol} and this daemon {PEER_PROTOCOL}: "
            "members of one cluster must run the same release (README: upgrading; stop "
            "every member, then start them all on the new release)"
        )
    nonce = hello[3] if len(hello) >= 4 else None
    handled = hello[4] if len(hello) == 5 else 0
    return PeerGreeting(hello[1], hello[2], nonce, handled, auth, static, channel, replicas,
                        copy)  # fmt: skip


# ``--replicas`` not given: the daemon decides at start (runtime/replica_count.py).  A
# joiner's hello says so before it knows its seed's, and takes the seed's from its answer.
REPLICAS_AUTO = 0


def replicas_mismatch(own: str, ours: int, greeting: PeerGreeting) -> str | None:
    """Why a peer with another ``--replicas`` is refused (None: the same): each member
    computes every group's replicas from the member list and that number.  A joiner
    that was not given ``--replicas`` says ``REPLICAS_AUTO`` and takes ours
    (runtime/replica_count.py)."""
    if greeting.replicas == ours or (greeting.replicas == REPLICAS_AUTO and ours != REPLICAS_AUTO):
        return None
    if ours == REPLICAS_AUTO:
        return (f"{greeting.process} answered before this daemon knew its --replicas (it "
                "is still joining): try again once it has joined")
    return (f"{greeting.process} runs with --replicas {greeting.replicas} and {own} with "
            f"{ours}: every member of a cluster must run with the same (a daemon started "
            "with --join SEED and without --replicas takes its seed's; one started alone "
            "runs 1, so skueue join takes it only into a cluster of one replica)")


def reachable(advertised: str, stream: trio.abc.Stream) -> Address:
    """Where a peer can be reached: the address it advertises, with a wildcard host
    (it listens on 0.0.0.0 or ::) replaced by the address its connection came from."""
    try:
        address = parse_address(advertised)
    except AddressError as e:
        raise RemoteProtocolError(f"hello-peer: {e}") from None
    if address.host in ("0.0.0.0", "::", ""):
        address = Address(socket_of(stream).getpeername()[0], address.port)
    return address


def check_distinct(peers: dict[Address, str]) -> None:
    """Two different daemons may not share a process id (one listed twice is fine)."""
    seen: dict[str, Address] = {}
    for address, process in peers.items():
        if process in seen and seen[process] != address:
            raise DaemonError(
                f"the daemons at {seen[process]} and {address} both have the process id "
                f"{process!r}; give each daemon its own --id"
            )
        seen[process] = address
