"""Per-queue statistics of one daemon (issue 12, item 7; seed 003's statistics).

For every named queue its clients used: how many elements they inserted and removed, how
many removes found it empty, and the insert and remove rates as rolling averages over 1,
5 and 15 minutes.  The rates are exponentially weighted moving averages of the per-second
rate, sampled every ``RATE_SAMPLE_S`` like the Unix load average: a burst shows at once in
the 1-minute figure and fades from the 15-minute one last.

Every member counts what its own clients did, so the cluster's figures are the sums over
the members (:func:`merge`); a member that leaves hands its counts to one heir with its
other counters (the rates are not handed over: they describe the clients that were
connected to it, who are gone).  The queue's depth comes from the anchor, not from here.

Pure and clock-free: the owner loop passes ``now`` to :meth:`QueueStats.sample`.  The
host holds one, so a snapshot keeps it and the replay recounts what came after.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

RATE_WINDOWS_S = (60.0, 300.0, 900.0)
"""The rolling averages' time constants: 1, 5 and 15 minutes."""
RATE_SAMPLE_S = 5.0
"""How often the rates take a sample (the load average's interval)."""
LEASE_COUNT_NAMES = ("leased", "acked", "nacked", "expired", "dead_lettered")
COUNT_NAMES = ("inserted", "removed", "empty", "deleted", *LEASE_COUNT_NAMES)


@dataclass(slots=True)
class QueueCounts:
    inserted: int = 0
    removed: int = 0
    empty: int = 0  # removes that found the queue empty
    deleted: int = 0  # elements removed by deleting the queue
    # Leases (skueue/core/leases.py): elements handed out with one, acked, returned by a
    # nack, returned by their deadline, and sent to the dead letters (``removed`` counts
    # the leased removes too; ``inserted`` counts no return: a return is not a client's).
    leased: int = 0
    acked: int = 0
    nacked: int = 0
    expired: int = 0
    dead_lettered: int = 0
    insert_rate: list[float] = field(default_factory=lambda: [0.0] * len(RATE_WINDOWS_S))
    remove_rate: list[float] = field(default_factory=lambda: [0.0] * len(RATE_WINDOWS_S))
    # The counts at the last sample: a sample's rate is what came since.
    sampled_inserted: int = 0
    sampled_removed: int = 0


@dataclass(slots=True)
class QueueStats:
    queues: dict[str, QueueCounts] = field(default_factory=dict)
    last_sample: float | None = None

    def count(
        self, queue: str, inserted: int = 0, removed: int = 0, empty: int = 0, deleted: int = 0
    ) -> None:
        c = self.queues.get(queue)
        if c is None:
            c = self.queues[queue] = QueueCounts()
        c.inserted += inserted
        c.removed += removed
        c.empty += empty
        c.deleted += deleted

    def count_lease(self, queue: str, event: str) -> None:
        """One lease event (a ``LEASE_COUNT_NAMES`` name) on ``queue``."""
        c = self.queues.get(queue)
        if c is None:
            c = self.queues[queue] = QueueCounts()
        setattr(c, event, getattr(c, event) + 1)

    def sample(self, now: float) -> None:
        """Fold what came since the last sample into the rates, every RATE_SAMPLE_S."""
        if self.last_sample is None or now < self.last_sample:
            self.last_sample = now  # a new time base: what came before has no interval
            for c in self.queues.values():
                c.sampled_inserted, c.sampled_removed = c.inserted, c.removed
            return
        elapsed = now - self.last_sample
        if elapsed < RATE_SAMPLE_S:
            return
        self.last_sample = now
        keep = [math.exp(-elapsed / window) for window in RATE_WINDOWS_S]
        for c in self.queues.values():
            _fold(c.insert_rate, (c.inserted - c.sampled_inserted) / elapsed, keep)
            _fold(c.remove_rate, (c.removed - c.sampled_removed) / elapsed, keep)
            c.sampled_inserted, c.sampled_removed = c.inserted, c.removed

    def inherit(self, counts: Mapping[str, Mapping[str, int]]) -> None:
        """Add a departed member's counts (see the module's docstring for the rates)."""
        for queue, c in counts.items():
            self.count(queue)
            mine = self.queues[queue]
            for name in COUNT_NAMES:
                setattr(mine, name, getattr(mine, name) + c.get(name, 0))
            mine.sampled_inserted += c.get("inserted", 0)  # not a burst of this member's
            mine.sampled_removed += c.get("removed", 0)

    def counts(self) -> dict[str, dict[str, int]]:
        """The counts alone, by queue (what a leaving member hands over)."""
        return {q: {n: getattr(c, n) for n in COUNT_NAMES} for q, c in self.queues.items()}

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {
            queue: {
                **{n: getattr(c, n) for n in COUNT_NAMES},
                "insert_rate": [round(r, 3) for r in c.insert_rate],
                "remove_rate": [round(r, 3) for r in c.remove_rate],
            }
            for queue, c in sorted(self.queues.items())
        }


def _fold(rates: list[float], rate: float, keep: list[float]) -> None:
    for i, k in enumerate(keep):
        rates[i] = rates[i] * k + rate * (1.0 - k)


def nothing() -> dict[str, Any]:
    """A queue's figures before anyone counted anything."""
    zeros = [0.0] * len(RATE_WINDOWS_S)
    return {**dict.fromkeys(COUNT_NAMES, 0), "insert_rate": zeros, "remove_rate": list(zeros)}


def merge(members: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The cluster's per-queue figures: the members' ``as_dict()``s added up."""
    out: dict[str, dict[str, Any]] = {}
    for member in members:
        for queue, q in member.items():
            total = out.setdefault(queue, nothing())
            for name in COUNT_NAMES:
                total[name] += q.get(name, 0)
            for name in ("insert_rate", "remove_rate"):
                rates = q.get(name)
                if isinstance(rates, list) and len(rates) == len(RATE_WINDOWS_S):
                    total[name] = [round(a + b, 3) for a, b in zip(total[name], rates, strict=True)]
    return out
