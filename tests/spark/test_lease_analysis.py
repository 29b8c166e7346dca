"""``skueue analyze`` on lease events (issue 12, item 8): a file of consumers' lease events
next to a history; the report counts the events and the acks, tells how often elements
were delivered and how long leases lasted, and names the element acked twice (exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from skueue.check.leases import LeaseEvent, write_events
from skueue.cli.skueue import main


def lease(c: str, v: str, n: int, t: float, d: int = 1) -> LeaseEvent:
    return LeaseEvent(c, "lease", t, t + 0.01, v, n, d, 30.0)


def ack(c: str, v: str, n: int, t: float, ok: bool | None = True) -> LeaseEvent:
    return LeaseEvent(c, "ack", t, t + 0.01, v, n, ok=ok)


EVENTS = [
    lease("c0", "a", 1, 0.0),
    ack("c0", "a", 1, 0.11),
    lease("c0", "b", 2, 0.2),
    LeaseEvent("c0", "close", 0.3, 0.3),  # killed holding b
    lease("c1", "b", 7, 0.5, d=2),
    ack("c1", "b", 7, 0.53),
    lease("c1", "c", 8, 0.6),
    ack("c1", "c", 8, 0.63, ok=None),  # died before the answer
    lease("c2", "d", 3, 0.7),
    ack("c2", "d", 3, 0.72),
    ack("c2", "d", 9, 0.9),  # a second ack that took: acked twice
]


@pytest.mark.spark
def test_analyze_summarises_lease_events_and_finds_a_double_ack(
    spark: SparkSession, tmp_path: Path
) -> None:
    src = tmp_path / "in"
    src.mkdir()
    with (src / "consumers.jsonl").open("w") as f:
        write_events(EVENTS, f)
    out = tmp_path / "out"
    code = main(["analyze", str(src), "--out", str(out)])
    summary = json.loads((out / "summary.json").read_text())
    leases = summary["leases"]
    assert leases["events"] == {"lease": 5, "ack": 5, "nack": 0, "close": 1}
    assert leases["acks"] == {"acked": 4, "late": 0, "unanswered": 1}
    assert leases["elements_by_deliveries"] == [
        {"deliveries": 1, "elements": 3},
        {"deliveries": 2, "elements": 1},
    ]
    # a, b (its second lease), c and d ended by an ack; b's first by its consumer's close
    assert leases["latency_ms"]["n"] == 4 and 10 <= leases["latency_ms"]["p50"] <= 120
    assert leases["problem_count"] == 1 and leases["problems"] == ["d was acked 2 times"]
    assert summary["ok"] is False and code == 1
    report = (out / "report.md").read_text()
    assert "## Leases" in report and "**1 lease problem(s)**" in report
    assert "- d was acked 2 times" in report
