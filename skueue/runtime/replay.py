"""Coming back from a crash: the last snapshot, then the input log's records after it, each
stepped through the host as the first time (the log itself is described in
:mod:`skueue.runtime.durability.input_log`, its records in
:mod:`skueue.runtime.durability.records`).

Replaying is "for each record: step".  Nothing goes out while it runs: replies are
dropped (the clients are gone; those that retry get the first attempt's outcome from the
retry window), and every frame for a peer goes into its link's outbox again, numbered as
the first time, so that the peers skip the ones they already took.  Then the daemon
leads its replication group again (runtime/group.py), and the host's ``TookOver`` input
(logged, like any) ends what the last life's clients left: their blocking waits, their
leases; the lease clock goes on from the log's last reading.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import trio

from skueue.host.address import Address
from skueue.host.inputs import PeerControl, PeerMessage, TookOver
from skueue.runtime.durability.entry_store import named_records
from skueue.runtime.durability.records import UnreadableRecord, input_of
from skueue.runtime.durability.snapshot_file import open_snapshot
from skueue.runtime.durability.snapshots import install_outbox, restore
from skueue.runtime.errors import DaemonError
from skueue.runtime.network.link_receiver import Inbound
from skueue.runtime.network.link_sender import LinkSender
from skueue.runtime.owner import Owner, lease_clock_ms
from skueue.runtime.state import log


def restore_snapshot(owner: Owner, path: Path) -> None:
    """Take the state of the last snapshot (the records after it are replayed next).
    The addresses this start met stay known (a member may have moved since)."""
    links = owner.ctx.links
    assert links is not None
    try:
        with open_snapshot(path) as f:
            snapshot = restore(f, owner.entry_store)
    except Exception as e:  # noqa: BLE001 - whatever unpickling a bad file raises
        raise DaemonError(f"the data directory's snapshot cannot be read: {e}") from None
    met: dict[str, Address] = dict(owner.host.directory.addresses)
    owner.host = snapshot.host
    directory = owner.ctx.directory = links.directory = owner.host.directory
    for peer, address in met.items():
        if peer not in directory.departed:
            directory.learn(peer, address)
    for peer, handled in snapshot.handled.items():
        inbound = owner.ctx.inbound.setdefault(peer, Inbound())
        inbound.accepted = inbound.handled = inbound.acked = handled
    for peer, (blobs, next_number, base) in snapshot.outboxes.items():
        link = links.senders.get(peer)
        if link is None:  # its writer starts once its address is known
            link = links.senders[peer] = LinkSender()
            links.unaddressed.add(peer)
        install_outbox(link, blobs, next_number, base)
    log.info("restored the snapshot", process=owner.ctx.process_id, bytes=path.stat().st_size)


def forget_lost_appends(owner: Owner) -> None:
    """Before the replay: the entry store keeps only what the restored state names
    (runtime/durability/entry_store.py); the replay makes the rest again."""
    if owner.entry_store is not None:
        gone = owner.entry_store.keep_only(named_records(owner.host.process))
        if gone:
            log.info("entry store: records the replay makes again were removed",
                     process=owner.ctx.process_id, records=gone)  # fmt: skip


def replay(owner: Owner, records: Iterable[Any], take_over: bool = True) -> None:
    """Step every record through the host; then lead the group and end the last life
    (``TookOver``, committed before anything it made goes out), and hand the peers'
    links what the replay made for them, held until it is committed.  A group of
    several voters (``take_over`` False) must win an election first: the owner steps
    ``TookOver`` once it leads (runtime/owner.py)."""
    ctx, group = owner.ctx, owner.group
    links = ctx.links
    assert links is not None and group is not None
    handled: dict[str, int] = {}
    owner.replaying = True
    count = 0
    try:
        for count, record in enumerate(records, 1):  # noqa: B007 - the count is logged
            try:
                item = input_of(record)
            except UnreadableRecord as e:
                raise DaemonError(f"input log: {e}") from None
            if isinstance(item, PeerMessage | PeerControl):
                handled[item.peer] = item.number
            owner.enter(item)
    finally:
        owner.replaying = False
    if take_over:
        now = trio.current_time()
        owner.enter(TookOver(group.take_over(now), lease_clock_ms()))
        group.end_step(now)
    # New connections are numbered past every one the log names.
    ctx.sessions.client_ids = itertools.count(owner.host.client_ids_max + 1)
    for peer, number in handled.items():
        inbound = ctx.inbound.setdefault(peer, Inbound())
        inbound.accepted = inbound.handled = inbound.acked = number
    owner.replies = []  # for the last life's clients, who are gone
    owner.flush()  # the frames go as the log's commit reaches them: at once for one voter
    log.info(
        "replayed the input log",
        process=ctx.process_id,
        records=count,
        frames_to_resend=links.unacknowledged(),
    )
