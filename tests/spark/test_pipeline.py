"""``skueue analyze`` end to end, through the real command line, in one run (``--per-file``)
over a simulator history, the same history with two dequeue results swapped, and a daemon
log with a malformed line: verdicts, exit code, report, plots and Parquet tables; plus the
one-line errors for a missing or empty path, which never start Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from pyspark.sql import SparkSession

from skueue.check.history import Record, write_jsonl
from skueue.cli.skueue import main
from skueue.sim.rounds import SyncConfig, SyncSim

LOG = [
    {"process": "p0", "members": 4, "structure": "queue", "event": "ready", "level": "info",
     "timestamp": "2026-01-01T00:00:00Z"},
    {"event": "batch up", "process": "p0", "node": "left", "batch_ops": 3, "level": "debug",
     "timestamp": "2026-01-01T00:00:01Z"},
    {"event": "batch up", "process": "p0", "node": "middle", "batch_ops": 9, "level": "debug",
     "timestamp": "2026-01-01T00:00:02Z"},
]


def swap_two_dequeues(records: list[Record]) -> list[Record]:
    hits = [i for i, r in enumerate(records) if r.op == "dequeue" and r.value is not None]
    i, j = hits[0], hits[1]
    out = list(records)
    out[i] = attrs.evolve(records[i], value=records[j].value)
    out[j] = attrs.evolve(records[j], value=records[i].value)
    return out


@attrs.frozen
class Run:
    out: Path
    code: int
    stdout: str
    records: int
    summary: dict[str, Any]

    def history(self, stem: str) -> dict[str, Any]:
        (h,) = [h for h in self.summary["histories"] if Path(h["name"]).stem == stem]
        return h


@pytest.fixture(scope="module")
def analysed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Run:
    src = tmp_path_factory.mktemp("in")
    records = SyncSim(SyncConfig(processes=4, rounds=20, rate=4, seed=3)).run().records
    with (src / "sim.jsonl").open("w") as f:
        write_jsonl(records, f)
        f.write('{"process": "p0", "seq": "oops"}\n')  # malformed: counted, not fatal
    with (src / "swapped.jsonl").open("w") as f:
        write_jsonl(swap_two_dequeues(records), f)
    with (src / "p0.log").open("w") as f:
        f.writelines(json.dumps(e) + "\n" for e in LOG)
    out = tmp_path_factory.mktemp("out")
    capture = pytest.MonkeyPatch()
    printed: list[str] = []
    capture.setattr("builtins.print", lambda *a, **k: printed.append(" ".join(map(str, a)))
                    if k.get("file") is None else None)
    try:
        code = main(["analyze", str(src), "--per-file", "--out", str(out),
                     "--members", "p0,p1,p2,p3"])
    finally:
        capture.undo()
    summary = json.loads((out / "summary.json").read_text())
    return Run(out, code, "\n".join(printed), len(records), summary)


@pytest.mark.spark
def test_swapped_dequeues_get_a_violation_and_exit_1(analysed: Run) -> None:
    assert analysed.code == 1
    swapped = analysed.history("swapped")
    for model in ("linearizable", "sc"):
        # Small enough for the exact search, which decides, as check() would.
        assert swapped["verdicts"][model]["ok"] is False
        assert swapped["verdicts"][model]["method"] == "exact"
    found = {(f["family"], f["check"]) for f in swapped["findings"]}
    assert ("certificate", "replay") in found, "the distributed certificate caught it too"
    assert "swapped.jsonl: linearizable/" in analysed.stdout and "VIOLATION" in analysed.stdout


@pytest.mark.spark
def test_analyze_writes_report_plots_and_tables(spark: SparkSession, analysed: Run) -> None:
    out, n = analysed.out, analysed.records
    assert analysed.history("sim")["verdicts"]["linearizable"] == {
        "ok": True, "decided": True, "method": "certificate", "reason": None}
    assert analysed.summary["records"] == 2 * n
    assert analysed.summary["malformed_lines"] == 1
    report = (out / "report.md").read_text()
    for text in ("## Consistency verdicts", "missing field 'op'", "Latency", "Corollary 19",
                 "Batch sizes", "| info | ready | 1 |"):
        assert text in report, text
    for png in ("throughput-sim", "latency-swapped", "storage-sim", "events", "batches"):
        assert (out / f"{png}.png").stat().st_size > 1000, png
    lines = spark.read.parquet(str(out / "lines"))
    assert lines.where("kind = 'record'").count() == 2 * n
    assert lines.where("kind = 'malformed'").count() == 1
    latency = spark.read.parquet(str(out / "latency")).where("kind = 'all'").collect()
    assert sorted(r["count"] for r in latency) == [n, n]
    storage = spark.read.parquet(str(out / "storage")).collect()
    assert sorted({r["process"] for r in storage}) == ["p0", "p1", "p2", "p3"]
    batches = {r["node"]: r for r in spark.read.parquet(str(out / "batch_sizes")).collect()}
    assert (batches["all"]["count"], batches["all"]["max"]) == (2, 9)


@pytest.mark.parametrize("kind", ["missing", "empty", "bad-master"])
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path = tmp_path / "h.jsonl"
    args = ["analyze", str(path), "--out", str(tmp_path / "o")]
    if kind == "empty":
        path.write_text("")
    if kind == "bad-master":
        path.write_text("{}\n")
        args += ["--master", "mesos-ish://x"]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("skueue analyze: error: "), err
