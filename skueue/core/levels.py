"""Priority levels (issue 14, Skeap-style): how a queue with ``P`` levels keeps FIFO order
within each level inside the batches, the grants and the DHT.

Theory of operation
-------------------
A queue made with ``P`` priority levels (0 the most urgent) keeps ``first`` and ``last``
per level at the anchor.  Nothing else about the protocol changes:

- **Batches.** An insert run says how many of its inserts are at each level
  (:attr:`~skueue.core.batch.Batch.levels`, one count vector per run; empty while every
  insert is at level 0, so a queue without priorities carries nothing more).  Remove runs
  are as before: a count.
- **Grants.** An insert run's grant gives, per level, the first position of the run's
  inserts at that level; a remove run's grant lists the *segments* it takes, most urgent
  level first (:attr:`~skueue.core.batch.RunGrant.levels`: ``(first, count)`` pairs).
  Splitting a grant over sub-batches is the same walk as for one level: a sub-batch takes
  its count at each level from that level's positions (inserts), or its next ``count``
  positions along the segments (removes).
- **Positions.** Each level counts positions from 1 on its own; the DHT sees position
  ``p`` of level ``l`` as ``l << LEVEL_SHIFT | p``, so keys hash (name, level, position)
  and no two levels ever share an entry.  A lease's element goes back at its own level,
  read off its position.

Within one remove run the anchor hands out the most urgent elements first, spilling into
the next level when one runs out; that is ``deleteMin`` repeated in the run's order, so a
dequeue never returns a less urgent element while a more urgent one was present at its
linearization point.  A priority above the queue's last level counts as the last level
(as RabbitMQ treats priorities above ``x-max-priority``); a queue without priorities
ignores them.
"""

from __future__ import annotations

LEVEL_SHIFT = 59
"""Positions of a level stay below ``2**59``; the level sits above them."""
LEVEL_POSITION_MAX = (1 << LEVEL_SHIFT) - 1

LevelCounts = tuple[int, ...]
"""An insert run's count per level (index = level); trailing zeros may be left out."""
Segments = tuple[tuple[int, int], ...]
"""Positions as ``(first, count)`` pairs, each ``count`` consecutive positions."""


def encode(level: int, position: int) -> int:
    """Level ``level``'s position ``position`` as the DHT sees it."""
    return level << LEVEL_SHIFT | position


def level_of(position: int) -> int:
    return position >> LEVEL_SHIFT


def clamp(priority: int, levels: int) -> int:
    """The level an insert of ``priority`` goes to in a queue of ``levels`` levels."""
    return min(priority, levels - 1)


def fold(counts: LevelCounts, levels: int) -> LevelCounts:
    """``counts`` in a queue of ``levels`` levels: those above its last level count
    at its last level.  Always ``levels`` long."""
    out = [0] * levels
    for priority, n in enumerate(counts):
        out[clamp(priority, levels)] += n
    return tuple(out)


def add(a: LevelCounts, b: LevelCounts) -> LevelCounts:
    if len(a) < len(b):
        a, b = b, a
    return tuple(x + (b[i] if i < len(b) else 0) for i, x in enumerate(a))


def combine_runs(
    a: tuple[LevelCounts, ...],
    a_counts: tuple[int, ...],
    b: tuple[LevelCounts, ...],
    b_counts: tuple[int, ...],
) -> tuple[LevelCounts, ...]:
    """Two batches' per-run level counts added run by run (a batch without them has
    all its inserts at level 0; remove runs have none)."""
    if not a and not b:
        return ()
    runs = max(len(a_counts), len(b_counts))
    return tuple(add(_run(a, a_counts, i), _run(b, b_counts, i)) for i in range(runs))


def _run(levels: tuple[LevelCounts, ...], counts: tuple[int, ...], i: int) -> LevelCounts:
    """Run ``i``'s count per level (none past the batch's runs, or for a remove run)."""
    if i >= len(counts) or i % 2:
        return ()
    return levels[i] if levels else (counts[i],)


def take(segments: Segments, n: int) -> tuple[Segments, Segments]:
    """The first ``n`` positions of ``segments``, and the rest."""
    taken: list[tuple[int, int]] = []
    rest = list(segments)
    while n and rest:
        first, count = rest[0]
        k = min(n, count)
        taken.append((first, k))
        rest[0] = (first + k, count - k)
        if k == count:
            rest.pop(0)
        n -= k
    return tuple(taken), tuple(rest)


def nth(segments: Segments, i: int) -> int:
    """The ``i``-th position along ``segments``."""
    for first, count in segments:
        if i < count:
            return first + i
        i -= count
    raise IndexError(i)
