"""``bench/priority_compare.py --smoke`` as a user runs it (issue 14): real daemons (and a
real RabbitMQ where Debian's rabbitmq-server is installed), both priority settings on one
cluster, every history checked, Skueue's PEI 0 at ``ord`` and from real time alone.  The
script stops every process it starts and fails if it cannot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import ROOT, environment
from tests.unit.bench_scripts import load_bench

SCRIPT = ROOT / "bench" / "priority_compare.py"
RABBITMQ = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")


def smoke(tmp_path: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / "priority_compare.json"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json", str(out), *extra],
        capture_output=True, cwd=ROOT, env=environment(), timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    assert b"| system | P | ops/s" in run.stdout
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def test_smoke_compares_eight_levels_with_one_on_the_same_cluster(tmp_path: Path) -> None:
    report = smoke(tmp_path)
    rows = {(r["system"], r["levels"]): r for r in report["results"]}
    assert set(rows) == {("skueue", 8), ("skueue", 1)}
    for row in rows.values():
        assert (row["lost"], row["duplicated"], row["linearizable"]) == (0, 0, True)
        assert row["ops_per_second"] > 0 and row["latency_ms"]["dequeue"]["p50"] > 0
        assert row["pei_by_order"]["max"] == 0 and row["pei_by_order"]["count"] == 80
        assert row["pei_observed"]["max"] == 0
        assert row["verdicts"] == ["linearizable/certificate/queue: ok"]
    assert report["workload"]["elements"] == 80 and report["failures"] == []


def rabbitmq_or_why_not() -> str | None:
    """None where RabbitMQ is there, installed through apt where missing (as the benchmark
    does); else why it could not be, for the skip."""
    try:
        load_bench("bench_support").ensure_package(
            "rabbitmq-server", "rabbitmq-server", str(RABBITMQ))
    except (SystemExit, subprocess.SubprocessError, OSError) as e:
        return f"rabbitmq-server is not installed and could not be (apt-get: {e})"
    return None


def test_smoke_measures_rabbitmq_the_same_way(tmp_path: Path) -> None:
    why_not = rabbitmq_or_why_not()
    if why_not is not None:
        pytest.skip(why_not)
    report = smoke(tmp_path, "--systems", "skueue,rabbitmq")
    (rabbit,) = [r for r in report["results"] if r["system"] == "rabbitmq"]
    assert (rabbit["levels"], rabbit["lost"], rabbit["duplicated"]) == (8, 0, 0)
    assert rabbit["pei_by_order"] is None  # no ord: the observed lower bound alone
    assert rabbit["pei_observed"]["count"] == 80
    assert report["servers"]["rabbitmq"].startswith("RabbitMQ")
