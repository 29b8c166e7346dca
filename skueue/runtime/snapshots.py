"""Snapshots of a durable daemon: its whole state at the end of a step, so that its input
log starts afresh and a restart replays only what came after (issue 11: the snapshot
bounds the replay time; the input log is in :mod:`skueue.runtime.input_log`).

A snapshot is taken when the log's current segment reaches ``snapshot_log_bytes``: the
restart then replays at most that many bytes of records on top of the snapshot.

What it holds: the host (the process with every virtual node, the requests in flight, the
retry window, the counters), the member directory, what the daemon handled of each peer's
link, and each link's outbox with its frame numbers.  It is the daemon's own state on its
own disk, read back only by the same version of skueued (the data directory's meta file
says which), so it uses pickle; nothing read from the network is ever unpickled.  The
elements themselves are not in it: the tables' entry store keeps them on its own disk,
and the snapshot names their records (:mod:`skueue.runtime.entry_store`).
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Any, BinaryIO

import attrs

from skueue.host.directory import Directory
from skueue.host.host import Host
from skueue.runtime.entry_store import SnapshotEntryStore, dump, load
from skueue.runtime.link_receiver import Inbound
from skueue.runtime.link_sender import Blob, LinkSender
from skueue.runtime.peers import PeerLinks

# The client id that requests restored from a snapshot or replayed run under: no
# connection has it (their clients are gone; those that retry find them by their key).
RESTORED = -1


@attrs.define
class DaemonSnapshot:
    host: Host
    directory: Directory
    handled: dict[str, int]
    outboxes: dict[str, tuple[list[Blob], int, int]]  # blobs, next frame number, base


def capture(
    file: BinaryIO,
    host: Host,
    directory: Directory,
    inbound: dict[str, Inbound],
    links: PeerLinks,
    store: SnapshotEntryStore | None,
) -> None:
    """Write the snapshot of a daemon between two steps (nothing waits to be flushed)."""
    assert not host.client_frames and not any(host.peer_frames.values())
    snapshot = DaemonSnapshot(
        host,
        directory,
        {peer: i.handled for peer, i in inbound.items()},
        {
            peer: (list(link.outbox), link.next_number, link.base)
            for peer, link in links.senders.items()
        },
    )
    dump(snapshot, file, store)


def restore(file: BinaryIO, store: SnapshotEntryStore | None) -> DaemonSnapshot:
    snapshot: Any = load(file, store)
    if not isinstance(snapshot, DaemonSnapshot):
        raise ValueError("the snapshot does not hold a daemon's state")
    host = snapshot.host
    # Every client of the last life is gone; their requests stay, under one id no
    # connection has, and without deadlines (their clocks were another process's).
    requests = {id(r): r for r, _ in host.ops.values()}
    for request in requests.values():
        request.client = RESTORED
    host.pending_requests = Counter({RESTORED: len(requests)}) if requests else Counter()
    host.gone_clients = {RESTORED} if requests else set()
    host.deadlines = []
    host.wait_ends = []  # the last life's clock; its waits end after the replay
    return snapshot


def install_outbox(link: LinkSender, blobs: list[Blob], next_number: int, base: int) -> None:
    link.outbox = deque(blobs)
    link.outbox_bytes = sum(len(b.data) for b in blobs)
    link.next_number, link.base, link.next_blob, link.offset = next_number, base, base, 0
