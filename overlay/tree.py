"""The aggregation tree, from local knowledge only (SPEC §3, paper §III-B).

A node's parent is its leftmost neighbour; its children are its process's next virtual
node plus its successor when that successor is a left node.  The anchor (minimum node)
has no parent.  Children come in a fixed order (own sibling first, then succ) because
combined batches remember their sub-batches in that order.
"""

from __future__ import annotations

from skueue.overlay.labels import Kind, NodeRef
from skueue.overlay.view import View


def parent(view: View) -> NodeRef | None:
    kind = view.me.kind
    if kind is Kind.LEFT:
        return None if view.is_anchor else view.pred
    if kind is Kind.MIDDLE:
        return view.sibling(Kind.LEFT)
    return view.sibling(Kind.MIDDLE)


def children(view: View) -> tuple[NodeRef, ...]:
    kind = view.me.kind
    if kind is Kind.RIGHT:
        # A right node's successor is a left node only across the cycle edge,
        # which is not a tree edge.
        return ()
    own = view.sibling(Kind.MIDDLE if kind is Kind.LEFT else Kind.RIGHT)
    if view.succ.kind is Kind.LEFT and not view.succ_across_cycle:
        return (own, view.succ)
    return (own,)
