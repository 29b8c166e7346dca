"""Building a static cluster of processes for a simulator, and global measurements.

Only drivers use this module: it sees the whole ring, which the protocol never does.
"""

from __future__ import annotations

from collections.abc import Iterable

from skueue.core.ops import Structure
from skueue.core.parts.membership_state import HANDOVER_BYTES_MAX
from skueue.core.process import Process
from skueue.overlay.labels import Kind
from skueue.overlay.ring import build_views
from skueue.overlay.ring import tree_height as ring_tree_height
from skueue.overlay.tree import children, parent
from skueue.overlay.view import View


def process_ids(count: int) -> list[str]:
    return [f"p{i}" for i in range(count)]


def build_cluster(
    ids: list[str],
    structure: Structure,
    *,
    local_delivery: bool = True,
    handover_bytes_max: int = HANDOVER_BYTES_MAX,
    hurry: bool = False,
) -> dict[str, Process]:
    if not ids:
        raise ValueError("a cluster needs at least one process")
    views = build_views(ids)
    per_process: dict[str, dict[Kind, View]] = {pid: {} for pid in ids}
    for node, view in views.items():
        per_process[node.process][node.kind] = view
    return {
        pid: Process.create(
            pid,
            per_process[pid],
            structure,
            local_delivery=local_delivery,
            handover_bytes_max=handover_bytes_max,
            hurry=hurry,
        )
        for pid in ids
    }


def tree_height(processes: dict[str, Process]) -> int:
    """Longest path from any node up to the anchor, in tree edges."""
    return ring_tree_height(
        {node.ring.view.me: node.ring.view for p in processes.values() for node in p.nodes.values()}
    )


def ring_problems(processes: Iterable[Process]) -> list[str]:
    """After quiescence: every live node's pred/succ must be its neighbour in the sorted
    order of live nodes, and its tree edges the ones SPEC §3 defines for that ring."""
    live = [n for p in processes if not p.departed for n in p.nodes.values()]
    expected = build_views(sorted({n.me.process for n in live}))
    problems = []
    for node in live:
        want = expected.get(node.me)
        if want is None:
            problems.append(f"{node.me.describe()} is not in the ring")
            continue
        if (node.ring.view.pred, node.ring.view.succ) != (want.pred, want.succ):
            problems.append(
                f"{node.me.describe()} has pred {node.ring.view.pred.describe()} succ "
                f"{node.ring.view.succ.describe()}, expected {want.describe()}"
            )
        if node.ring.kids != children(want) or node.ring.up != parent(want):
            problems.append(f"{node.me.describe()} has tree edges other than SPEC §3's")
    anchors = [n.me.describe() for n in live if n.seat.policy is not None]
    if len(anchors) != 1 or not any(n.ring.view.is_anchor and n.seat.policy for n in live):
        problems.append(f"anchor state at {anchors}, expected exactly at the minimum node")
    return problems
