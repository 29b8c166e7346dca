"""Start-up: the data directory, the cluster this daemon belongs to, and its host.

A daemon is either a member of a static cluster (``--peers``: every peer must answer at
the first start; a durable daemon's data directory remembers them afterwards), or a
joiner (``--join SEED``: it starts as a lone process, and its first input makes it a
joiner of the seed's cluster, as ``skueue join`` would), or alone.  A durable daemon
then comes back where it stopped: its last snapshot, and the input log replayed
(:mod:`skueue.runtime.replay`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import trio

from skueue.host.address import Address, parse_address
from skueue.host.directory import Directory
from skueue.host.inputs import JoinStart
from skueue.host.placement import voters_of
from skueue.replication.config import Config
from skueue.runtime.config import DaemonConfig
from skueue.runtime.durability.data_lock import DataDirLock
from skueue.runtime.durability.disk_space import DiskSpace
from skueue.runtime.durability.entry_store import ENTRIES_DIRECTORY, SnapshotEntryStore
from skueue.runtime.durability.input_log import InputLog, Meta, directory_name
from skueue.runtime.errors import DaemonError
from skueue.runtime.failover import become_backup
from skueue.runtime.group import ProcessGroup
from skueue.runtime.homecoming import come_home
from skueue.runtime.network.handshake import REPLICAS_AUTO, check_distinct
from skueue.runtime.new_host import new_host
from skueue.runtime.owner import Owner
from skueue.runtime.replay import forget_lost_appends, replay, restore_snapshot
from skueue.runtime.replica_count import adopt
from skueue.runtime.replicas import channel_sender, open_replicas
from skueue.runtime.restore import RESTORING, restore_from_copies
from skueue.runtime.snapshot_transfer import SnapshotShipper
from skueue.runtime.stand_in import StandIns
from skueue.runtime.state import DaemonContext, log


@dataclass
class DataDirectory:
    """What a durable daemon keeps on its disk (all None: an in-memory daemon)."""

    lock: DataDirLock | None = None
    input_log: InputLog | None = None
    entry_store: SnapshotEntryStore | None = None
    disk: DiskSpace | None = None


def data_directory(ctx: DaemonContext) -> Path | None:
    """Where the daemon keeps its state (None: in memory)."""
    config = ctx.config
    if config.data_dir is None and config.data_root is not None:
        return config.data_root / directory_name(ctx.process_id)
    return config.data_dir


async def open_data_directory(ctx: DaemonContext) -> DataDirectory:
    """The data directory's lock, log, entry store and free space (nothing: an in-memory
    daemon), restored from the group's copies first with ``--restore-from-copies``.  The
    daemon keeps the nonce it had the first time, so that its peers take it back as the
    same member."""
    config, links = ctx.config, ctx.links
    assert links is not None
    directory = data_directory(ctx)
    if directory is None:
        return DataDirectory()
    # First, before anything in the directory is read or written (runtime/durability/data_lock.py).
    lock = DataDirLock(directory)
    if config.replicas == REPLICAS_AUTO:
        ctx.config = config = await _seeds_replicas(ctx)
    if config.restore_from_copies:
        await restore_from_copies(ctx, directory)
    elif (directory / RESTORING).exists():
        raise DaemonError(f"a restore from copies into {directory} was cut short: start "
                          "again with --restore-from-copies")  # fmt: skip
    meta = Meta(ctx.process_id, links.nonce, config.structure.value, (), replicas=config.replicas)
    input_log = InputLog.open(directory, meta, config.fsync)
    if input_log.meta.replicas != config.replicas:
        raise DaemonError(
            f"{directory} was started with --replicas {input_log.meta.replicas}; it cannot "
            f"change to {config.replicas} yet (every member must run with the same value)"
        )
    if input_log.meta.left:
        raise DaemonError(
            f"the daemon of {directory} left its cluster; it cannot come back as "
            "that member (start it with an empty --data-dir to serve again)"
        )
    links.nonce = input_log.meta.nonce
    links.incarnations.update(input_log.meta.incarnations)
    links.remember_incarnation = input_log.record_incarnation
    limits = ctx.limits
    store = SnapshotEntryStore(
        directory / ENTRIES_DIRECTORY, limits.entry_page_bytes, limits.entry_pages_mapped_max
    )
    disk = DiskSpace(directory, limits.disk_free_min_bytes)
    log.info("durable", data_dir=str(directory), records=input_log.record_count,
             fsync=config.fsync.mode)  # fmt: skip
    return DataDirectory(lock, input_log, store, disk)


async def _seeds_replicas(ctx: DaemonContext) -> DaemonConfig:
    """A joiner's first start without ``--replicas``: its seed's (runtime/replica_count.py)."""
    config, links = ctx.config, ctx.links
    assert links is not None and config.join is not None
    await links.connect_seed(config.join, ctx.limits.join_timeout_s)
    if links.replicas == REPLICAS_AUTO:
        raise DaemonError(f"{config.join} is joining its cluster itself: join through a member")
    return adopt(config, links.replicas)


async def start_owner(ctx: DaemonContext, data: DataDirectory) -> tuple[Owner, int]:
    """The owner of a host that stands where this daemon stopped (or new), and how many
    members it met at start (0: it joins)."""
    config, links = ctx.config, ctx.links
    assert links is not None and ctx.directory is not None
    input_log = data.input_log
    if input_log is None:
        links.ready.set()  # an in-memory daemon's outboxes start empty, as they are
    join = None
    if config.join is not None:
        join = await _seed(ctx, input_log)
        members = [ctx.process_id]
    else:
        members = await _static_members(ctx, input_log)
    host = new_host(ctx.process_id, ctx.directory, members, config.structure, ctx.limits,
                    data.entry_store)  # fmt: skip
    owner = Owner(ctx, host, None, data.entry_store, data.disk)
    fresh = input_log is None or input_log.fresh()
    if input_log is not None:
        began = time.perf_counter()
        if input_log.snapshot_file is not None:
            restore_snapshot(owner, input_log.snapshot_file)
            input_log.snapshot_file = None
        forget_lost_appends(owner)
        owner.input_log = input_log
        _open_group(ctx, owner, input_log, members, not fresh, joins=join is not None)
        if not fresh:
            log.info("recovery done", process=ctx.process_id,
                     seconds=round(time.perf_counter() - began, 3),
                     records=input_log.record_count)  # fmt: skip
    if owner.replicas is None:
        owner.led.set()  # in memory, or a group of one: it led as the replay ended
    if join is not None:
        _start_joining(owner, join, input_log, fresh)
    # Joined, or still joining (a --join, or a restart in the middle of one).
    owner.joined = trio.Event()
    if owner.host.joined and (owner.replicas is None or owner.replicas.when_replicated is None):
        owner.joined.set()  # (a joiner that waits for a second replica is alone until then)
    assert ctx.channels is not None
    ctx.channels.ready.set()
    if owner.replicas is None:
        links.ready.set()
    # else: once the replay's frames are committed and numbered on their links
    # (Owner.flush), or a peer's count of them would look like a lost state.
    return owner, 0 if join is not None else len(members)


def _open_group(
    ctx: DaemonContext, owner: Owner, input_log: InputLog, members: list[str], restart: bool,
    joins: bool,
) -> None:  # fmt: skip
    """The process's replication group and, with ``--replicas`` above 1, the follower
    slots this daemon keeps for others (``restart``: its own log held something); then
    the replay of the log.  A group of one leads at once; a larger one campaigns, and
    the owner steps nothing until it leads.  A joiner's group (``joins``) starts with
    its own replica alone, and grows to ``--replicas`` voters as it meets the members
    (runtime/re_replication.py)."""
    k, own, channels, links = ctx.config.replicas, ctx.process_id, ctx.channels, ctx.links
    assert channels is not None and links is not None
    if k > len(members) and not joins:
        raise DaemonError(
            f"--replicas {k} needs at least {k} members; this cluster has {len(members)}"
        )
    voters = voters_of(own, members, k)
    send = None if k == 1 else channel_sender(channels, own)
    group = owner.group = ProcessGroup(own, input_log, Config.of(voters), send)
    replay(owner, input_log.records(), take_over=group.lone)
    input_log.replay_segments = []
    if not group.lone:
        now = trio.current_time()
        owner.replicas = open_replicas(group, members, ctx, input_log,
                                       dict(owner.host.directory.addresses), now,
                                       restart)  # fmt: skip
        owner.replicas.want_snapshot = lambda: setattr(owner, "snapshot_wanted", True)
        group.shipper = SnapshotShipper(own, input_log, owner.entry_store, ctx.limits,
                                        channels.send)  # fmt: skip
        owner.must_take_over = True
        owner.links_wait_for = group.node.last_index
        if ctx.config.failover:
            group.failover = owner.replicas.failover = links.failover = True
            group.store = owner.entry_store
            group.on_deposed = lambda: become_backup(owner)
            # Its host is its whole log's state (homecoming.py: it may lead again).
            group.replayed = group.log_position()
            if ctx.can_restart:
                group.on_homecoming = lambda: come_home(ctx)
            owner.replicas.elected = StandIns(ctx, owner.replicas, input_log, members).elect
        group.campaign()
        log.info("replicated: waiting for a majority of the process's group to elect it",
                 voters=list(voters), follows=sorted(owner.replicas.slots))  # fmt: skip


def _start_joining(
    owner: Owner, join: tuple[str, str], input_log: InputLog | None, fresh: bool
) -> None:
    """A joiner steps ``JoinStart`` at its first start.  A replicated one waits until its
    group has a second voter (its seed, the one member it knows: runtime/re_replication.py),
    so that its first step in the ring, and what the join brings it, are on two hosts;
    a restart before then still waits (``meta.join_started``: it stepped it)."""
    seed, address = join
    start = JoinStart(seed, address, None, 0)  # answered to nobody: start-up's
    if owner.replicas is None or input_log is None:
        if fresh:
            owner.enter(start)
        return
    if input_log.meta.join_started:
        return
    if not fresh and not (owner.host.joined and owner.host.process.stats().alone):
        input_log.record_join_started()  # its log took it before a crash
        return
    stepped = False

    def join_now() -> bool:
        nonlocal stepped
        if owner.must_take_over:
            return False  # (its TookOver goes first)
        if not stepped:
            log.info("the joiner's group has a second replica; it joins now", seed=seed)
            owner.enter(start)
            stepped = True
            return False
        input_log.record_join_started()  # a tick later: the step that took it is written
        return True

    owner.replicas.when_replicated = join_now


async def _seed(ctx: DaemonContext, input_log: InputLog | None) -> tuple[str, str]:
    """The process this daemon joins through, and its address: asked at the first start;
    a durable daemon coming back knows it from its data directory (the seed may be gone)."""
    links, directory, config = ctx.links, ctx.directory, ctx.config
    assert links is not None and directory is not None and config.join is not None
    if input_log is not None and not input_log.fresh():
        if input_log.meta.join is None:
            raise DaemonError(
                f"{input_log.directory} belongs to a member of a static cluster: "
                "start it with --peers, not --join"
            )
        seed, address = input_log.meta.join
        directory.learn(seed, parse_address(address))
        return seed, address
    seed = await links.connect_seed(config.join, ctx.limits.join_timeout_s)
    directory.learn(seed, config.join)
    if input_log is not None:
        input_log.record_join(seed, str(config.join))
    return seed, str(config.join)


async def _static_members(ctx: DaemonContext, input_log: InputLog | None) -> list[str]:
    """A static member's cluster: met through ``--peers`` at the first start (every peer
    must answer then), and recorded in a durable daemon's data directory.  A restart
    builds the ring from that record and replays its log: it waits for no peer, so a
    member that left since, or is down now, does not hold it up, and ``--peers`` is not
    read again (the log knows who left and who joined)."""
    links, directory, config = ctx.links, ctx.directory, ctx.config
    assert links is not None and directory is not None
    recorded = None if input_log is None else input_log.meta
    if recorded is not None and recorded.members:
        for peer, address in recorded.addresses:
            directory.learn(peer, parse_address(address))
        given = {str(a) for a in config.peers}
        if given != {address for _, address in recorded.addresses}:
            log.info(
                "the data directory names this member's cluster; --peers is read at "
                "the first start only",
                recorded=[address for _, address in recorded.addresses],
            )
        others = [p for p in recorded.members if p != ctx.process_id]
        return [ctx.process_id, *others]
    peers = await links.connect_all(config.peers)
    check_distinct(peers)
    for at, peer in peers.items():
        directory.learn(peer, at)
    ids = [ctx.process_id, *dict.fromkeys(peers.values())]
    if input_log is not None:
        met = [(peer, str(address)) for address, peer in peers.items()]
        input_log.record_members(ids, met)
    return ids


def new_directory(ctx: DaemonContext) -> Directory:
    return Directory(ctx.process_id, ctx.address)


__all__ = ["Address", "DataDirectory", "new_directory", "open_data_directory", "start_owner"]
