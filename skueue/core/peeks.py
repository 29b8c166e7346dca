"""Peeks (issue 14): the element a dequeue would return now, left in the queue.

A peek is serialized like every operation.  A batch counts its peeks per queue name
(``Batches.peeks``), and the anchor applies them after the cycle's runs and deletes of
that name (:func:`peek_heads`).  Every peek of the cycle on one queue sees the same
head, the oldest element of the most urgent level that holds any, and gets its own rank.

What comes back down per name is a :data:`Peeked`, split over the sub-batches in their
fixed order like a run (:func:`split_peeks`): the head's position (``available`` 1), or
none (the queue is empty, or no queue has the name); or a refusal, for a stack.

The element itself is read at its owner by a Get that leaves the entry where it is
(``Get.keep``).  That read sees the head as the anchor saw it:

- **Nothing removes the head first.**  Within the cycle, every dequeue came before the
  peeks.  A dequeue of a later cycle may take the head, but the peeking node keeps its
  batch in flight until its reads are answered, as a stack's node does for its DHT
  operations (paper §VI).  The anchor serializes no later cycle before every node
  reported, so no later dequeue is assigned before the read is done.
- **The head may not be stored yet.**  Its Put may still be on its way; the read then
  waits for it at the owner, as a Get does.
- **Program order.**  The anchor puts a cycle's runs before its peeks.  So an operation
  on the name issued after a peek in the same buffer waits for the next batch
  (:class:`~skueue.core.intake.OwnBuffers`), as after a delete.

A peek takes no lease, so a leased element is not at the head: it left the queue when it
was leased, and comes back at the tail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from skueue.core.anchor import QueueAnchor, QueueAnchors
from skueue.core.batch import RANK_MAX, Batches, Peeks, QueueKey, RunGrant
from skueue.core.ops import REFUSED_OTHER_STRUCTURE
from skueue.core.priority_anchor import PriorityAnchor
from skueue.dht.keys import POSITION_MAX

Peeked = tuple[QueueKey, RunGrant, int]
"""What a queue's peeks of a cycle got: the queue (never a stack), the head's position
(``first``, with ``available`` 1; 0: no element) with the first peek's rank, and why the
anchor refused them (``ops.REFUSALS``; 0: it did not)."""


def peek_heads(anchors: QueueAnchors, peeks: Peeks) -> tuple[Peeked, ...]:
    """Stage 2 for the cycle's peeks, after its runs and deletes (see the module doc).
    A name without a queue is empty and stays unmade; its peeks take ranks from the
    floor, as deletes of such a name do, so that a queue made later starts above them."""
    out: list[Peeked] = []
    for name, count in peeks:
        policy = anchors.queues.get(name)
        key = (name, False)
        if policy is None:
            out.append((key, RunGrant(anchors.floor + 1, 0, anchors.floor), 0))
            anchors.floor += count
            continue
        if not isinstance(policy, QueueAnchor | PriorityAnchor):
            out.append((key, RunGrant(1, 0, 0), REFUSED_OTHER_STRUCTURE))
            continue
        head = policy.head()
        out.append((key, RunGrant(head or 1, int(head is not None), policy.ord_next), 0))
        policy.ord_next += count
    return tuple(out)


def split_peeks(peeked: Sequence[Peeked], subs: Sequence[Batches]) -> list[tuple[Peeked, ...]]:
    """Each sub-batch's share: the same head for every peek of a queue, and the next
    ranks, one per peek, in the sub-batches' order."""
    if len(subs) == 1:
        return [tuple(peeked)]
    out: list[list[Peeked]] = [[] for _ in subs]
    tables = [dict(sub.peeks) for sub in subs]
    for key, g, why in peeked:
        ord_first = g.ord_first
        for j, table in enumerate(tables):
            count = table.get(key[0], 0)
            if count:
                out[j].append((key, replace(g, ord_first=ord_first), why))
                ord_first += count
    return [tuple(x) for x in out]


def peeked_problem(peeked: Sequence[Peeked], peeking: Sequence[str]) -> str | None:
    """What is wrong with the peeks' answers a parent sent for a batch that peeks at the
    queues ``peeking`` (sorted), or None."""
    if [key for key, _, _ in peeked] != [(name, False) for name in peeking]:
        return "answers for other queues than the batch peeks at"
    for (name, _), g, why in peeked:
        if why not in (0, REFUSED_OTHER_STRUCTURE) or g.available not in (0, 1):
            return f"{name!r}: {g.available} heads, refusal {why}"
        if not 0 <= g.ord_first <= RANK_MAX or not 1 <= g.first <= POSITION_MAX:
            return f"{name!r}: rank or position out of range"
        if (g.step, g.ticket, g.ticket_step, g.levels) != (1, 0, 0, ()):
            return f"{name!r}: a head is one position, without steps, tickets or levels"
    return None
