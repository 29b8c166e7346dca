"""One virtual node's local knowledge of the overlay (SPEC §2).

A node knows itself, its predecessor and successor on the cycle, and (through the
virtual edges) its process's other two nodes.  Nothing else: no node holds the ring.
"""

from __future__ import annotations

from dataclasses import dataclass

from skueue.overlay.labels import Kind, NodeRef


@dataclass(frozen=True, slots=True)
class View:
    me: NodeRef
    pred: NodeRef
    succ: NodeRef

    @property
    def pred_across_cycle(self) -> bool:
        """True when the edge to pred is the cycle edge (I am the minimum node)."""
        return self.pred.key >= self.me.key

    @property
    def succ_across_cycle(self) -> bool:
        """True when the edge to succ is the cycle edge (I am the maximum node)."""
        return self.succ.key <= self.me.key

    @property
    def is_anchor(self) -> bool:
        """The anchor is the minimum node of the cycle; it is always a left node."""
        return self.me.kind is Kind.LEFT and self.pred_across_cycle

    def sibling(self, kind: Kind) -> NodeRef:
        return self.me.sibling(kind)

    def describe(self) -> str:
        return f"{self.pred.describe()} < {self.me.describe()} < {self.succ.describe()}"
