"""``skueue bench --in-flight K --batch B`` as a user runs it (issue 10): real daemons
started by ``--spawn``, a linearizable verdict, and a history whose processes are the
in-flight lanes.  ``--spawn`` stops its daemons itself and fails if one is left."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from skueue.check.history import read_jsonl
from tests.e2e.test_cli import skueue


def test_bench_with_requests_in_flight_and_batches_is_linearizable(tmp_path: Path) -> None:
    history = tmp_path / "h.jsonl"
    out = skueue(
        "bench", "--spawn", "2", "--in-flight", "4", "--batch", "5", "--ops", "200",
        "--history", str(history), "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    r = json.loads(out.stdout)
    assert r["linearizable"] is True and r["verdict"].endswith(": ok"), r["verdict"]
    assert (r["clients"], r["in_flight"], r["batch"], r["ops"]) == (4, 4, 5, 200)
    # What the spawned daemons spent, beside the throughput (stderr: stdout is JSON).
    said = out.stderr.decode()
    cpu = re.search(r"daemons' CPU: ([0-9.]+) s, ([0-9]+) µs per operation", said)
    assert cpu is not None and float(cpu[1]) > 0 and int(cpu[2]) > 0, said[-500:]
    # 50 operations per client, 13/13/12/12 per lane, requests of 5 with the rest last.
    assert r["requests"] == 4 * (3 + 3 + 3 + 3)
    with history.open() as f:
        records = read_jsonl(f)
    workload = [rec for rec in records if rec.phase is None]
    assert len(workload) == 200
    assert {rec.process for rec in workload} == {f"c{c}.{k}" for c in range(4) for k in range(4)}


def test_bench_refuses_zero_in_flight_and_zero_batch() -> None:
    for option in ("--in-flight", "--batch"):
        out = skueue("bench", option, "0", "--nodes", "127.0.0.1:1")
        assert out.returncode == 2, out.stderr
        assert b"must be at least 1" in out.stderr


def test_message_cost_reads_the_daemons_metrics_around_a_bench() -> None:
    """``bench/message_cost.py`` (issue 10's diagnosis) on a small run: every figure it
    prints comes from the daemons' metrics or the bench, and its daemons are stopped."""
    script = Path(__file__).resolve().parents[2] / "bench" / "message_cost.py"
    out = subprocess.run(
        [sys.executable, str(script), "--daemons", "2", "--clients", "2", "--ops", "200"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert ": ok" in out.stdout, out.stdout
    figures = {line.split()[0]: float(line.split()[1]) for line in out.stdout.splitlines()[1:]}
    assert figures["peer_messages_per_op"] > 0 and figures["daemon_cpu_us_per_op"] > 0
    assert figures["ops_per_batch"] >= 1 and figures["ops_per_second"] > 0
