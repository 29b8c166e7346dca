"""How long a join and a leave take on an idle durable cluster, with and without replicas
(issue 31; docs/replication.md §11, "Leaves with replicas").

For each ``--replicas`` value it starts ``--daemons`` durable daemons (4 by default),
then ``--rounds`` times: starts one more daemon with ``--join`` and times it from the
start to its ready line; waits a moment; runs ``skueue leave`` on it and times it from
the command to the daemon's exit (the command returns once the daemon has left).

    .venv/bin/python bench/membership_time.py --replicas 1 3 --rounds 2

Bounded: every wait has a timeout; every process it starts is stopped.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_support import free_port  # noqa: E402

from skueue.cluster.launch import LaunchedCluster  # noqa: E402

BIN = Path(sys.executable).parent
READY_TIMEOUT_S = 60.0
LEAVE_TIMEOUT_S = 60.0
SETTLE_S = 2.0  # between a join and its leave, and after the cluster starts


def ready_within(proc: subprocess.Popen[str], timeout_s: float) -> None:
    """Wait for the daemon's ready line on its stdout (it prints nothing before)."""
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("skueued ready: "):
            return
        if not line and proc.poll() is not None:
            raise SystemExit(f"the joiner exited with {proc.returncode} before it was ready")
    raise SystemExit(f"the joiner was not ready within {timeout_s:g} s")


def one_round(seed: str, data: Path) -> tuple[float, float]:
    """(seconds to join, seconds to leave) of one new daemon joining through ``seed``."""
    address = f"127.0.0.1:{free_port()}"
    began = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN / "skueued"), "--listen", address, "--join", seed, "--data-dir", str(data),
         "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        ready_within(proc, READY_TIMEOUT_S)
        joined = time.perf_counter() - began
        time.sleep(SETTLE_S)
        began = time.perf_counter()
        subprocess.run([str(BIN / "skueue"), "leave", "--node", address], check=True,
                       capture_output=True, timeout=LEAVE_TIMEOUT_S)  # fmt: skip
        proc.wait(timeout=LEAVE_TIMEOUT_S)
        return joined, time.perf_counter() - began
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--daemons", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print("| --replicas | join (s) | leave (s) |")
    print("|---|---|---|")
    for k in args.replicas:
        with tempfile.TemporaryDirectory() as tmp, LaunchedCluster(
            args.daemons, data_dir=Path(tmp) / "cluster", replicas=k, log_level="warning"
        ) as cluster:
            time.sleep(SETTLE_S)
            rounds = [one_round(cluster.addresses[i % args.daemons], Path(tmp) / f"j{i}")
                      for i in range(args.rounds)]  # fmt: skip
            time.sleep(SETTLE_S)
        joins = ", ".join(f"{j:.2f}" for j, _ in rounds)
        leaves = ", ".join(f"{s:.2f}" for _, s in rounds)
        print(f"| {k} | {joins} | {leaves} |", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # (the cluster and the joiner are stopped on the way out)
        sys.exit(130)
