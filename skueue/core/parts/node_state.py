"""Everything one virtual node holds, as a few plain parts.

The node's four stages (:mod:`skueue.core.node.virtual_node`) and the membership protocol
(:mod:`skueue.core.membership`) both act on these parts; neither imports the other's
module for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self

from skueue.core.anchor import AnchorSeat, QueueAnchors
from skueue.core.ops import Structure
from skueue.core.parts.batching import Batching
from skueue.core.parts.membership_state import HANDOVER_BYTES_MAX, JoinTicket, MembershipState
from skueue.core.parts.ring import Mode, Ring
from skueue.core.parts.store import Store
from skueue.overlay.labels import NodeRef
from skueue.overlay.view import View


@dataclass(slots=True)
class NodeState:
    structure: Structure
    ring: Ring
    batching: Batching
    store: Store = field(default_factory=Store)
    seat: AnchorSeat = field(default_factory=AnchorSeat)
    member: MembershipState = field(default_factory=MembershipState)

    @classmethod
    def in_ring(
        cls, view: View, structure: Structure, handover_bytes_max: int = HANDOVER_BYTES_MAX
    ) -> Self:
        """A node of a starting ring; the minimum node holds the anchor."""
        node = cls(
            structure,
            Ring(view),
            Batching(),
            member=MembershipState(handover_bytes_max=handover_bytes_max),
        )
        if view.is_anchor:
            node.seat.take(QueueAnchors.starting(structure))
        return node

    @classmethod
    def joining(
        cls,
        me: NodeRef,
        contact: NodeRef,
        ticket: JoinTicket,
        structure: Structure,
        handover_bytes_max: int = HANDOVER_BYTES_MAX,
    ) -> Self:
        """A node outside the ring that joins through ``contact``; its view is a
        placeholder until it is integrated."""
        member = MembershipState(contact=contact, ticket=ticket,
                                 handover_bytes_max=handover_bytes_max)
        ring = Ring(View(me, me, me), mode=Mode.JOINING)
        return cls(structure, ring, Batching(), member=member)

    @property
    def me(self) -> NodeRef:
        return self.ring.view.me

    @property
    def stack(self) -> bool:
        return self.structure is Structure.STACK
