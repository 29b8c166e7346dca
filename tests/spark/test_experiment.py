"""``skueue experiment``: one Spark task per point gives the single-machine numbers."""

from __future__ import annotations

import csv
import itertools
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from skueue.analysis import experiment as ex
from skueue.analysis.experiment import run_points
from skueue.cli.skueue import main
from skueue.core.ops import Structure
from skueue.sim.sweep import ROW_FIELDS, Point, run, sizes


@pytest.mark.spark
def test_spark_rows_equal_run_point(spark: SparkSession) -> None:
    points = [
        Point(Structure.QUEUE, 4, 0.5, 0, rounds=20),
        Point(Structure.STACK, 8, 0.25, 1, rounds=20),
        Point(Structure.QUEUE, 4, 0.5, 2, per_node_probability=0.5, rounds=10),
    ]
    rows = run_points(spark, points)
    assert len(rows) == len(points)
    key = ("structure", "n", "ratio", "seed", "p")
    got = {tuple(r[k] for k in key): r for r in rows}
    for p in points:
        expected = run(p)
        mine = got[tuple(expected[k] for k in key)]
        for field in ROW_FIELDS:
            if field != "wall_seconds":
                assert mine[field] == expected[field], (p.describe(), field)


@pytest.mark.spark
def test_figure2_command_writes_table_csv_and_plot(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["experiment", "--figures", "2", "--max-n", "4", "--rounds", "15",
                 "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "Figure 2" in out and "| 4 |" in out and "Largest n run: 4" in out
    with (tmp_path / "figure2_queue.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(sizes(4)) * 5  # every size, every Enqueue ratio
    assert (tmp_path / "figure2_queue.png").stat().st_size > 1000
    assert spark.read.parquet(str(tmp_path / "rows")).count() == len(rows)


@pytest.mark.spark
def test_report_links_its_plot_and_csv(spark: SparkSession, tmp_path: Path) -> None:
    # No --figure4-n: Figure 4 follows --max-n (it stayed at n = 256 and ran for minutes).
    assert main(["experiment", "--figures", "2", "4", "--max-n", "4",
                 "--rounds", "10", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "(n = 4, insert ratio 0.5)" in report
    with (tmp_path / "figure4_rate.csv").open() as f:
        assert {row["n"] for row in csv.DictReader(f)} == {"4"}
    for stem in ("figure2_queue", "figure4_rate"):
        for target in (f"{stem}.png", f"{stem}.csv"):
            assert f"]({target})" in report, target  # a relative link, resolvable
            assert (tmp_path / target).exists()


class _Stage:
    def __init__(self, tasks: int, done: int) -> None:
        self.numTasks, self.numCompletedTasks = tasks, done


class _Tracker:
    """Spark's status tracker as a 40-task job goes by: running at 29, then finished (and
    no longer active) from the second poll on."""

    def __init__(self) -> None:
        self.calls = 0

    @property
    def running(self) -> bool:
        return self.calls <= 2

    def getActiveStageIds(self) -> list[int]:  # noqa: N802 (Spark's name)
        self.calls += 1
        return [7] if self.running else []

    def getStageInfo(self, sid: int) -> _Stage | None:  # noqa: N802
        self.calls += 1
        return _Stage(40, 29 if self.running else 40) if sid == 7 else None


class _Session:
    def __init__(self, tracker: _Tracker) -> None:
        self.sparkContext = self
        self._tracker = tracker

    def statusTracker(self) -> _Tracker:  # noqa: N802
        return self._tracker


def test_progress_never_goes_back_and_ends_at_the_total(monkeypatch: pytest.MonkeyPatch) -> None:
    """A finished stage leaves the active list: that must not read as 0 tasks done."""
    monkeypatch.setattr(ex, "PROGRESS_POLL_S", 0.01, raising=False)
    tracker = _Tracker()
    reports: list[tuple[int, int]] = []
    session: Any = _Session(tracker)
    watcher = ex._Progress(session, 40, lambda d, t: reports.append((d, t)))
    deadline = time.monotonic() + 20
    while tracker.calls < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reports, "progress was reported"
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(reports)), reports
    watcher.done()
    assert reports[-1] == (40, 40), reports
