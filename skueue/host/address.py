"""``HOST:PORT`` addresses, parsed once with a clear error."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


class AddressError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def is_loopback(self) -> bool:
        """Only this machine can reach it (a name other than localhost counts as not)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_address(text: str) -> Address:
    """Parse ``host:port`` (``[v6]:port`` for IPv6); the port must be 0-65535."""
    raw = text.strip()
    host, sep, port_text = raw.rpartition(":")
    if not sep or not host:
        raise AddressError(f"bad address {text!r}: expected HOST:PORT, e.g. 127.0.0.1:7400")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise AddressError(f"bad address {text!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise AddressError(f"bad address {text!r}: port {port} is out of range")
    return Address(host, port)


def parse_addresses(text: str) -> list[Address]:
    """``HOST:PORT,HOST:PORT,...``, each member parsed on its own (a comma never ends up
    inside one address, whose last colon is its port's)."""
    return [parse_address(part) for part in text.split(",") if part.strip()]


def parse_seed_list(text: str) -> list[Address]:
    """A client's seed list, ``HOST:PORT[,HOST:PORT...]``: the members it may use, in
    order (the first that answers serves), each once.  The one parser of ``--node``,
    ``$SKUEUE_NODE``, ``connect()`` and ``connect_blocking()``."""
    seeds = list(dict.fromkeys(parse_addresses(text)))
    if not seeds:
        raise AddressError(f"no address in {text!r}: expected HOST:PORT[,HOST:PORT...]")
    return seeds
