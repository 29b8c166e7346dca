"""bench/recovery_time.py, tiny: it fills a durable cluster, kills a daemon, times its
restart from a snapshot and its log, and drains every element back exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_recovery_benchmark_runs_and_checks_its_drain(tmp_path: Path) -> None:
    out = tmp_path / "recovery.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "recovery_time.py"), "--elements", "3000",
         "--batch", "100", "--snapshot-bytes", "65536", "--out", str(out)],
        capture_output=True, text=True, timeout=240, check=False, cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["drained"] == 3000 and result["exactly_once"] is True
    assert result["snapshot_restored"] is True and result["recovery_s"] > 0
