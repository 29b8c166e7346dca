"""What a driver may know about a process without reading its nodes: pure copies, for
``skueue stats``, the metrics and the readiness check (:meth:`Process.stats`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from skueue.core.node.virtual_node import VirtualNode
from skueue.core.ops import Structure
from skueue.core.parts.membership_state import OVER


@dataclass(frozen=True, slots=True)
class NodeStats:
    """One virtual node, as :meth:`Process.stats` reports it."""

    entries: int  # DHT entries it stores
    batches_sent: int  # batches it sent up the tree so far
    last_batch_operations: int  # operations in the last of them
    phase_stage: int = 0  # its update phase's stage (1 quiet, 2 joins, 3 leaves); 0: none
    phases_entered: int = 0  # update phases it took part in so far


@dataclass(frozen=True, slots=True)
class ProcessStats:
    """What a driver may know about a process without reading its nodes (pure, a copy)."""

    process_id: str
    structure: Structure
    nodes: Mapping[str, NodeStats]  # "left", "middle", "right"
    anchor: bool  # this process holds the anchor
    size: int | None  # elements in the default queue, known at the anchor only
    joined: bool
    leaving: bool
    departed: bool
    alone: bool  # a one-process cluster: every node is its own predecessor's process
    # Every queue's size, structure ("queue"/"stack") and delivery limit, at the anchor only.
    # size, structure, delivery limit, priority levels
    queues: Mapping[str, tuple[int, str, int, int]] | None = None
    leases_held: int = 0  # elements handed out with a lease, not acked or returned yet

    @property
    def entries(self) -> int:
        return sum(n.entries for n in self.nodes.values())

    @property
    def held_elements(self) -> int:
        """Elements this process stores or, at the anchor, may still have to serve."""
        return max(self.entries, self.size or 0)


def node_stats(node: VirtualNode) -> NodeStats:
    phase = node.member.phase
    return NodeStats(
        node.store.entries(),
        node.batching.batches_sent,
        node.batching.last_batch_operations,
        0 if phase is None or phase.stage == OVER else phase.stage,
        node.member.phases_entered,
    )
