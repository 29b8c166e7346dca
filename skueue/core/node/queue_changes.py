"""Creates, configures and deletes at a node (issue 12): what a create or a configure is
told, and the Drops that clear a deleted queue's entries.

A delete is done once the anchor retired its queue: nothing can reach the removed
positions any more.  Their entries are cleared by one Drop each, sent by the node that
served the delete to the key's owner; a Drop waits for its Put where that is still on its
way, as a Get would, so nothing is left behind.

A stack's Drops wait for this node's next grants.  A Drop takes the entry with the
largest ticket up to its own, like a Pop, so it could take the entry that a Pop of the
same cycle wants, when the entry a Push of that cycle put at the same position has not
landed yet.  The next grants come only after every node finished its stack operations of
this cycle (paper §VI), so then no Pop can race a Drop.  (A process that leaves in an
update phase started by these very grants leaves such a stack's entries behind:
unreachable, since positions are never reused, but stored.)
"""

from __future__ import annotations

from skueue.core.creates_deletes import Creation, Deletion
from skueue.core.effects import Complete
from skueue.core.messages.stages import Drop
from skueue.core.ops import (
    CREATE_FOUND_OTHER,
    CREATE_FULL,
    CREATE_MADE,
    CREATE_NO_QUEUE,
    REFUSED_TOO_MANY_QUEUES,
    Op,
    QueueSettings,
    no_queue_text,
    refusal_text,
)
from skueue.core.parts.store import Clearing, Store
from skueue.overlay.labels import NodeRef


def created(op: Op, creation: Creation) -> Complete:
    """What a create is told: made, found, or found with other settings (an error); what
    a configure is told: the queue's settings now, or that no queue has the name."""
    _, outcome, stack, limit, levels = creation
    if outcome == CREATE_FULL:
        why = refusal_text(REFUSED_TOO_MANY_QUEUES, op.queue, op.kind)
        return Complete(op.op_id, None, -1, error=why)
    if outcome == CREATE_NO_QUEUE:
        return Complete(op.op_id, None, -1, error=no_queue_text(op.queue, op.kind))
    now = QueueSettings(stack, limit, levels)
    if outcome == CREATE_FOUND_OTHER:
        why = f"{op.queue!r} exists already, as {now.describe()}"
        return Complete(op.op_id, None, -1, error=why)
    return Complete(op.op_id, None, -1, created=outcome == CREATE_MADE, settings=now)


def delete(
    store: Store, me: NodeRef, op: Op, rank: int, deleted: Deletion
) -> tuple[Complete, list[Drop]]:
    """A delete's answer, and the Drops to send now (a stack's wait: see above).  A
    delete of a name that held no queue is answered that none did, with its rank."""
    queue, removes, found = deleted
    if not found:
        error = no_queue_text(op.queue, op.kind)
        return Complete(op.op_id, None, rank, removed=0, error=error), []
    done = Complete(op.op_id, None, rank, removed=removes.available)
    if not removes.available:
        return done, []
    clearing = Clearing(queue[0], removes, removes.available, op.op_id, queue[1])
    if queue[1]:
        store.deferred_drops.append(clearing)
        return done, []
    return done, _drops(store, me, clearing)


def deferred_drops(store: Store, me: NodeRef) -> list[Drop]:
    """The Drops of the stacks deleted in this node's previous cycle (its grants came)."""
    deferred, store.deferred_drops = store.deferred_drops, []
    return [drop for clearing in deferred for drop in _drops(store, me, clearing)]


def _drops(store: Store, me: NodeRef, clearing: Clearing) -> list[Drop]:
    store.dropping[clearing.op_id] = clearing
    removes, queue = clearing.removes, (clearing.queue, clearing.stack)
    return [
        Drop(None, removes.position(i), removes.ticket, me, clearing.op_id, queue)
        for i in range(removes.available)
    ]
