"""Creates, configures and deletes of named queues on their way back down the tree
(issue 12; configures and deletes of unknown names, issue 28).

A batch counts its creates per (name, settings) and its deletes per name
(:class:`~skueue.core.batch.Batches`); the anchor makes queues before the cycle's runs and
retires them after (:class:`~skueue.core.anchor.QueueAnchors`).  What it did comes down
with the grants, split over the sub-batches in their fixed order, like runs:

- a create key's outcome goes to every sub-batch that holds a create of it; the first
  learns what the anchor did, a later one finds the queue made (:func:`split_creations`);
  a configure travels as a create key (``batch.CreateKey``), and every sub-batch that
  holds it learns the same outcome;
- a deleted queue's range goes whole to the first sub-batch that deletes it; the later
  ones find it empty, and each delete gets its own rank (:func:`split_deletions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from skueue.core.batch import RANK_MAX, Batches, CreateKey, QueueKey, RunGrant
from skueue.core.ops import CONFIGURE_LEVELS, CREATE_FOUND, CREATE_MADE, CREATE_NO_QUEUE
from skueue.dht.keys import POSITION_MAX

Deletion = tuple[QueueKey, RunGrant, bool]
"""A deleted queue (its name, and whether it was a stack), what its deletes got: the
positions removed (``available`` of them; 0 for a queue that held nothing or did not
exist) and the first delete's rank, and whether a queue had the name (False: the deletes
are answered that none did, and changed nothing)."""
Creation = tuple[CreateKey, int, bool, int, int]
"""What the anchor did for a create key: the outcome (``ops.CREATE_*``), and the queue's
settings (stack, delivery limit, priority levels) as they are now."""



def deletion_problem(g: RunGrant, stack: bool, found: bool = True) -> str | None:
    """What is wrong with the range a delete removes (a grant of a queue's or a stack's
    remove run, of any length), or None."""
    if not (0 <= g.ord_first <= RANK_MAX and 0 <= g.ticket <= RANK_MAX):
        return "rank or ticket out of range"
    if not found and (stack or g.available):
        return "a name without a queue has nothing to remove"
    if g.available < 0 or g.ticket_step != 0 or g.step != (-1 if stack else 1):
        return f"steps {(g.step, g.ticket_step)} do not fit a {'stack' if stack else 'queue'}"
    if g.available and not (
        1 <= g.first <= POSITION_MAX and 1 <= g.position(g.available - 1) <= POSITION_MAX
    ):
        return "positions out of range"
    if not stack and g.ticket != 0:
        return "a queue has no tickets"
    return None


def split_deletions(
    deleted: Sequence[Deletion], subs: Sequence[Batches]
) -> list[tuple[Deletion, ...]]:
    """Each sub-batch's share of the deletions, in order: the first sub-batch that
    deletes a queue gets the whole range it held; the later ones find it empty.  Ranks
    are handed out one per delete operation, like a run's."""
    if len(subs) == 1:
        return [tuple(deleted)]
    out: list[list[Deletion]] = [[] for _ in subs]
    tables = [dict(sub.deletes) for sub in subs]
    for key, g, found in deleted:
        ord_first, whole = g.ord_first, g
        for j, table in enumerate(tables):
            count = table.get(key[0], 0)
            if count:
                out[j].append((key, replace(whole, ord_first=ord_first), found))
                whole = RunGrant(g.first, 0, 0, g.ticket, g.step)  # the later ones: empty
                ord_first += count
    return [tuple(x) for x in out]


def split_creations(
    created: Sequence[Creation], subs: Sequence[Batches]
) -> list[tuple[Creation, ...]]:
    """Each sub-batch's share of what the anchor did for the creates: the first
    sub-batch holding a create key learns it; a later one finds the queue made (with
    these settings, if the first made it)."""
    if len(subs) == 1:
        return [tuple(created)]
    out: list[list[Creation]] = [[] for _ in subs]
    tables = [dict(sub.creates) for sub in subs]
    for key, outcome, stack, limit, levels in created:
        for j, table in enumerate(tables):
            if key in table:
                out[j].append((key, outcome, stack, limit, levels))
                if outcome == CREATE_MADE:
                    outcome = CREATE_FOUND
    return [tuple(x) for x in out]


def creation_problem(creation: Creation) -> str | None:
    """What is wrong with what the anchor said of one create or configure key, or None:
    a configure has no queue to make, and a create always finds or makes one."""
    key, outcome, _, _, _ = creation
    configure = key[3] == CONFIGURE_LEVELS
    if configure and outcome not in (CREATE_FOUND, CREATE_NO_QUEUE):
        return f"outcome {outcome} for a configure"
    if not configure and outcome == CREATE_NO_QUEUE:
        return "no queue for a create"
    return None
