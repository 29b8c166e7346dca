"""Global construction of a static ring: for drivers, simulators and tests only.

The protocol never calls this; it is how a simulator (or a daemon started with a full
member list) hands every node its initial local view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from skueue.overlay.labels import NodeRef, process_nodes, ring_order
from skueue.overlay.tree import parent
from skueue.overlay.view import View


def ring_nodes(process_ids: Iterable[str]) -> list[NodeRef]:
    """All virtual nodes of the given processes in cycle order."""
    return ring_order([n for pid in process_ids for n in process_nodes(pid)])


def build_views(process_ids: Iterable[str]) -> dict[NodeRef, View]:
    """The correct local view of every virtual node of a static ring."""
    nodes = ring_nodes(process_ids)
    count = len(nodes)
    return {
        node: View(me=node, pred=nodes[i - 1], succ=nodes[(i + 1) % count])
        for i, node in enumerate(nodes)
    }


def tree_height(views: Mapping[NodeRef, View]) -> int:
    """Parent edges from the deepest node up to the anchor (a memoised walk up)."""
    depth: dict[NodeRef, int] = {}
    for node in views:
        path: list[NodeRef] = []
        up: NodeRef | None = node
        while up is not None and up not in depth:
            path.append(up)
            up = parent(views[up])
        d = -1 if up is None else depth[up]
        for walked in reversed(path):
            d += 1
            depth[walked] = d
    return max(depth.values())
