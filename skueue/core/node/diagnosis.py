"""Why a node is not idle, in words: a driver's diagnosis of a stall."""

from __future__ import annotations

from skueue.core.parts.node_state import NodeState
from skueue.core.parts.ring import Mode


def waiting_for(node: NodeState) -> str | None:
    """Why this node is not idle, for a driver's diagnosis; None if it is idle."""
    reasons = []
    flight = node.batching.inflight
    if flight is not None:
        if not flight.served:
            reasons.append("grants for its batch")
        if flight.outstanding:
            reasons.append(f"{len(flight.outstanding)} own DHT operations")
    if node.store.awaiting:
        reasons.append(f"elements for {len(node.store.awaiting)} Gets")
    if node.member.phase is not None:
        reasons.append(f"the update phase ({node.member.phase.describe()})")
    if node.ring.mode is Mode.JOINING:
        reasons.append("integration (joining)")
    waiting = node.store.waiting_count()
    if waiting:
        reasons.append(f"{waiting} Puts that Gets wait for here")
    return ", ".join(reasons) or None
