"""``skueue experiment``: one Spark task per point gives the single-machine numbers."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cli.skueue import main
from skueue.analysis.experiment import run_points
from skueue.ops import Structure
from skueue.sim.experiment import ROW_FIELDS, Point, run, sizes

pytestmark = pytest.mark.spark


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
