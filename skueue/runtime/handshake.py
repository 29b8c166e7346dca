"""The peer handshake: ``["hello-peer", id, address, nonce]`` both ways, checked.

The nonce is new at every start of a daemon: a hello that comes back with our own nonce
was our own (an address of ours in ``--peers``), and a known id with a new nonce is a
member that restarted (see :meth:`skueue.runtime.peers.PeerLinks.same_incarnation`).
Authentication will live here too.
"""

from __future__ import annotations

from typing import Any

import trio

from skueue.runtime.address import Address, AddressError, parse_address
from skueue.runtime.errors import DaemonError
from skueue.wire.errors import RemoteProtocolError


def parse_peer_hello(hello: list[Any]) -> tuple[str, str, str | None]:
    """The id, advertised address and nonce of ``["hello-peer", id, address, nonce?]``."""
    if (
        len(hello) not in (3, 4)
        or type(hello[1]) is not str
        or not hello[1]
        or type(hello[2]) is not str
        or (len(hello) == 4 and type(hello[3]) is not str)
    ):
        raise RemoteProtocolError('hello-peer: expected ["hello-peer", id, address, nonce]')
    return hello[1], hello[2], hello[3] if len(hello) == 4 else None


def reachable(advertised: str, stream: trio.SocketStream) -> Address:
    """Where a peer can be reached: the address it advertises, with a wildcard host
    (it listens on 0.0.0.0 or ::) replaced by the address its connection came from."""
    try:
        address = parse_address(advertised)
    except AddressError as e:
        raise RemoteProtocolError(f"hello-peer: {e}") from None
    if address.host in ("0.0.0.0", "::", ""):
        address = Address(stream.socket.getpeername()[0], address.port)
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
