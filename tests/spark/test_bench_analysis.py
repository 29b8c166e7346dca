"""``skueue analyze`` on a bench-like run (issue 8, item 20): a final drain marked
``phase: drain`` is checked but kept out of throughput and latency; quiet time is zero
throughput, not interpolated; the daemons' ``batch up`` debug events, and nothing else
that mentions batches, fill the batch sizes.

The history is written by hand so that every number is known: client c0 enqueues ten
elements in the first two seconds, client c1 removes five of them from second 6 to 7
(nothing completes from 2 to 6 s), and the drain client c2 removes the other five plus
one empty answer in one ``dequeue_many`` at 9.5 s, as ``skueue bench`` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from pyspark.sql import SparkSession

from skueue.cli.skueue import main

pytestmark = pytest.mark.spark


def bench_history() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    order = 0

    def add(process: str, seq: int, op: str, value: str | None, invoke: float,
            response: float, position: int | None, **extra: Any) -> None:
        nonlocal order
        out.append({"process": process, "seq": seq, "op": op, "value": value,
                    "invoke": invoke, "response": response, "position": position,
                    "ord": order, **extra})
        order += 1

    for i in range(10):
        add("c0", i, "enqueue", f"x{i}", 0.2 * i, 0.2 * i + 0.1, i + 1)
    for i in range(5):
        add("c1", i, "dequeue", f"x{i}", 6.0 + 0.2 * i, 6.0 + 0.2 * i + 0.05, i + 1)
    for i in range(5, 10):
        add("c2", i - 5, "dequeue", f"x{i}", 9.0, 9.5, i + 1, phase="drain")
    add("c2", 5, "dequeue", None, 9.0, 9.5, None, phase="drain")
    return out


def ts(seconds: float) -> str:
    return f"2026-01-01T00:00:{seconds:06.3f}Z"


BATCHES = [("left", 0, 0.0), ("left", 3, 0.5), ("middle", 5, 1.0), ("right", 3, 1.5),
           ("left", 0, 4.0), ("left", 2, 4.5)]
LOG = [
    {"event": "ready", "process": "p0", "members": 1, "structure": "queue", "level": "info",
     "timestamp": ts(0), "batch_ops_max": 1000},
    *[{"event": "batch up", "process": "p0", "node": node, "batch_ops": ops, "number": i,
       "batch_number": 77 + i, "level": "debug", "timestamp": ts(t)}
      for i, (node, ops, t) in enumerate(BATCHES)],
    # Mentions batches, holds no batch size: must not count.
    {"event": "limits", "batch_bytes_max": 65536, "level": "info", "timestamp": ts(4.5)},
    {"event": "batch timer", "batch_age_ms": 250, "level": "debug", "timestamp": ts(4.6)},
]


@attrs.frozen
class Run:
    code: int
    out: Path
    summary: dict[str, Any]

    def table(self, spark: SparkSession, name: str) -> list[dict[str, Any]]:
        return [r.asDict() for r in spark.read.parquet(str(self.out / name)).collect()]


@pytest.fixture(scope="module")
def analysed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Run:
    src = tmp_path_factory.mktemp("bench-in")
    (src / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bench_history()))
    (src / "p0.log").write_text("".join(json.dumps(e) + "\n" for e in LOG))
    out = tmp_path_factory.mktemp("bench-out")
    code = main(["analyze", str(src), "--drained", "--out", str(out), "--members", "p0"])
    return Run(code, out, json.loads((out / "summary.json").read_text()))


def test_drain_is_checked(analysed: Run) -> None:
    assert analysed.code == 0
    (history,) = analysed.summary["histories"]
    assert history["records"] == 21, "the checks see the drain too"
    assert history["verdicts"]["linearizable"]["ok"] is True


def test_drain_stays_out_of_latency(spark: SparkSession, analysed: Run) -> None:
    latency = {r["kind"]: r for r in analysed.table(spark, "latency")}
    assert latency["all"]["count"] == 15
    assert latency["dequeue"]["count"] == 5
    assert latency["dequeue"]["max"] == pytest.approx(0.05)
    assert "dequeue (empty)" not in latency, "the drain's empty answer is no workload"


def test_throughput_has_every_bin_and_zeros_in_the_quiet_time(
    spark: SparkSession, analysed: Run
) -> None:
    rows = analysed.table(spark, "throughput")
    width = rows[0]["width"]
    for kind in ("enqueue", "dequeue"):
        bins = sorted((r["bin"], r["count"]) for r in rows if r["kind"] == kind)
        assert [b for b, _ in bins] == list(range(len(bins))), "every bin of the span"
        assert sum(c for _, c in bins) == (10 if kind == "enqueue" else 5)
    quiet = [r for r in rows if r["start"] >= 2.2 and r["start"] + width <= 5.9]
    assert quiet and all(r["count"] == 0 for r in quiet)
    assert max(r["start"] for r in rows) < 7.0, "no bin for the drain at 9.5 s"
    report = (analysed.out / "report.md").read_text()
    assert "The 6 records of the final drain" in report
    assert "at 10 completions per second" in report, "peak of the workload, not the drain"


def test_batch_sizes_come_from_batch_up_events_only(
    spark: SparkSession, analysed: Run
) -> None:
    summary = {r["node"]: r for r in analysed.table(spark, "batch_sizes")}
    assert summary["all"]["count"] == len(BATCHES)
    assert summary["all"]["max"] == 5
    assert summary["all"]["empty"] == 2
    assert (summary["left"]["count"], summary["middle"]["count"], summary["right"]["count"]
            ) == (4, 1, 1)
    assert (analysed.out / "batches.png").stat().st_size > 1000
    report = (analysed.out / "report.md").read_text()
    assert "65536" not in report and "| 1,000 |" not in report


def test_throughput_in_rounds_with_bins_wider_than_one(spark: SparkSession) -> None:
    from skueue.analysis import stats

    records = spark.createDataFrame(
        [(0, "p0", "enqueue", f"v{t}", float(t), float(t + 1)) for t in range(0, 300, 3)],
        "hid int, process string, op string, value string, invoke double, response double",
    )
    summaries = stats.history_summaries(records)
    rows = stats.throughput(records, summaries).collect()
    assert {r["width"] for r in rows} == {5.0}  # whole rounds, about 100 bins
    assert sum(r["count"] for r in rows) == 100
    assert sorted(r["bin"] for r in rows) == list(range(len(rows)))
    # The span ends at round 298, 4 rounds (295..298) into the last bin: 2 completions.
    last = max(rows, key=lambda r: r["bin"])
    assert (last["count"], last["covered"], last["rate"]) == (2, 4.0, 0.5)


def test_the_last_bin_is_rated_over_the_part_the_span_covers(spark: SparkSession) -> None:
    from skueue.analysis import stats

    # Two completions a second from 0 to 247.75 s: bins of 5 s, and the last one, from
    # 245 s, covers 2.75 s of the run (6 completions: a rate of 2.2, not 6 / 5 = 1.2).
    records = spark.createDataFrame(
        [(0, "c0", "enqueue", f"v{k}", 0.5 * k, 0.25 + 0.5 * k) for k in range(496)],
        "hid int, process string, op string, value string, invoke double, response double",
    )
    rows = sorted(stats.throughput(records, stats.history_summaries(records)).collect(),
                  key=lambda r: r["bin"])
    assert {r["width"] for r in rows} == {5.0} and len(rows) == 50
    assert all(r["covered"] == 5.0 and r["rate"] == 2.0 for r in rows[:-1])
    last = rows[-1]
    assert (last["count"], last["covered"]) == (6, pytest.approx(2.75))
    assert last["rate"] == pytest.approx(6 / 2.75)


def test_a_client_history_without_members_gets_no_storage_per_client(
    spark: SparkSession, tmp_path: Path
) -> None:
    # A bench history names clients (c0, c1, c2), which own no DHT entries: hashing
    # positions onto a ring of them drew bars under a title about DHT fairness.
    (tmp_path / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bench_history()))
    out = tmp_path / "out"
    assert main(["analyze", str(tmp_path / "bench.jsonl"), "--drained", "--out", str(out)]) == 0
    assert not (out / "storage.png").exists()
    assert spark.read.parquet(str(out / "storage")).count() == 0
    report = (out / "report.md").read_text()
    assert "this history's processes are clients" in report
    assert "--members ID,..." in report
