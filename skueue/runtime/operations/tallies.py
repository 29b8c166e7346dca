"""What the daemon counts for its metrics, as plain ints, on the hot path.

Counting must not slow an operation down: the owner task adds to plain ints and lists
here (a dict update, a ``bisect``), and nothing else.  Prometheus metric families are
built from these only when someone scrapes (:mod:`skueue.runtime.operations.metrics`), so a daemon
without ``--metrics`` pays a few increments per request and per batch.

Requests are timed from the step their request is handled in to the step their reply is
handed to the client's session (the owner's view: the time in the client's socket
buffers is not in it).  Batches are counted when a tick sends them; a node's *cycle* is
the time from a batch with operations to the node's next batch, empty or not.  A node
sends its next batch only once the grants of the last one came back, so that is the
batch's round trip through the tree plus the wait for the next tick; idle gaps (from an
empty batch on) are not cycles.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from typing import Final

LATENCY_BUCKETS_S: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
FSYNC_BUCKETS_S: Final = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
)  # fmt: skip
BATCH_OPERATIONS_BUCKETS: Final = tuple(float(1 << i) for i in range(0, 15, 2))  # 1 .. 16384


class Histogram:
    """Observations counted per bucket (upper bounds, the last one +Inf implied)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, count)`` buckets as Prometheus wants them, ``+Inf`` last."""
        out, total = [], 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), total))
        return out


class Tallies:
    """The owner's counts for the metrics (one per daemon)."""

    def __init__(self) -> None:
        # Requests: when each outstanding one came, and its kind, by client and rid.
        self.started: dict[int, dict[int | None, tuple[float, str]]] = {}
        self.requests: Counter[tuple[str, str]] = Counter()  # (request, outcome)
        self.request_seconds: dict[str, Histogram] = {}
        # Batches, per virtual node: operations per batch, and the cycle between batches.
        self.batch_operations: dict[str, Histogram] = {}
        self.batch_cycle_seconds: dict[str, Histogram] = {}
        self.last_batch: dict[str, float] = {}  # when a node's last batch went, if it was busy
        # Failover (runtime/stand_in.py): the other members' processes this daemon began
        # to serve, and the stand-ins that stopped since (handed back, or deposed).
        self.took_over = 0
        self.stand_ins_ended = 0

    def request(self, client: int, rid: int, kind: str, now: float) -> None:
        mine = self.started.get(client)
        if mine is None:
            mine = self.started[client] = {}
        mine[rid] = (now, kind)

    def replied(self, client: int, rid: int | None, outcome: str, now: float) -> None:
        mine = self.started.get(client)
        began = None if mine is None else mine.pop(rid, None)
        if began is None:
            return  # a reply to no timed request (a connection's last error)
        at, kind = began
        self.requests[(kind, outcome)] += 1
        histogram = self.request_seconds.get(kind)
        if histogram is None:
            histogram = self.request_seconds[kind] = Histogram(LATENCY_BUCKETS_S)
        histogram.observe(now - at)

    def client_gone(self, client: int) -> None:
        """Its requests will get no reply: forget when they came."""
        self.started.pop(client, None)

    def batch(self, node: str, operations: int, now: float) -> None:
        """A tick sent a batch from ``node`` (an empty one ends a cycle, nothing more)."""
        before = self.last_batch.pop(node, None)
        if before is not None:
            self.batch_cycle_seconds[node].observe(now - before)
        if not operations:
            return
        histogram = self.batch_operations.get(node)
        if histogram is None:
            histogram = self.batch_operations[node] = Histogram(BATCH_OPERATIONS_BUCKETS)
            self.batch_cycle_seconds[node] = Histogram(LATENCY_BUCKETS_S)
        histogram.observe(operations)
        self.last_batch[node] = now
