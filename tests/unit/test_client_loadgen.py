"""The load generator and bench's report (issue 8, item 19): the final drain is part of
the checked history but not of the statistics, and its records say so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio

import skueue
from skueue.cli.bench_cmd import report
from skueue.cluster.loadgen import LoadConfig, percentiles, run_load


@pytest.fixture(scope="module")
def cluster() -> Iterator[skueue.LocalCluster]:
    with skueue.local_cluster(processes=1) as c:
        yield c


def test_the_drain_is_marked_and_kept_out_of_the_statistics(
    cluster: skueue.LocalCluster,
) -> None:
    # All enqueues, so the drain has many elements to remove in one batch.
    config = LoadConfig(tuple(cluster.addresses), clients=2, ops=60, insert_ratio=1.0)

    async def main() -> object:
        with trio.fail_after(60):
            return await run_load(config)

    result = trio.run(main)
    drain = [r for r in result.records if r.phase == "drain"]
    workload = [r for r in result.records if r.phase is None]
    assert len(workload) == 60 and {r.phase for r in result.records} == {None, "drain"}
    assert [r.value is not None for r in drain].count(True) == 60  # the drain took them all
    assert {r.process for r in drain} == {"c2"}

    expected = percentiles([(r.response - r.invoke) * 1000 for r in workload])
    latency = result.latency_ms()
    assert latency["all"] == expected
    assert set(latency) == {"all", "enqueue"}  # no dequeue statistics from the drain alone
    r = report(result, config)
    assert r["latency_ms"] == latency
    assert r["removed"] == 60 and r["linearizable"]  # the drain records are still checked
