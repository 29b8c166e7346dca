"""bench/cost_model.py (issue 10): the message counts it reports are consistent with
each other and with the load it drove, and its throughput projection moves the right way
with its CPU parameters.  Small clusters, a few cycles; no timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.bench_scripts import load_bench

bench = load_bench("cost_model")
output = load_bench("cost_model_output")


@pytest.fixture(scope="module", params=[4, 16])
def point(request: pytest.FixtureRequest) -> Any:
    return bench.measure(request.param, ops_per_process=2, cycles=3, warmup_cycles=1, seed=7)


def test_every_submitted_operation_completed(point: Any) -> None:
    p = point
    assert p.ops_submitted == p.n * p.ops_per_process * p.cycles
    assert p.ops_completed == p.ops_submitted
    assert p.rounds_per_cycle >= 1


def test_counts_are_consistent(point: Any) -> None:
    p = point
    assert p.messages_per_op > 0
    # Every frame has a 4-byte header and a kind name: far more than a byte a message.
    assert p.bytes_per_op > p.messages_per_op
    assert sum(k["messages"] for k in p.by_kind.values()) == p.messages
    assert sum(k["bytes"] for k in p.by_kind.values()) == p.bytes
    # Every message has one sender and one receiver among the processes.
    assert sum(p.per_process) == 2 * p.messages
    assert p.busiest_messages == max(p.per_process)
    assert sum(p.busiest_by_kind.values()) == p.busiest_messages
    assert p.least_messages <= p.busiest_messages
    assert p.process_msgs_per_op_average == pytest.approx(
        sum(p.per_process) / p.n / p.ops_completed
    )
    assert p.busiest_share >= p.average_share
    assert p.process_msgs_per_op_busiest >= p.process_msgs_per_op_average
    # The tree turns for every cycle: batches go up and grants come down.
    assert p.by_kind["BatchUp"]["messages"] > 0 and p.by_kind["Grants"]["messages"] > 0


def test_same_seed_same_counts() -> None:
    a = bench.measure(8, cycles=2, seed=3)
    b = bench.measure(8, cycles=2, seed=3)
    assert (a.messages, a.bytes, a.per_process, a.rounds) == (
        b.messages, b.bytes, b.per_process, b.rounds
    )  # fmt: skip


def test_projection_falls_as_messages_cost_more(point: Any) -> None:
    cheap = bench.project(point, 30.0, 40.0)
    dear = bench.project(point, 60.0, 40.0)
    assert dear.ops_per_second < cheap.ops_per_second
    assert dear.ops_per_second_ideal < cheap.ops_per_second_ideal
    # The busiest process bounds the cluster: never above the even spread.
    assert dear.ops_per_second <= dear.ops_per_second_ideal
    assert bench.project(point, 60.0, 80.0).ops_per_second < dear.ops_per_second


def test_outputs_are_written(tmp_path: Path, point: Any) -> None:
    projections = [bench.project(point, 60.0, 40.0)]
    paths = bench.write_outputs([point], projections, tmp_path / "cost_model", {"seed": 7})
    assert [p.suffix for p in paths] == [".csv", ".json", ".png"]
    assert all(p.stat().st_size > 0 for p in paths)
    document = json.loads(paths[1].read_text())
    (row,) = document["points"]
    assert row["n"] == point.n and row["messages"] == point.messages
    header = paths[0].read_text().splitlines()[0].split(",")
    assert tuple(header) == output.CSV_FIELDS


def test_quick_mode_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "| 16 |" in out and "Projection (a model, not a measurement)" in out
