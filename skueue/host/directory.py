"""The member directory: which processes are in the cluster, and where each listens.

Process ids and addresses are independent (``skueued --id`` names a process freely), so
a daemon cannot derive where to send from an id.  Every daemon keeps this directory and
the members spread it by gossip over the peer links:

- a peer handshake tells both sides the other's id and listen address, but anyone can
  say hello: the caller is only a *contact* (reachable, not spread, not counted) until it
  is confirmed, because it was in the start-up member list or the core accepted a
  protocol message from it (a joiner's request, say); gossip from contacts is ignored;
- whoever learns a new member tells every member it knows (``["member", id, address]``);
  a link that opens first gets the whole directory (``["members", [[id, address]...],
  [departed id...]]``), so a joiner learns everyone from its seed;
- a process that left tells everyone (``["departed", id, heir, counters]``); departed ids
  are remembered so that a late ``member`` frame cannot bring one back.

Links are FIFO and a daemon forwards a gossip frame before it forwards the protocol
messages it handles after it, so a message that names a new process normally arrives
after the address of that process; :class:`~skueue.runtime.network.peers.PeerLinks` holds the few
that do not until the address comes.

The directory is also the list ``skueue stats`` asks, so counts stay right across joins
and leaves.  It does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skueue.core.errors import RemoteProtocolError
from skueue.core.messages.membership import JoinRequest
from skueue.core.ops import QUEUES_MAX, queue_name_ok
from skueue.host.address import Address, AddressError, parse_address
from skueue.host.pending import COUNTER_NAMES
from skueue.host.queue_stats import COUNT_NAMES

MEMBERS_MAX = 4096  # far above any cluster we run; bounds what a bad peer can make us hold

Out = tuple[str, list[Any]]
"""A gossip frame and the process to send it to."""


@dataclass(frozen=True, slots=True)
class Departure:
    """A process left: who, who inherits its counters, and the counters."""

    process: str
    heir: str | None
    counters: dict[str, int]
    queues: dict[str, dict[str, int]] = field(default_factory=dict)  # per queue (queue_stats)


class Directory:
    def __init__(self, own_id: str, own_address: Address) -> None:
        self.own_id = own_id
        self.addresses: dict[str, Address] = {own_id: own_address}
        self.departed: set[str] = set()
        # Said hello, not confirmed yet: reachable, but neither spread nor counted.
        self.contacts: dict[str, Address] = {}
        # Started a static cluster taking us for a member, which it is not: told to use
        # --join, and refused on every later hello of that incarnation (its nonce; a
        # new start of it, with --join say, is judged afresh) (issue 28, item 2).
        self.refused: dict[str, str | None] = {}
        # Removed by ``skueue remove-member`` (also departed): refused for good.
        self.removed: set[str] = set()

    def others(self) -> list[str]:
        return sorted(p for p in self.addresses if p != self.own_id)

    def address(self, process: str) -> Address | None:
        return self.addresses.get(process) or self.contacts.get(process)

    def is_member(self, process: str) -> bool:
        return process in self.addresses

    def confirm(self, process: str) -> list[Out]:
        """A contact proved to be in the cluster: make it a member and spread it."""
        address = self.contacts.pop(process, None)
        if address is None or not self.learn(process, address):
            return []
        return [*self._tell_others(process, process), (process, self.full_frame())]

    def forget_contact(self, process: str) -> None:
        self.contacts.pop(process, None)

    def learn(self, process: str, address: Address) -> bool:
        """Record a member's address; True if that is news worth passing on."""
        if process in self.departed or process == self.own_id:
            return False
        if self.addresses.get(process) == address:
            return False
        if process not in self.addresses and len(self.addresses) >= MEMBERS_MAX:
            raise RemoteProtocolError(f"more than {MEMBERS_MAX} members in the directory")
        self.addresses[process] = address
        self.contacts.pop(process, None)
        self.refused.pop(process, None)  # a member now: nothing of it is refused
        return True

    def depart(self, process: str) -> bool:
        """Forget a member that left; True if that is news worth passing on."""
        if process in self.departed or process == self.own_id:
            return False
        if len(self.departed) >= MEMBERS_MAX:
            self.departed.pop()  # a bound, not an exact memory: old departures are long done
        self.departed.add(process)
        self.addresses.pop(process, None)
        return True

    def refuse(self, process: str, nonce: str | None) -> None:
        """A daemon that is not a member took us for one: refuse that incarnation."""
        if process not in self.refused and len(self.refused) >= MEMBERS_MAX:
            self.refused.pop(next(iter(self.refused)))  # it was told already
        self.refused[process] = nonce
        self.contacts.pop(process, None)

    def is_refused(self, process: str, nonce: str | None) -> bool:
        """Whether this hello comes from an incarnation refused before (another one, the
        daemon started again, is judged afresh: see :meth:`forget_refusal`)."""
        return process in self.refused and self.refused[process] == nonce

    def forget_refusal(self, process: str, nonce: str | None) -> None:
        """A new incarnation of a refused daemon proved it holds the cluster key (or
        none is needed): what the old one was told does not hold it."""
        if process in self.refused and self.refused[process] != nonce:
            del self.refused[process]

    def remove(self, process: str) -> bool:
        """Forget a member for good (``skueue remove-member``): departed, and refused if
        it ever comes back.  True if that is news worth passing on."""
        if process == self.own_id or process in self.removed:
            return False
        if len(self.removed) >= MEMBERS_MAX:
            self.removed.pop()
        self.removed.add(process)
        self.depart(process)
        self.contacts.pop(process, None)
        return True

    def heir(self) -> str | None:
        """Who inherits this process's counters when it leaves: the least other id."""
        others = self.others()
        return others[0] if others else None

    # -- gossip -------------------------------------------------------------------------

    def member_frame(self, process: str) -> list[Any]:
        return ["member", process, str(self.addresses[process])]

    def full_frame(self) -> list[Any]:
        members = [[p, str(a)] for p, a in sorted(self.addresses.items())]
        return ["members", members, sorted(self.departed)]

    def on_hello(self, peer: str, address: Address) -> list[Out]:
        """A peer said hello.  A member's new address is passed on, and a member is told
        everyone we know; anyone else is kept as a contact until confirmed."""
        if peer == self.own_id or peer in self.departed:
            return []
        if peer not in self.addresses:
            if peer not in self.contacts and len(self.contacts) >= MEMBERS_MAX:
                raise RemoteProtocolError(f"more than {MEMBERS_MAX} unconfirmed peers")
            self.contacts[peer] = address
            return []
        out = self._tell_others(peer, peer) if self.learn(peer, address) else []
        out.append((peer, self.full_frame()))
        return out

    def on_gossip(self, source: str, frame: list[Any]) -> tuple[list[Out], Departure | None]:
        """A ``member``, ``members`` or ``departed`` frame from ``source``: what to pass
        on, and the departure it announced (if any).  Only members are listened to."""
        if source not in self.addresses:
            return [], None
        kind = frame[0]
        if kind == "member":
            process, address = parse_member(frame[1], frame[2])
            news = self.learn(process, address)
            return (self._tell_others(process, source) if news else []), None
        if kind == "members":
            members, departed = frame[1], frame[2]
            if not isinstance(members, list) or not isinstance(departed, list):
                raise RemoteProtocolError("members: expected two lists")
            if len(members) > MEMBERS_MAX or len(departed) > MEMBERS_MAX:
                raise RemoteProtocolError(f"members: more than {MEMBERS_MAX} entries")
            parsed = [parse_member(*_pair(m)) for m in members]
            gone = [_process_id(p) for p in departed]
            out: list[Out] = []
            for process in gone:
                self.depart(process)
            for process, address in parsed:
                if self.learn(process, address):
                    out += self._tell_others(process, source)
            return out, None
        departure = parse_departure(frame)
        if not self.depart(departure.process):
            return [], None
        forward = [(p, frame) for p in self.others() if p != source]
        return forward, departure

    def _tell_others(self, process: str, source: str) -> list[Out]:
        frame = self.member_frame(process)
        return [(p, frame) for p in self.others() if p not in (process, source)]


