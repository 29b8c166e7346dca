"""Storage per process is where the DHT really put the entries (Lemma 4, Corollary 19)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from skueue.analysis.stats import storage
from skueue.core.dht_runs import opened
from skueue.core.messages.stages import Put
from skueue.sim.rounds import SyncConfig, SyncSim


def carries_a_put(message: object) -> bool:
    return any(isinstance(m, Put) for m in opened(message))  # bundles and runs opened


@pytest.mark.spark
@pytest.mark.parametrize("priorities", [1, 4])
def test_storage_matches_the_simulated_dht(spark: SparkSession, priorities: int) -> None:
    """Enqueue-only: at the end every entry is still held where consistent hashing put it.
    With levels, the requests go to a named queue whose positions carry their level: the
    key hashes the queue's name and that position, as the DHT does."""
    sim = SyncSim(SyncConfig(processes=12, rounds=60, rate=5, insert_ratio=1.0, seed=4,
                             priorities=priorities))  # fmt: skip
    result = sim.run()
    for _ in range(1000):  # enqueues complete as their Put leaves: let the Puts land
        if not any(carries_a_put(s.message) for s in sim.inbox):
            break
        sim.step(generate=False)
    held = {p.process_id: p.entries() for p in sim.order}
    rows = [(0, r.process, r.seq, r.op, r.value, float(r.invoke), float(r.response), r.position,
             r.ord, r.queue) for r in result.records if r.op != "create"]
    df = spark.createDataFrame(rows, "hid int, process string, seq long, op string, "
                               "value string, invoke double, response double, position long, "
                               "ord long, queue string")
    got = {r["process"]: (r["stored"], r["held"]) for r in storage(df, {0: sim.ids}).collect()}
    assert got == {p: (n, n) for p, n in held.items()}
    assert sum(held.values()) == len(rows)
    if priorities > 1:
        assert {r.queue for r in result.records} == {"pq"}
