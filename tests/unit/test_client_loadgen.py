"""The load generator and bench's report (issue 8, item 19): the final drain is part of
the checked history but not of the statistics, and its records say so.  Issue 10: with
requests in flight each lane is a process of the history, a batch is one request of many
records in list order, and either way the history is certified linearizable."""

from __future__ import annotations

import io
from collections.abc import Iterator

import attrs
import pytest
import trio

import skueue
from skueue.check.checker import check
from skueue.check.history import Record
from skueue.cli.bench_cmd import print_report, report
from skueue.cluster.loadgen import (
    LoadConfig,
    LoadResult,
    percentiles,
    request_sizes,
    run_load,
    shares,
)


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


# -- issue 10: requests in flight and batches -------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("in_flight", 0, "in_flight >= 1 is needed"),
        ("in_flight", -3, "in_flight >= 1 is needed"),
        ("batch", 0, "batch >= 1 is needed"),
        ("batch", -1, "batch >= 1 is needed"),
    ],
)
def test_in_flight_and_batch_must_be_positive(field: str, value: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LoadConfig(("127.0.0.1:1",), **{field: value})  # type: ignore[arg-type]


def test_in_flight_and_batch_default_to_one_request_of_one_op() -> None:
    config = LoadConfig(("127.0.0.1:1",))
    assert (config.in_flight, config.batch) == (1, 1)


def test_requests_are_cut_into_batches_with_the_rest_last() -> None:
    assert request_sizes(23, 10) == [10, 10, 3]
    assert request_sizes(20, 10) == [10, 10]
    assert request_sizes(0, 10) == []
    assert shares(10, 4) == [3, 3, 2, 2]


@pytest.fixture(scope="module")
def two_processes() -> Iterator[skueue.LocalCluster]:
    """Two processes, so that a client's requests cross to the other process's nodes."""
    with skueue.local_cluster(processes=2) as c:
        yield c


def run(config: LoadConfig) -> LoadResult:
    async def main() -> LoadResult:
        with trio.fail_after(60):
            return await run_load(config)

    return trio.run(main)


def workload_of(result: LoadResult) -> list[Record]:
    return [r for r in result.records if r.phase is None]


def assert_certified(result: LoadResult) -> None:
    """Linearizable by the anchor's certificate (a patterns "ok" would prove nothing)."""
    verdict = check(result.records, model="linearizable", drained=True)
    assert verdict.ok and verdict.method == "certificate", verdict.describe()


def test_in_flight_lanes_are_processes_of_their_own(two_processes: skueue.LocalCluster) -> None:
    config = LoadConfig(tuple(two_processes.addresses), clients=2, ops=83, in_flight=4)
    result = run(config)
    workload = workload_of(result)
    assert len(workload) == 83 and len(result.requests) == 83
    lanes = {f"c{c}.{k}" for c in range(2) for k in range(4)}
    assert {r.process for r in workload} == lanes
    for lane in lanes:  # every lane is sequential: its seqs count up, its requests never overlap
        mine = sorted((r for r in workload if r.process == lane), key=lambda r: r.seq)
        assert [r.seq for r in mine] == list(range(len(mine)))
        assert all(a.response <= b.invoke for a, b in zip(mine, mine[1:], strict=False))
    assert_certified(result)


def test_a_batch_is_one_request_of_many_records(two_processes: skueue.LocalCluster) -> None:
    config = LoadConfig(tuple(two_processes.addresses), clients=2, ops=95, batch=10)
    result = run(config)
    workload = workload_of(result)
    assert len(workload) == 95
    by_request: dict[tuple[str, float], list[Record]] = {}
    for r in workload:
        by_request.setdefault((r.process, r.invoke), []).append(r)
    # 48 and 47 operations per client: 4 full requests and one of 8 or 7.
    assert sorted(len(rs) for rs in by_request.values()) == [7, 8] + [10] * 8
    assert len(result.requests) == len(by_request)
    for rs in by_request.values():  # one kind, one response, consecutive seqs
        assert len({(r.op, r.response) for r in rs}) == 1
        assert [r.seq for r in rs] == list(range(rs[0].seq, rs[0].seq + len(rs)))
    # Latency is per request, not per record.
    expected = percentiles([(rs[0].response - rs[0].invoke) * 1000 for rs in by_request.values()])
    assert result.latency_ms()["all"] == expected
    assert_certified(result)


def test_the_check_holds_a_batch_to_its_list_order(two_processes: skueue.LocalCluster) -> None:
    """The records of one insert batch keep the list order, and the certificate checks
    it: swapping the values of two records in a batch breaks the verdict."""
    config = LoadConfig(
        tuple(two_processes.addresses), clients=1, ops=30, batch=10, insert_ratio=1.0
    )
    result = run(config)
    assert_certified(result)
    records = list(result.records)
    first, second = records[0], records[1]
    assert (first.process, first.invoke) == (second.process, second.invoke)  # one batch
    records[0] = attrs.evolve(first, value=second.value)
    records[1] = attrs.evolve(second, value=first.value)
    assert not check(records, model="linearizable", drained=True).ok


def test_bench_report_names_in_flight_and_batch(two_processes: skueue.LocalCluster) -> None:
    config = LoadConfig(tuple(two_processes.addresses), clients=2, ops=40, in_flight=2, batch=5)
    r = report(run(config), config)
    assert (r["in_flight"], r["batch"], r["linearizable"]) == (2, 5, True)
    assert r["requests"] == 8  # 20 per client, 10 per lane, 2 requests of 5 per lane
    out = io.StringIO()
    print_report(r, out)
    assert "2 request(s) in flight per client, up to 5 operation(s) per request" in out.getvalue()
