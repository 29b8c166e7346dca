"""Paper Theorem 17: rounds an update phase takes for k joins (or leaves) into n processes.

    .venv/bin/python bench/update_phase.py [--n 16 64 256 1024] [--seeds 2]

For every n: one join, one leave, n/4 joins and n/4 leaves, all requested at once; the
synchronous simulator times the phase (first update grants to the last "update over")
and the wait before it (the joins and leaves travel up in batches until the anchor's
trigger fires).  Prints a Markdown table and the fitted rounds per doubling of n.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skueue.sim.results import slope  # noqa: E402
from skueue.sim.update_rounds import measure_update_phase  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[16, 64, 256, 1024])
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    cases = [("1 join", 1, 0), ("1 leave", 0, 1), ("n/4 joins", -1, 0), ("n/4 leaves", 0, -1)]
    print("| n | case | rounds to the phase | phase rounds | phase / tree height |")
    print("|---|---|---|---|---|")
    curves: dict[str, list[tuple[float, float]]] = {}
    for n in args.n:
        for name, joins, leaves in cases:
            j = n // 4 if joins < 0 else joins
            k = n // 4 if leaves < 0 else leaves
            runs = [measure_update_phase(n, j, k, seed) for seed in range(args.seeds)]
            phase = statistics.fmean(r.phase_rounds for r in runs)
            wait = statistics.fmean(r.rounds_to_phase for r in runs)
            height = statistics.fmean(r.tree_height_after for r in runs)
            curves.setdefault(name, []).append((math.log2(n), phase))
            print(f"| {n} | {name} | {wait:.0f} | {phase:.0f} | {phase / height:.1f} |",
                  flush=True)
    print()
    for name, points in curves.items():
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        print(f"{name}: {slope(xs, ys):.1f} more phase rounds per doubling of n")


if __name__ == "__main__":
    main()
