"""What one member says of itself in ``skueue stats``: its host's counters, its data
directory, its replication group, its readiness and its resources."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from skueue.runtime.operations.stats import local_stats
from skueue.runtime.operations.usage import usage

if TYPE_CHECKING:
    from skueue.runtime.owner import Owner


def member_stats(owner: Owner) -> dict[str, Any]:
    """This process's part of ``skueue stats``: the host's, plus the elements whose
    replies never reached their client (counted by the sessions)."""
    ctx = owner.ctx
    stats = local_stats(owner.host)
    stats["dropped_results"] += ctx.sessions.dropped_results
    log_ = owner.input_log
    durable = None if log_ is None else {
        "data_dir": str(log_.directory),
        "log_bytes": log_.end,
        "segment": log_.segment,
        "fsync": log_.policy.mode,
        **_disk_stats(owner),
        **_group_stats(owner),
    }
    ready = owner.readiness()
    down = ctx.links.down() if ctx.links is not None else {}
    return {
        **stats,
        "address": str(ctx.address),
        "durable": durable,
        "ready": ready.ready,
        "ready_reason": ready.reason,
        # What skueue top shows of each member besides the counters above.
        "peers_down": {p: round(s, 1) for p, s in down.items()},
        **usage(),
    }


def _group_stats(owner: Owner) -> dict[str, Any]:
    """The process's replication group: its replicas, the term (the epoch: a new
    one at each start) and the last committed entry."""
    group = owner.group
    if group is None:
        return {}
    node = group.node
    # How many entries each follower is behind the leader's log (known to the leader).
    lag = {host: node.last_index - pr.match for host, pr in node.progress.items()}
    # The copies it keeps of other processes: the last entry each applied (None: it has
    # no state), and the leader's checks of that state it passed and failed.
    slots = {} if owner.replicas is None else owner.replicas.slots
    # With failover (runtime/stand_in.py, runtime/failover.py): the processes this
    # member serves for others, where; and, for a backup of its own, who leads it.
    standing = {} if owner.replicas is None else owner.replicas.standing
    backup = {"led_by": node.leader} if owner.ctx.backup is not None else {}
    # Re-replication (runtime/re_replication.py): the hosts declared lost for good.
    lost = [] if owner.replicas is None else sorted(owner.replicas.lost)
    return {"replicas": list(node.config.voters), "learners": list(node.config.learners),
            "hosts_lost": lost, "term": node.term,
            "commit_index": node.commit, "replica_lag": lag,
            "copies": {process: slot.stats() for process, slot in slots.items()},
            "stands_in_for": dict(standing), **backup}  # fmt: skip


def _disk_stats(owner: Owner) -> dict[str, Any]:
    """The data directory's free space as last read, the reserve, and the enqueues
    refused for it (runtime/durability/disk_space.py)."""
    disk = owner.disk
    if disk is None:
        return {}
    return {
        "free_bytes": disk.read(trio.current_time()),
        "reserve_bytes": disk.reserve_bytes,
        "refused_for_space": disk.refused,
    }
