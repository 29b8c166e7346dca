"""``skueue analyze`` at scale: a 10-million-operation history on this machine.

    .venv/bin/python bench/analyze_scale.py --ops 10000000 --work /tmp/skueue-scale

1. Generates a legal queue history with ``ord`` (see :func:`generate`), written in chunks.
2. Runs ``skueue analyze`` on it in a child process, sampling the resident memory of the
   whole process tree (the Python driver, the Spark JVM, Spark's Python workers) every
   0.2 s; reports the wall time, each step's time (from ``summary.json``), the peak of the
   tree's total RSS and each process's own peak (``VmHWM``).

The generator: operation ``t`` (0-based) is linearised at time ``t``; its process is
drawn at random from ``--processes``; inserts happen with probability ``--ratio``; a
plain deque decides each dequeue's result (or empty), so the history is a queue history
by construction.  Its interval is ``[t - a, t + b]`` with ``a, b`` uniform in
``0..--overlap``: every interval contains its linearisation point, so ``ord = t`` is a
valid linearisation (``a.response < b.invoke`` implies ``t_a < t_b``) and operations
overlap in real time, as concurrent clients' do.  Positions count the inserts from 1.
The generator is seeded, so the same arguments give the same file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

CHUNK_LINES = 100_000


def generate(path: Path, ops: int, processes: int, ratio: float, overlap: int, seed: int) -> None:
    rng = random.Random(seed)
    names = [f"p{i}" for i in range(processes)]
    seqs = [0] * processes
    contents: deque[tuple[str, int]] = deque()
    inserted = 0
    lines: list[str] = []
    with path.open("w", encoding="utf-8") as f:
        for t in range(ops):
            i = rng.randrange(processes)
            p, seq = names[i], seqs[i]
            seqs[i] += 1
            inv, resp = t - rng.randint(0, overlap), t + rng.randint(0, overlap)
            head = f'{{"process": "{p}", "seq": {seq}, '
            if rng.random() < ratio:
                inserted += 1
                value = f"{p}-{seq}"
                contents.append((value, inserted))
                lines.append(f'{head}"op": "enqueue", "value": "{value}", "invoke": {inv}, '
                             f'"response": {resp}, "position": {inserted}, "ord": {t}}}\n')
            elif contents:
                value, pos = contents.popleft()
                lines.append(f'{head}"op": "dequeue", "value": "{value}", "invoke": {inv}, '
                             f'"response": {resp}, "position": {pos}, "ord": {t}}}\n')
            else:
                lines.append(f'{head}"op": "dequeue", "value": null, "invoke": {inv}, '
                             f'"response": {resp}, "ord": {t}}}\n')
            if len(lines) >= CHUNK_LINES:
                f.writelines(lines)
                lines.clear()
        f.writelines(lines)


# -- memory of a process tree ------------------------------------------------------------


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _tree(pid: int) -> list[int]:
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen


def _status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def _kib(value: str | None) -> int:
    return int(value.split()[0]) if value else 0


def _cmd(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    parts = raw.decode(errors="replace").split("\0")
    if parts and parts[0].endswith("java"):
        return "JVM (Spark driver and executors)"
    if any("pyspark" in x and "daemon" in x for x in parts) or "pyspark.daemon" in parts:
        return "Spark Python worker"
    return " ".join(parts[:3])[:60]


class Sampler:
    """Peak total RSS of a process tree, and each member's own peak (VmHWM)."""

    def __init__(self, pid: int, every_s: float = 0.2) -> None:
        self.pid = pid
        self.every_s = every_s
        self.peak_total_kib = 0
        self.peaks: dict[int, tuple[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            total = 0
            for p in _tree(self.pid):
                st = _status(p)
                total += _kib(st.get("VmRSS"))
                hwm = _kib(st.get("VmHWM"))
                # Named afresh each time: spark-submit's shell script becomes the JVM (exec).
                self.peaks[p] = (_cmd(p), max(hwm, self.peaks.get(p, ("", 0))[1]))
            self.peak_total_kib = max(self.peak_total_kib, total)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=10_000_000)
    parser.add_argument("--processes", type=int, default=64)
    parser.add_argument("--ratio", type=float, default=0.5, help="enqueue ratio (default 0.5)")
    parser.add_argument("--overlap", type=int, default=3,
                        help="interval half-width bound, in ops (default 3)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=Path("/tmp/skueue-scale"))
    parser.add_argument("--driver-memory", default="6g",
                        help="spark.driver.memory: the local JVM's heap (default 6g)")
    parser.add_argument("--keep", action="store_true", help="keep an existing history file")
    args = parser.parse_args()
    if importlib.util.find_spec("pyspark") is None:
        # Found out before generating gigabytes, not after.
        print("analyze_scale: error: needs the spark extra: pip install 'skueue[spark]' "
              "(pyspark not installed)", file=sys.stderr)
        return 1
    args.work.mkdir(parents=True, exist_ok=True)
    history = args.work / f"history-{args.ops}.jsonl"
    if not (args.keep and history.exists()):
        started = time.perf_counter()
        generate(history, args.ops, args.processes, args.ratio, args.overlap, args.seed)
        print(f"generated {args.ops} operations ({history.stat().st_size / 1e9:.2f} GB) in "
              f"{time.perf_counter() - started:.0f} s: {history}", flush=True)
    out = args.work / "analysis"
    # A summary left by an earlier run must not pass for this run's.
    (out / "summary.json").unlink(missing_ok=True)
    skueue = Path(sys.executable).with_name("skueue")
    cmd = [str(skueue), "analyze", str(history), "--out", str(out),
           "--conf", f"spark.driver.memory={args.driver_memory}"]
    print("running:", " ".join(cmd), flush=True)
    started = time.perf_counter()
    child = subprocess.Popen(cmd, env=os.environ | {"PYSPARK_PYTHON": sys.executable})
    sampler = Sampler(child.pid)
    code = child.wait()
    sampler.stop()
    wall = time.perf_counter() - started
    done = code in (0, 1) and (out / "summary.json").exists()
    summary = json.loads((out / "summary.json").read_text()) if done else {}
    print(f"\nexit {code}; wall time {wall:.0f} s for {args.ops} operations "
          f"({args.ops / wall:,.0f} ops/s)")
    for step, s in summary.get("seconds", {}).items():
        print(f"  {step}: {s:.0f} s")
    print(f"peak RSS of the whole tree: {sampler.peak_total_kib / 2**20:.2f} GiB")
    for pid, (name, hwm) in sorted(sampler.peaks.items(), key=lambda kv: -kv[1][1])[:6]:
        print(f"  pid {pid} {name}: peak {hwm / 2**20:.2f} GiB")
    for h in summary.get("histories", []):
        print(f"verdict: {h['verdicts']['linearizable']}")
    return code


if __name__ == "__main__":
    sys.exit(main())
