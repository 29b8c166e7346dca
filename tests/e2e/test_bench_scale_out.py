"""``bench/scale_out.py`` (issue 30) as a user runs it, tiny: 1 and 2 real daemons, one
durable, Redis, two load processes, 1 s rows.  Every row is measured from /proc, every
Skueue history is merged from both load processes, drained and checked linearizable, and
the JSON and the plot are written where ``--out`` says."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import ROOT, environment
from tests.unit.bench_scripts import load_bench

SCRIPT = ROOT / "bench" / "scale_out.py"
RUN_TIMEOUT_S = 240
LOAD_PROCS, CLIENTS, IN_FLIGHT, BATCH_CLIENTS, BATCH = 2, 2, 2, 1, 20


def redis_or_why_not() -> str | None:
    """None where redis-server is there (installed through apt, as the benchmark does,
    where missing); else why it is not, for the skip."""
    if shutil.which("redis-server"):
        return None
    try:
        load_bench("bench_support").ensure_redis()
    except (SystemExit, subprocess.CalledProcessError, OSError) as e:
        return f"redis-server is not installed and could not be (apt-get: {e}); ran --no-redis"
    return None


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path, str | None]:
    out = tmp_path_factory.mktemp("scale_out") / "scale_out.json"
    no_redis = redis_or_why_not()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--nodes", "1,2", "--durable-nodes", "1",
         "--seconds", "1", "--load-procs", str(LOAD_PROCS), "--clients", str(CLIENTS),
         "--in-flight", str(IN_FLIGHT), "--batch-clients", str(BATCH_CLIENTS),
         "--batch", str(BATCH), "--data-root", str(out.parent), "--out", str(out),
         *(["--no-redis"] if no_redis else [])],
        capture_output=True, text=True, cwd=ROOT, env=environment(), timeout=RUN_TIMEOUT_S,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    return json.loads(out.read_text()), done.stdout, out, no_redis


def test_every_skueue_row_is_measured_and_its_merged_history_linearizable(run: Any) -> None:
    report, stdout, out, _ = run
    assert set(report) >= {"machine", "command", "layout", "options", "rows", "goals"}
    rows = {
        (r["nodes"], r["durable"], r["mode"]): r for r in report["rows"] if r["system"] == "skueue"
    }
    assert set(rows) == {
        (n, d, m) for n, d in ((1, False), (2, False), (1, True)) for m in ("one", "batch")
    }
    lanes = {"one": LOAD_PROCS * CLIENTS * IN_FLIGHT, "batch": LOAD_PROCS * BATCH_CLIENTS}
    for (_, _, mode), r in rows.items():
        assert r.get("error") is None, r
        assert r["load_procs"] == LOAD_PROCS and r["batch"] == (1 if mode == "one" else BATCH)
        assert r["ops"] > 0 and r["ops_per_second"] > 0 and r["seconds"] >= 1.0
        # CPU from /proc: the daemons' and the load processes' own, per operation.
        assert r["cpu_us_per_op"] > 0 and r["client_cpu_us_per_op"] > 0 and r["cores_busy"] > 0
        assert 0 < r["latency_ms"]["p50"] <= r["latency_ms"]["p99"]
        h = r["history"]
        assert (h["linearizable"], h["method"]) == (True, "certificate"), h["verdict"]
        # Every lane of both load processes, and the parent's drain, in one history.
        assert h["processes"] == lanes[mode] + 1
        assert h["records"] >= r["ops"]
    assert "| system | daemons | durable |" in stdout and "Issue 30's goals" in stdout
    linearizable = next(g for g in report["goals"] if g["goal"] == "every history linearizable")
    assert linearizable["met"] is True and linearizable["shown"] == "6 of 6 rows"
    if not report["layout"]["pinned"]:
        assert "UNPINNED" in report["layout"]["summary"] and "UNPINNED" in stdout
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_redis_rows_run_with_the_same_load_processes(run: Any) -> None:
    report, _, _, no_redis = run
    if no_redis:
        pytest.skip(no_redis)
    rows = {(r["durable"], r["mode"]): r for r in report["rows"] if r["system"] == "redis"}
    assert set(rows) == {(d, m) for d in (False, True) for m in ("one", "batch")}
    for r in rows.values():
        assert r.get("error") is None and r["load_procs"] == LOAD_PROCS
        assert r["ops_per_second"] > 0 and r["cpu_us_per_op"] > 0 and r["client_cpu_us_per_op"] > 0
    goals = {g["goal"]: g for g in report["goals"]}
    client = goals["Skueue's client CPU/op ≤ redis-py's, one at a time (2 daemons)"]
    assert client["met"] is not None and client["figure"] > 0
