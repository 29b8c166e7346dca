"""What is wrong with a batch or a grant a peer sent (the checks of
:mod:`skueue.core.node.checks`, before anything changes): the bounds no correct peer
comes near, the shapes of queue and stack batches, and the level counts and segments of
queues with priority levels (:mod:`skueue.core.levels`)."""

from __future__ import annotations

import itertools

from skueue.core.batch import (
    COUNTER_MAX,
    RANK_MAX,
    RUN_OPS_MAX,
    Batch,
    Batches,
    RunGrant,
    is_insert_run,
)
from skueue.core.levels import LEVEL_POSITION_MAX, LevelCounts, fold, level_of
from skueue.core.ops import CONFIGURE_LEVELS, PRIORITIES_MAX, QueueSettings, settings_problem
from skueue.dht.keys import POSITION_MAX


def batch_problem(b: Batch, stack: bool) -> str | None:
    """What is wrong with a batch a peer sent, or None.  A queue batch needs a position
    for every operation; a stack batch has the form ``(0, pops, pushes)`` (Theorem 20)."""
    if len(b.counts) != len(b.slots):
        return "counts and slots differ in length"
    if any(not 0 <= c <= s <= RUN_OPS_MAX for c, s in zip(b.counts, b.slots, strict=True)):
        return "a run is negative, too long, or has more operations than ranks"
    if not stack and b.counts != b.slots:
        return "a queue run needs a position for every operation"
    if stack and (len(b.counts) > 3 or (b.slots and b.slots[0] != 0)):
        return "a stack batch is (0, pops, pushes)"
    if b.levels:
        return _levels_problem(b, stack)
    return None


def _levels_problem(b: Batch, stack: bool) -> str | None:
    if stack or len(b.levels) != len(b.counts):
        return "priority levels, but not one count vector per run of a queue"
    for i, (count, levels) in enumerate(zip(b.counts, b.levels, strict=True)):
        if not is_insert_run(i) and levels:
            return f"run {i}: a remove run has no levels"
        if is_insert_run(i) and (
            len(levels) > PRIORITIES_MAX or min(levels, default=0) < 0 or sum(levels) != count
        ):
            return f"run {i}: level counts {levels!r:.60} do not add up to {count}"
    return None


def batches_problem(b: Batches) -> str | None:
    """What is wrong with a cycle's batches a peer sent, or None."""
    if not all(0 <= x <= COUNTER_MAX for x in (b.joins, b.leaves, b.nodes)):
        return "a membership counter is out of range"
    if not 0 <= b.patient <= b.operations:
        return "more patient operations than operations"
    keys = [key for key, _ in b.sections]
    if any(x >= y for x, y in itertools.pairwise(keys)):
        return "the queues are not in order, or one comes twice"
    for (name, stack), batch in b.sections:
        problem = batch_problem(batch, stack) or (None if batch.operations else "no operation")
        if problem:
            return f"queue {name!r}: {problem}"
    names = [name for name, _ in b.deletes]
    if any(x >= y for x, y in itertools.pairwise(names)):
        return "the deleted queues are not in order, or one comes twice"
    if not all(1 <= n <= RUN_OPS_MAX for _, n in b.deletes):
        return "a queue's delete count is out of range"
    created = [key for key, _ in b.creates]
    if any(x >= y for x, y in itertools.pairwise(created)):
        return "the created queues are not in order, or one comes twice"
    if not all(1 <= n <= RUN_OPS_MAX for _, n in b.creates):
        return "a queue's create count is out of range"
    for (name, stack, limit, levels), _ in b.creates:
        if levels == CONFIGURE_LEVELS:  # a configure: a limit, for whatever the name holds
            problem = "a configure names no structure" if stack else None
            problem = problem or settings_problem(name, QueueSettings(max_deliveries=limit))
        else:
            problem = settings_problem(name, QueueSettings(stack, limit, levels))
        if problem:
            return f"creating {name!r}: {problem}"
    peeked = [name for name, _ in b.peeks]
    if any(x >= y for x, y in itertools.pairwise(peeked)):
        return "the queues peeked at are not in order, or one comes twice"
    if not all(1 <= n <= RUN_OPS_MAX for _, n in b.peeks):
        return "a queue's peek count is out of range"
    return None


def grant_problem(
    g: RunGrant, index: int, count: int, stack: bool, levels: LevelCounts = ()
) -> str | None:
    """What is wrong with the grant for run ``index`` of a batch whose run holds ``count``
    operations needing positions (``levels`` of them at each level, if not all at 0),
    or None."""
    inserts = is_insert_run(index)
    if g.levels:
        return _level_grant_problem(g, index, count, stack, levels)
    if not (0 <= g.ord_first <= RANK_MAX and 0 <= g.ticket <= RANK_MAX):
        return f"run {index}: rank or ticket out of range"
    if inserts and g.available != count or not 0 <= g.available <= count:
        return f"run {index}: {g.available} positions for {count} operations"
    shape = (g.step, g.ticket_step)
    want = (1, 0) if not stack else (1, 1) if inserts else (-1, 0)
    if shape != want or (not stack and g.ticket != 0):
        return f"run {index}: steps {shape} do not fit a {'stack' if stack else 'queue'}"
    if g.first < (0 if stack else 1):
        return f"run {index}: position {g.first}"
    if g.available and not (
        1 <= g.first <= POSITION_MAX and 1 <= g.position(g.available - 1) <= POSITION_MAX
    ):
        return f"run {index}: positions out of range"
    return None


def _level_grant_problem(
    g: RunGrant, index: int, count: int, stack: bool, levels: LevelCounts
) -> str | None:
    """A grant of a queue with priority levels: an insert run's first position per
    level, for as many inserts at each level as the batch holds; a remove run's segments,
    each at a more urgent level than the next."""
    if stack or g.step != 1 or g.ticket or g.ticket_step or not 0 <= g.ord_first <= RANK_MAX:
        return f"run {index}: a priority grant of a stack, or with steps or tickets"
    if not 1 <= len(g.levels) <= PRIORITIES_MAX:
        return f"run {index}: {len(g.levels)} priority levels"
    at = [level_of(first) for first, _ in g.levels]
    if any(not 1 <= first & LEVEL_POSITION_MAX <= LEVEL_POSITION_MAX - n for first, n in g.levels):
        return f"run {index}: positions out of range"
    counts = tuple(n for _, n in g.levels)
    if is_insert_run(index):
        if at != list(range(len(at))) or counts != fold(levels or (count,), len(counts)):
            return f"run {index}: level grants {counts} for level counts {levels or (count,)}"
        return None
    if any(x >= y for x, y in itertools.pairwise(at)) or max(at) >= PRIORITIES_MAX:
        return f"run {index}: segments out of level order"
    if min(counts) < 1 or sum(counts) != g.available or not 0 < g.available <= count:
        return f"run {index}: {g.available} positions in segments {counts} for {count} removes"
    return None
