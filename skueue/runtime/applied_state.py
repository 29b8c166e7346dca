"""The state a follower slot applies its group's committed entries to (docs/replication.md
§5.3, §6.2), so that a failover will be a switch, not a replay.

It is what a daemon's owner holds of its process: the host, the last frame the process
handled of each peer's link, and its outbox to each peer.  Each committed data entry is
one input record; applying it steps the host as the leader stepped it, and numbers the
frames it makes on the outboxes as the leader's links numbered them (invariant I3 of the
design): a new leader resends from its outboxes what the peers have not acknowledged,
and they skip what they have.  Replies are dropped: the clients are the leader's.

A follower hears no acks from the peers: the leader sends it the watermark of each of
its links now and then (``["acked", P, {peer: number}]``, runtime/replicas.py), and
the follower forgets what is at or below it (:meth:`AppliedState.acknowledged`).

Checks.  At each of its snapshots the leader sends the digest of its state there
(:func:`state_digest`); a follower that applies that index compares its own.  The host is
deterministic, so a difference is a bug, found where it starts; such a copy must never
lead (runtime/follower_slot.py drops it).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from skueue.core.effects import Send
from skueue.host.effects import ForgetPeer, SendControl
from skueue.host.host import Host
from skueue.host.inputs import PeerControl, PeerMessage
from skueue.host.state_lines import state_lines
from skueue.runtime.durability.entry_store import SnapshotEntryStore
from skueue.runtime.durability.records import input_of
from skueue.runtime.network.link_sender import LinkSender
from skueue.wire.peer import encode_message

NOT_COMPARED = (
    ".clients.deadlines", ".clients.wait_ends", ".clients.arrivals", ".clients.out",
    ".clients.queue_stats", ".directory.contacts", ".directory.addresses", ".storage",
)
"""What a follower's host need not share with its leader's (as the hosts simulator's
``sim/host_members.py``): the timers (the driver's clock: a follower's fire nothing), the
contacts not confirmed (unlogged), the last step's effects, the statistics the driver
samples, and the entry store (its record ids are the daemon's own); of the members'
addresses only who they are (each daemon met them in its own order, perhaps under
another name: ``--peers`` spells them as its operator did)."""


@attrs.define(eq=False)
class AppliedState:
    host: Host
    applied: int  # the last entry applied
    handled: dict[str, int] = attrs.field(factory=dict)
    outboxes: dict[str, LinkSender] = attrs.field(factory=dict)
    # The leader's watermark of each link, which may be ahead of what this copy applied.
    acked: dict[str, int] = attrs.field(factory=dict)

    def apply(self, records: Iterable[tuple[int, Any]]) -> None:
        """Step each ``(index, record)`` through the host, in log order; the frames they
        make go on the outboxes, one batch per peer."""
        frames: dict[str, list[Any]] = defaultdict(list)
        host = self.host
        for index, record in records:
            item = input_of(record)
            if isinstance(item, PeerMessage | PeerControl):
                self.handled[item.peer] = item.number
            for effect in host.step(item):
                match effect:
                    case Send(to=to, message=message):
                        frames[to.process].append(["msg", int(to.kind), encode_message(message)])
                    case SendControl(peer=peer, frame=frame):
                        frames[peer].append(frame)
                    case ForgetPeer(peer=peer):
                        self._forget(peer, frames)
            self.applied = index
        for peer, batch in frames.items():
            if peer not in host.directory.departed:  # as the leader's links drop them
                self.outboxes.setdefault(peer, LinkSender()).add(batch)
        self.acknowledged({})
        # Answered requests leave the deadlines' heap as the leader's owner reads it.
        host.seconds_to_due(0.0)

    def _forget(self, peer: str, frames: dict[str, list[Any]]) -> None:
        """A member that left, or was removed: its link goes, as the leader's does."""
        frames.pop(peer, None)
        self.outboxes.pop(peer, None)
        self.acked.pop(peer, None)

    def acknowledged(self, watermarks: Mapping[str, int]) -> None:
        """The leader's peers handled their frames up to these numbers: forget them."""
        for peer, number in watermarks.items():
            if number > self.acked.get(peer, 0):
                self.acked[peer] = number
        for peer, number in self.acked.items():
            link = self.outboxes.get(peer)
            if link is not None:
                link.acknowledged(min(number, link.next_number - 1))

    def digest(self) -> str:
        numbered = {peer: link.next_number - 1 for peer, link in self.outboxes.items()}
        return state_digest(self.host, self.handled, numbered)


def state_digest(host: Host, handled: Mapping[str, int], numbered: Mapping[str, int]) -> str:
    """A digest of a process's state that a leader and its followers share when they
    applied the same entries: the host (:data:`NOT_COMPARED` left out), the elements of
    its tables (not where a store keeps them), and per member the last frame handled of
    its link and the last one numbered on the link to it."""
    digest = hashlib.sha256()
    for path, leaf in state_lines(host, NOT_COMPARED, _where_elements_are):
        digest.update(repr((path, _canonical(leaf))).encode())
    for kind, node in host.process.nodes.items():
        for queue, position, ticket, element in sorted(node.store.items(), key=_by_place):
            digest.update(repr((int(kind), queue, position, ticket, element)).encode())
    for peer in sorted(host.directory.addresses):
        digest.update(repr((peer, handled.get(peer, 0), numbered.get(peer, 0))).encode())
    return digest.hexdigest()


def _where_elements_are(path: str, obj: object) -> bool:
    """The entry store, and the tables' record ids in it (each daemon numbers its own)."""
    if isinstance(obj, SnapshotEntryStore):
        return True
    return path.endswith((".entries", ".ticketed")) and ".tables[" in path


def _by_place(entry: tuple[str, int, int, Any]) -> tuple[str, int, int]:
    return entry[0], entry[1], entry[2]


def _canonical(leaf: Any) -> Any:
    """A leaf whose repr is the same in every process: a set's, sorted (its iteration
    order follows the process's string hashes)."""
    if isinstance(leaf, tuple) and len(leaf) == 2 and isinstance(leaf[1], frozenset):
        return leaf[0], sorted(repr(_canonical_lines(e)) for e in leaf[1])
    return leaf


def _canonical_lines(lines: tuple[tuple[str, Any], ...]) -> list[tuple[str, Any]]:
    return [(path, _canonical(leaf)) for path, leaf in lines]
