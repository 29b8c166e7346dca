"""The node's place in the ring: its view (itself, pred, succ), the joiners it places
(relayed as children until they are integrated), and the tree edges that follow from
both (SPEC §3).

The tree edges are recomputed whenever the view or the joiners change, here only; they
are kept rather than derived because every tick reads them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from skueue.overlay.labels import LABEL_SPACE, Kind, NodeRef
from skueue.overlay.tree import children, parent
from skueue.overlay.view import View


class Mode(enum.Enum):
    JOINING = "joining"  # placed (or not yet) at a responsible node, not in the ring
    MEMBER = "member"
    DEPARTED = "departed"


@dataclass(slots=True)
class Ring:
    view: View
    mode: Mode = Mode.MEMBER
    joiners: list[NodeRef] = field(default_factory=list)  # placed here, not yet integrated
    # Relayed joiners placed elsewhere now whose Withdraw (or IntegrateAck) is still due:
    # a batch they sent before they knew may still come, and is accepted until then.
    released: set[NodeRef] = field(default_factory=set)
    # Joining: the node that placed this one (a left node's batches go up through it,
    # as if it were the parent).  None: in the ring, or not placed yet.
    responsible: NodeRef | None = None
    # Relayed joiners whose operations went up through this node: positions were given
    # to them, so such a joiner can never be forgotten (membership/removal.py).
    relayed_ops: set[NodeRef] = field(default_factory=set)
    kids: tuple[NodeRef, ...] = field(init=False)
    up: NodeRef | None = field(init=False)

    def __post_init__(self) -> None:
        self.recompute_tree()

    @property
    def me(self) -> NodeRef:
        return self.view.me

    def set_view(self, view: View) -> None:
        self.view = view
        self.recompute_tree()

    def placed_at(self, responsible: NodeRef) -> None:
        """A joining node's responsible node (re)placed it."""
        self.responsible = responsible
        self.recompute_tree()

    def enter(self, view: View) -> None:
        """Integrated: in the ring, with these neighbours."""
        self.mode = Mode.MEMBER
        self.responsible = None
        self.set_view(view)

    def depart(self) -> None:
        self.mode = Mode.DEPARTED

    def adopt(self, joiners: list[NodeRef]) -> None:
        """Place joiners here, kept in cycle order from this node."""
        self.joiners.extend(joiners)
        me = self.me.label
        self.joiners.sort(key=lambda j: ((j.label - me) % LABEL_SPACE, j.key))
        self.recompute_tree()

    def let_in(self, first: NodeRef, staying: list[NodeRef]) -> None:
        """Stage 2: this node's counted joiners entered the ring, ``first`` is its new
        successor; ``staying`` are the joiners it still places."""
        before = set(self.kids)
        self.joiners = staying
        self.set_view(replace(self.view, succ=first))
        # Relayed joiners placed elsewhere now may still have a batch on its way here.
        self.released |= {j for j in before - set(self.kids) if j.kind is Kind.LEFT}

    def settled(self, joiner: NodeRef) -> None:
        """A released joiner's Withdraw (or IntegrateAck) came: no batch of it is due."""
        self.released.discard(joiner)

    def recompute_tree(self) -> None:
        if self.mode is Mode.JOINING:
            # A joining left node is relayed as a child of its responsible node.
            self.kids = ()
            self.up = self.responsible if self.me.kind is Kind.LEFT else None
            return
        relayed = tuple(j for j in self.joiners if j.kind is Kind.LEFT)
        self.kids = children(self.view) + relayed
        self.up = parent(self.view)
