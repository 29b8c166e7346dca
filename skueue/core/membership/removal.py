"""Forgetting a process that will never come back (``skueue remove-member``): what a node
holds of it, and dropping it where that loses nothing.

Theory of operation
-------------------
The ring is the member list.  A process in it holds three nodes with their edges, its
share of the DHT and maybe the anchor; taking it out without that state would lose
elements and leave holes in the tree, so it cannot be forgotten until its state exists
elsewhere (replication, issue 31, which will turn a RING hold into a failover).

A process that only asked to join holds none of that: its nodes are *joiners*, placed
at responsible nodes, and its left node is relayed as a child (a responsible node waits
for a batch from every child, so a joiner that died stalls the whole tree).  As long as
none of its operations went up the tree (no position or rank was given to them) and its
join is not counted for integration, forgetting it loses nothing but its place in line.

:func:`hold_on` says what one node holds of a process:

- ``NONE``: nothing;
- ``JOINER``: only joiners of it that are not counted, whose operations never went up
  (a batch of it filed here, not sent on, is dropped with it);
- ``RING``: anything else, with the words why (a neighbour, a child in an update phase,
  a counted joiner, operations of it that went up, a handover, our contact for a join).

:func:`forget_joiner` drops a ``JOINER`` hold; a driver forgets a process only once no
node of any member holds it as ``RING``.  The hold is read from the node's own state
(local knowledge only); a driver asks every member.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from skueue.core.errors import ProtocolError
from skueue.core.parts.node_state import NodeState
from skueue.core.parts.ring import Mode
from skueue.overlay.labels import NodeRef


class Hold(enum.IntEnum):
    """What a node holds of a process, ordered: the worst of several is the max."""

    NONE = 0
    JOINER = 1
    RING = 2


def hold_on(node: NodeState, process: str) -> tuple[Hold, str]:
    """What ``node`` holds of ``process``, and why in words (empty for NONE)."""
    why = _ring_hold(node, process)
    if why is not None:
        return Hold.RING, f"{node.me.describe()}: {why}"
    ring, member = node.ring, node.member
    placed = [j for j in ring.joiners if j.process == process]
    if placed or any(j.process == process for j in (*member.deferred_joins, *ring.released)):
        return Hold.JOINER, f"{node.me.describe()} places it as a joiner not yet counted"
    return Hold.NONE, ""


def _ring_hold(node: NodeState, process: str) -> str | None:
    """Why ``node`` holds ``process`` as part of the ring (None: it does not)."""
    ring, member, batching = node.ring, node.member, node.batching

    def of(refs: Iterable[NodeRef | None]) -> bool:
        return any(r is not None and r.process == process for r in refs)

    view = ring.view
    if ring.mode is Mode.MEMBER and of((view.pred, view.succ)):
        return "it is a neighbour in the ring"
    if ring.mode is Mode.JOINING and of((ring.responsible, member.contact)):
        return "this joining node is placed by it, or joins through it"
    if of(member.counted_joiners):
        return "its join is counted: it is integrated in the next update phase"
    if of(ring.relayed_ops):
        return "operations of it went up the tree (positions were given to them)"
    flight = batching.inflight
    if flight is not None and any(
        child is not None and child.process == process and sub.operations
        for child, sub in flight.layout
    ):
        return "operations of it are in the batch on its way up"
    phase = member.phase
    if phase is not None and (
        of(phase.old_children)
        or of((phase.old_parent, phase.asked, phase.absorber, phase.integrated_by))
        or of(phase.acks)
        or of(phase.granted)
        or of(phase.absorbing)
        or of(phase.absorbing.values())
        or of(phase.moves_unconfirmed)
    ):
        return "the update phase in progress waits for it"
    if of(member.incoming.parts) or of(member.incoming.finals):
        return "a handover from it is arriving"
    return None


def note_relayed(node: NodeState) -> None:
    """After a batch went up (or was assigned): relayed joiners whose operations were in
    it are part of the cluster's history from now on (see :func:`hold_on`)."""
    flight = node.batching.inflight
    if flight is None or not node.ring.joiners:
        return
    for child, sub in flight.layout:
        if child is not None and sub.operations and child in node.ring.joiners:
            node.ring.relayed_ops.add(child)


def forget_joiner(node: NodeState, process: str) -> bool:
    """Drop every joiner of ``process`` this node places, with a batch of it filed here;
    True if there was one.  Only for a ``JOINER`` hold (``RING`` is refused)."""
    if hold_on(node, process)[0] is Hold.RING:
        raise ProtocolError(f"{node.me.describe()} holds {process} as part of the ring")
    ring, member, batching = node.ring, node.member, node.batching
    gone = [j for j in ring.joiners if j.process == process]
    member.deferred_joins = [j for j in member.deferred_joins if j.process != process]
    ring.released = {j for j in ring.released if j.process != process}
    batching.withdrawn = {(j, n) for j, n in batching.withdrawn if j.process != process}
    for joiner in gone:
        batching.child_batches.pop(joiner, None)
        batching.child_numbers.pop(joiner, None)
        batching.hurry_sent.discard(joiner)
    if gone:
        ring.joiners = [j for j in ring.joiners if j.process != process]
        ring.recompute_tree()
    return bool(gone)
