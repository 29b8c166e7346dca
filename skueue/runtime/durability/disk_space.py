"""A durable daemon's disk: enqueues stop before it is full, and a write that fails for
want of space (or a broken disk) stops the daemon with one line instead of a traceback.

Two layers, because a daemon cannot refuse everything that writes:

- **A reserve.** Below ``disk_free_min_bytes`` free in the data directory, a client's
  enqueue is answered with a retryable "unavailable" error that says why, and nothing is
  done for it.  Everything else goes on: dequeues (which free pages), peer traffic (a
  member cannot refuse the Puts of elements it owns), snapshots.  The cluster spreads the
  elements evenly, so every member's disk fills at about the same pace and each refuses
  its own clients' enqueues before its disk is full.
- **A stop.** A write that still fails (another program filled the disk, or the disk
  broke) ends the daemon: ``skueued`` prints :func:`disk_failure`'s line and exits 1.
  Nothing acknowledged is lost: a step's replies and frames go out only after its
  writes, and a restart with the same directory replays the log.

The free space is read with ``statvfs`` at most every ``CHECK_INTERVAL_S``, so an enqueue
costs no system call.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

# Errors of the disk, not of the program: out of space or quota, read-only, failing.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})
CHECK_INTERVAL_S = 0.5
# Under the reserve, how often a snapshot may be taken early to free what dequeues took.
COMPACT_INTERVAL_S = 1.0
MIB = 1024 * 1024


class DiskSpace:
    """The free space of one data directory, against the reserve."""

    def __init__(self, directory: Path, reserve_bytes: int) -> None:
        self.directory = directory
        self.reserve_bytes = reserve_bytes
        self.free_bytes: int | None = None  # as last read
        self.read_at = -float("inf")
        self.refused = 0  # enqueue requests refused for it (metrics, stats)
        self.compacted_at = -float("inf")

    def read(self, now: float) -> int | None:
        """The free bytes, read again if the last reading is CHECK_INTERVAL_S old (None:
        they cannot be read; the writes themselves find out)."""
        if now - self.read_at >= CHECK_INTERVAL_S:
            try:
                found = os.statvfs(self.directory)
                self.free_bytes = found.f_bavail * found.f_frsize
            except OSError:
                self.free_bytes = None
            self.read_at = now
        return self.free_bytes

    def shortage(self, now: float) -> str | None:
        """Why an enqueue must wait for space now (None: there is room)."""
        if self.reserve_bytes <= 0:
            return None
        free = self.read(now)
        if free is None or free >= self.reserve_bytes:
            return None
        return (
            f"the data directory {self.directory} has {free / MIB:.1f} MiB free, "
            f"under the reserve of {self.reserve_bytes / MIB:.0f} MiB "
            "(disk_free_min_bytes): enqueues wait until dequeues or the operator free space"
        )


    def compact_now(self, now: float, reclaimable: bool) -> bool:
        """Whether to take a snapshot now, before the log is due one: under the reserve,
        with elements dequeued whose records are still on disk (a record goes only once
        no snapshot names it: runtime/durability/entry_store.py), at most every COMPACT_INTERVAL_S.
        Without it an idle daemon under the reserve would keep the space for ever."""
        if not reclaimable or now - self.compacted_at < COMPACT_INTERVAL_S:
            return False
        if self.shortage(now) is None:
            return False
        self.compacted_at = now
        return True


def disk_failure(e: BaseException) -> str | None:
    """The one line for a write the disk refused (None: ``e`` is not that)."""
    if not isinstance(e, OSError) or e.errno not in DISK_ERRNOS:
        return None
    where = f" ({e.filename})" if e.filename else ""
    return (
        f"the disk refused a write: {e.strerror or e}{where}. Nothing acknowledged is "
        "lost: free space (or mend the disk) and start skueued again with the same "
        "data directory"
    )
