"""The daemon's own CPU time and resident memory, for ``skueue stats`` and ``skueue top``.

The metrics endpoint has these from prometheus_client's ``ProcessCollector``; a member's
entry in the stats answer carries them too, so that ``skueue top`` can show every
member's CPU and memory through one daemon, without a metrics port per member.

CPU is user plus system time of the whole process (``getrusage``: every thread, none of
the children).  RSS is the *current* resident set from ``/proc/self/statm`` (Linux);
``ru_maxrss`` is the peak, not what ``top`` calls RES, so where there is no ``/proc``
the RSS is None (unknown) rather than a misleading number.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

STATM = Path("/proc/self/statm")


def cpu_seconds() -> float:
    """User plus system CPU seconds this process has used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_bytes(statm: Path = STATM) -> int | None:
    """The resident set now, in bytes (None where ``/proc`` cannot tell)."""
    try:
        fields = statm.read_text().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return None


def usage() -> dict[str, float | int | None]:
    """The two figures as a member's stats entry carries them."""
    return {"cpu_seconds": round(cpu_seconds(), 3), "rss_bytes": rss_bytes()}
