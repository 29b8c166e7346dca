"""The anchor's counters of a queue with priority levels (issue 14; the levels are
explained in :mod:`skueue.core.levels`): ``first`` and ``last`` per level, and one rank
counter for the whole queue, so that every operation still gets one unique ``ord``."""

from __future__ import annotations

from dataclasses import dataclass

from skueue.core.batch import Batch, RunGrant, is_insert_run
from skueue.core.levels import encode, fold


@dataclass(slots=True)
class PriorityAnchor:
    """Level ``l`` holds positions ``firsts[l] .. lasts[l]`` (empty: first = last + 1)."""

    firsts: list[int]
    lasts: list[int]
    ord_next: int = 0

    @classmethod
    def empty(cls, levels: int, floor: int) -> PriorityAnchor:
        """A new queue of ``levels`` levels, above ``floor`` (see QueueAnchors)."""
        return cls([floor + 1] * levels, [floor] * levels, floor)

    @property
    def levels(self) -> int:
        return len(self.firsts)

    def assign(self, batch: Batch) -> tuple[RunGrant, ...]:
        grants = []
        for i, (count, slots) in enumerate(zip(batch.counts, batch.slots, strict=True)):
            if is_insert_run(i):
                counts = fold(batch.levels[i] if batch.levels else (count,), self.levels)
                levels = tuple((encode(lv, self.lasts[lv] + 1), n) for lv, n in enumerate(counts))
                for lv, n in enumerate(counts):
                    self.lasts[lv] += n
                grants.append(RunGrant(levels[0][0], count, self.ord_next, levels=levels))
            else:
                grants.append(self._take(count))
            self.ord_next += slots
        return tuple(grants)

    def _take(self, count: int) -> RunGrant:
        """A remove run's grant: the most urgent ``count`` elements, level by level."""
        segments: list[tuple[int, int]] = []
        want = count
        for lv in range(self.levels):
            if not want:
                break
            k = min(want, self.lasts[lv] - self.firsts[lv] + 1)
            if k:
                segments.append((encode(lv, self.firsts[lv]), k))
                self.firsts[lv] += k
                want -= k
        first = segments[0][0] if segments else encode(0, self.firsts[0])
        return RunGrant(first, count - want, self.ord_next, levels=tuple(segments))

    def head(self) -> int | None:
        """The position the next dequeue would take (the oldest element of the most
        urgent level that holds any), or None when empty (a peek's)."""
        for lv, (first, last) in enumerate(zip(self.firsts, self.lasts, strict=True)):
            if first <= last:
                return encode(lv, first)
        return None

    def size(self) -> int:
        return sum(last - first + 1 for first, last in zip(self.firsts, self.lasts, strict=True))

    def export(self) -> tuple[int, ...]:
        """``(ord_next, first_0, last_0, first_1, last_1, ...)``: 1 + 2 * levels long."""
        pairs = zip(self.firsts, self.lasts, strict=True)
        return (self.ord_next, *(x for pair in pairs for x in pair))

    def describe(self) -> str:
        levels = " ".join(f"{f}..{la}" for f, la in zip(self.firsts, self.lasts, strict=True))
        return f"priority[{levels}] ord={self.ord_next}"

    def retire(self, count: int) -> tuple[RunGrant, int]:
        removed = self._take(self.size())
        return removed, max(max(self.lasts), self.ord_next + count)


def import_priority_anchor(state: tuple[int, ...]) -> PriorityAnchor:
    ord_next, *pairs = state
    return PriorityAnchor(list(pairs[0::2]), list(pairs[1::2]), ord_next)