def vouches(message: object) -> bool:
    """Whether a protocol message from a process that only said hello (a contact) makes
    it a member: only a join request does, which is a joiner's first message, to its
    seed.  Anything else proves nothing: a daemon started with ``--peers`` naming a
    cluster it is not in sends batches as if it were in the ring (issue 28, item 2)."""
    return isinstance(message, JoinRequest)


def parse_member(process: Any, address: Any) -> tuple[str, Address]:
    """Check one ``[id, address]`` pair from a peer."""
    _process_id(process)
    if type(address) is not str:
        raise RemoteProtocolError("member: expected the address as a string")
    try:
        return process, parse_address(address)
    except AddressError as e:
        raise RemoteProtocolError(f"member {process!r:.40}: {e}") from None


def parse_departure(frame: list[Any]) -> Departure:
    """Check a ``["departed", id, heir, counters]`` frame."""
    process, heir, counters = frame[1], frame[2], frame[3]
    _process_id(process)
    if heir is not None:
        _process_id(heir)
    if not isinstance(counters, dict) or not all(
        type(counters.get(k, 0)) is int and counters.get(k, 0) >= 0 for k in COUNTER_NAMES
    ):
        raise RemoteProtocolError("departed: counters must be non-negative integers")
    return Departure(
        process,
        heir,
        {k: counters.get(k, 0) for k in COUNTER_NAMES},
        _queue_counts(counters.get("queues", {})),
    )


def _queue_counts(x: Any) -> dict[str, dict[str, int]]:
    """A departed member's per-queue counts: at most QUEUES_MAX queues of valid names,
    each with non-negative integer counts."""
    if not isinstance(x, dict) or len(x) > QUEUES_MAX:
        raise RemoteProtocolError(f"departed: queues must be a map of at most {QUEUES_MAX}")
    out = {}
    for name, counts in x.items():
        if not queue_name_ok(name) or not isinstance(counts, dict):
            raise RemoteProtocolError("departed: a queue's counts need its name and a map")
        values = {k: counts.get(k, 0) for k in COUNT_NAMES}
        if not all(type(v) is int and v >= 0 for v in values.values()):
            raise RemoteProtocolError("departed: queue counts must be non-negative integers")
        out[name] = values
    return out


def _process_id(x: Any) -> str:
    if type(x) is not str or not 0 < len(x) <= 256:
        raise RemoteProtocolError("expected a process id (a string of 1 to 256 characters)")
    return x


def _pair(x: Any) -> tuple[Any, Any]:
    if not isinstance(x, list) or len(x) != 2:
        raise RemoteProtocolError("members: expected [id, address] pairs")
    return x[0], x[1]
