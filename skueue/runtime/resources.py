"""Operating-system resources the daemon needs before it serves: open files.

Every client, every connection still saying hello and every peer link is one file
descriptor.  Under the common default soft limit of 1,024 descriptors, ``clients_max``
clients cannot all connect (the listener fails with EMFILE and a real client times out),
so at start the daemon raises its soft limit towards the hard limit (which an
unprivileged process may do) as far as its limits need.  The systemd unit sets the hard
limit itself (``LimitNOFILE=``).
"""

from __future__ import annotations

import resource
from collections.abc import Callable

import structlog

from skueue.runtime.limits import Limits

log = structlog.get_logger("skueued")

# Descriptors beyond connections: the listeners, the event loop, log files, and slack.
SPARE_FILES = 64

GetLimit = Callable[[int], tuple[int, int]]
SetLimit = Callable[[int, tuple[int, int]], None]


def files_needed(limits: Limits, peers: int) -> int:
    """Descriptors for every connection the limits allow (two per peer: one link each
    way), plus spares."""
    connections = limits.clients_max + limits.admin_clients_max + limits.hello_pending_max
    return connections + 2 * peers + SPARE_FILES


def raise_open_files_limit(
    needed: int,
    getrlimit: GetLimit = resource.getrlimit,
    setrlimit: SetLimit = resource.setrlimit,
) -> int:
    """Raise the soft RLIMIT_NOFILE to ``needed`` (or as far as the hard limit allows);
    return the soft limit now in force.  Logs one warning when it stays short."""
    soft, hard = getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target > soft:
        try:
            setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-files limit", soft=soft, wanted=target, error=str(e))
    if soft < needed:
        log.warning(
            "the open-files limit is below what the connection limits need; raise it "
            "(systemd: LimitNOFILE=, shell: ulimit -n) or lower clients_max",
            limit=soft,
            needed=needed,
        )
    return soft
