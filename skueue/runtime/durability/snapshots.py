"""Snapshots of a durable daemon: its whole state at the end of a step, so that its input
log starts afresh and a restart replays only what came after (issue 11: the snapshot
bounds the replay time; the input log is in :mod:`skueue.runtime.durability.input_log`).

A snapshot is taken when the log's current segment reaches ``snapshot_log_bytes``: the
restart then replays at most that many bytes of records on top of the snapshot.

What it holds: the host (the process with every virtual node, the requests in flight, the
retry window, the counters, the member directory), what the daemon handled of each
peer's link, and each link's outbox with its frame numbers.  It is the daemon's own state on its
own disk, read back only by the same version of skueued (the data directory's meta file
says which), so it uses pickle; nothing read from the network is ever unpickled.  The
elements themselves are not in it: the tables' entry store keeps them on its own disk,
and the snapshot names their records (:mod:`skueue.runtime.durability.entry_store`).
"""

from __future__ import annotations

from collections import deque
from typing import Any, BinaryIO

import attrs

from skueue.host.host import Host
from skueue.runtime.durability.entry_store import SnapshotEntryStore, dump, load
from skueue.runtime.network.link_receiver import Inbound
from skueue.runtime.network.link_sender import Blob, LinkSender
from skueue.runtime.network.peers import PeerLinks


@attrs.define
class DaemonSnapshot:
    host: Host
    handled: dict[str, int]
    outboxes: dict[str, tuple[list[Blob], int, int]]  # blobs, next frame number, base


def capture(
    file: BinaryIO,
    host: Host,
    inbound: dict[str, Inbound],
    links: PeerLinks,
    store: SnapshotEntryStore | None,
) -> None:
    """Write the snapshot of a daemon between two steps (nothing waits to be flushed)."""
    handled = {peer: i.handled for peer, i in inbound.items()}
    capture_state(file, host, handled, links.senders, store)


def capture_state(
    file: BinaryIO,
    host: Host,
    handled: dict[str, int],
    senders: dict[str, LinkSender],
    store: SnapshotEntryStore | None,
) -> None:
    """Write the snapshot of a process's state: its host, the last frame it handled of
    each peer's link, and its outbox to each (a daemon's own, or a follower slot's,
    runtime/applied_state.py)."""
    capture_snapshot(file, snapshot_of(host, handled, senders), store)


def snapshot_of(
    host: Host, handled: dict[str, int], senders: dict[str, LinkSender]
) -> DaemonSnapshot:
    """A process's state as a snapshot holds it (its outboxes as blobs and numbers)."""
    outboxes = {
        peer: (list(link.outbox), link.next_number, link.base)
        for peer, link in senders.items()
    }
    return DaemonSnapshot(host, dict(handled), outboxes)


def capture_snapshot(
    file: BinaryIO, snapshot: DaemonSnapshot, store: SnapshotEntryStore | None
) -> None:
    """Write ``snapshot`` (its elements named in ``store``, which keeps them)."""
    dump(snapshot, file, store)


def restore(file: BinaryIO, store: SnapshotEntryStore | None) -> DaemonSnapshot:
    """The snapshot's state (its host's clients of the last life are ended by the
    ``TookOver`` input that follows the replay)."""
    snapshot: Any = load(file, store)
    if not isinstance(snapshot, DaemonSnapshot):
        raise ValueError("the snapshot does not hold a daemon's state")
    return snapshot


def install_outbox(link: LinkSender, blobs: list[Blob], next_number: int, base: int) -> None:
    link.outbox = deque(blobs)
    link.outbox_bytes = sum(len(b.data) for b in blobs)
    link.next_number, link.base, link.next_blob, link.offset = next_number, base, base, 0
