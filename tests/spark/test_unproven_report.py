"""``skueue analyze`` reports a failed certificate as unproven, not as a proof (issue 28,
item 20): the history has two dequeue results swapped, fails its certificate, is too
large for the exact search and matches no violation pattern, and is in truth
linearizable (``tests/unit/test_unproven.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from skueue.check.history import write_jsonl
from skueue.cli.skueue import main
from tests.unit.test_unproven import swapped_history

pytestmark = pytest.mark.spark


def test_the_verdict_table_says_unproven_and_what_would_decide_it(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "swapped.jsonl"
    with history.open("w") as f:
        write_jsonl(swapped_history(), f)
    out = tmp_path / "out"
    assert main(["analyze", str(history), "--out", str(out)]) == 1  # not shown consistent
    printed = capsys.readouterr().out
    assert "history: sc/certificate/queue: UNPROVEN: " in printed
    report = (out / "report.md").read_text()
    (row,) = [line for line in report.splitlines() if line.startswith("| history | 150 |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4:6] == ["unproven", "unproven"], row
    assert "(a proof)" not in row and "**no**" not in row
    assert "the exact search would decide it" in cells[6]
    verdicts = json.loads((out / "summary.json").read_text())["histories"][0]["verdicts"]
    assert verdicts["sc"]["ok"] is False and verdicts["sc"]["decided"] is False
