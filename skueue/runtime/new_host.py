"""A process's host as it stands before its first input: its virtual nodes in the ring of
``members``, its tables in the entry store (or in memory), its retry window.

The daemon makes its own process's host with it at start (runtime/startup.py), and a
follower slot makes the host of the process it copies (runtime/applied_state.py): both
must stand where the leader's first input found it, or the same log would not give
the same state.
"""

from __future__ import annotations

from skueue.core.ops import Structure
from skueue.core.process import Process
from skueue.host.directory import Directory
from skueue.host.host import Host
from skueue.host.retries import RetryWindow
from skueue.overlay.ring import build_views
from skueue.runtime.durability.entry_store import SnapshotEntryStore, attach
from skueue.runtime.limits import Limits


def new_host(
    process_id: str,
    directory: Directory,
    members: list[str],
    structure: Structure,
    limits: Limits,
    store: SnapshotEntryStore | None,
) -> Host:
    views = {n.kind: v for n, v in build_views(members).items() if n.process == process_id}
    process = Process.create(process_id, views, structure,
                             handover_bytes_max=limits.handover_bytes_max, hurry=True)  # fmt: skip
    window = RetryWindow(limits.retry_window_requests_max, limits.retry_window_bytes_max)
    return Host(attach(process, store), directory, retry_window=window, storage=store,
                handover_bytes_max=limits.handover_bytes_max)  # fmt: skip
