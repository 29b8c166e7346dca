"""Rounds per request in the synchronous model (paper §V Theorem 15, Corollary 16;
§VII's setup: 10 requests per round to random processes, then drain)."""

from __future__ import annotations

import math
import random
import statistics

from skueue.core.ops import OpKind
from skueue.sim.rounds import SyncConfig, SyncSim


def _mean_rounds(processes: int) -> float:
    result = SyncSim(SyncConfig(processes=processes, rounds=200, rate=10, seed=15)).run()
    assert len(result.records) == 2000
    return statistics.fmean(r.response - r.invoke for r in result.records)


def test_theorem15_rounds_per_request_grow_logarithmically() -> None:
    """The mean number of rounds per request grows by a bounded, positive amount per
    doubling of n, from n = 16 to 256 to 1024, and stays below c log2 n.

    The paper's curves are about 1.5 x tree height + DHT routing; the tree gains about
    6-7 levels per doubling (SPEC §3) and routing about 3 hops per bit (SPEC §2), so
    about 13 rounds per doubling are expected and 25 is a generous cap.  Linear growth
    would add hundreds of rounds between 256 and 1024.

    Reference: §V, Theorem 15
    """
    sizes = (16, 256, 1024)
    means = {n: _mean_rounds(n) for n in sizes}
    for small, large in zip(sizes, sizes[1:], strict=False):
        per_doubling = (means[large] - means[small]) / math.log2(large / small)
        assert 0 < per_doubling <= 25, (small, large, means)
    for n in sizes:
        assert means[n] <= 16 * math.log2(n), means


def _bulk(count: int, seed: int = 16) -> int:
    """Submit ``count`` requests to one process at once; the rounds until all completed."""
    sim = SyncSim(SyncConfig(processes=64, rounds=0, seed=seed))
    rng = random.Random(seed)
    process = sim.order[5]
    for i in range(count):
        # Enqueues first, so that the Dequeues find elements and really go to the DHT;
        # then a random mix ending with a Dequeue (many runs in one buffer).
        enqueue = i < count // 2 or (i < count - 1 and rng.random() < 0.5)
        sim.submit(process, OpKind.ENQUEUE if enqueue else OpKind.DEQUEUE, sim.inbox)
    sim.drain()
    assert len(sim.recorder.records) == count
    assert any(r.op == "dequeue" and r.value is not None for r in sim.recorder.records)
    return int(max(r.response - r.invoke for r in sim.recorder.records))


def test_corollary16_a_full_buffer_is_flushed_in_logarithmic_rounds() -> None:
    """However many requests a process has buffered, they are all processed in
    O(log n) rounds: 2,000 requests at one process take at most 1.5 times as long as a
    single Enqueue-Dequeue pair (one at a time they would take 1,000 times as long).

    Reference: §V, Corollary 16
    """
    single = _bulk(2)
    assert single <= 16 * math.log2(64)
    assert _bulk(2000) <= 1.5 * single
