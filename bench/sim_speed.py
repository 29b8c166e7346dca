"""How large an ``n`` the synchronous-rounds simulator handles in the paper's setup.

    .venv/bin/python bench/sim_speed.py

Runs the paper's setup (queue, Enqueue ratio 0.5, 10 requests a round for 1000 rounds,
then drain) at ``n = 1024`` and doubling, until the time budget (default 600 s in all)
is spent, and prints a Markdown table of n, wall seconds and peak RSS.  The answer is the
largest ``n`` whose run finished within the per-run limit (default 10 minutes).

Each size runs in its own fresh (spawned) process: peak RSS is a per-process high-water
mark, so sharing one process would report the largest run's memory for every later row,
and a fresh process also lets us stop a run that overshoots the budget.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
from collections.abc import Sequence

from skueue.core.ops import Structure
from skueue.sim.sweep import number, run_point

# Doubling n roughly doubles the run time (request count is fixed; paths grow ~log n), so
# a size is only started when about this multiple of the last run still fits the budget.
GROWTH_GUESS = 2.3


def measure(structure: str, n: int, ratio: float, seed: int) -> tuple[float, int, float]:
    """In the child: one run; (wall seconds, peak RSS in KiB, mean rounds)."""
    row = run_point(Structure(structure), n, ratio, seed)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return number(row, "wall_seconds"), int(peak_kib), number(row, "mean_rounds")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start-n", type=int, default=1024, help="first n (default 1024)")
    parser.add_argument("--budget-seconds", type=float, default=600.0,
                        help="total time for all sizes (default 600)")
    parser.add_argument("--run-limit-seconds", type=float, default=600.0,
                        help="a size counts only if its run finishes within this (default 600)")
    parser.add_argument("--structure", choices=[s.value for s in Structure], default="queue")
    parser.add_argument("--ratio", type=float, default=0.5, help="insert ratio (default 0.5)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    spawn = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    lines = ["| n | wall seconds | peak RSS (MiB) | mean rounds |", "|---:|---:|---:|---:|"]
    largest: int | None = None
    last_wall: float | None = None
    walls: list[tuple[int, float]] = []
    n = args.start_n
    while True:
        left = args.budget_seconds - (time.perf_counter() - started)
        limit = min(left, args.run_limit_seconds)
        if last_wall is not None and last_wall * GROWTH_GUESS > limit:
            print(f"n={n}: not started, expected ~{last_wall * GROWTH_GUESS:.0f} s "
                  f"> {limit:.0f} s left", file=sys.stderr)
            break
        with spawn.Pool(1) as pool:
            pending = pool.apply_async(measure, (args.structure, n, args.ratio, args.seed))
            try:
                wall, peak_kib, mean = pending.get(timeout=max(limit, 1.0))
            except multiprocessing.TimeoutError:
                # Leaving the with-block terminates the worker: the run is abandoned.
                print(f"n={n}: stopped after {limit:.0f} s", file=sys.stderr)
                lines.append(f"| {n} | > {limit:.0f} (stopped) | | |")
                break
        print(f"n={n}: {wall:.1f} s, {peak_kib / 1024:.0f} MiB", file=sys.stderr, flush=True)
        lines.append(f"| {n} | {wall:.1f} | {peak_kib / 1024:.0f} | {mean:.1f} |")
        if wall <= args.run_limit_seconds:
            largest = n
        last_wall = wall
        walls.append((n, wall))
        n *= 2

    print(f"Paper setup ({args.structure}, insert ratio {args.ratio:g}, 10 requests/round, "
          f"1000 rounds), seed {args.seed}:\n")
    print("\n".join(lines))
    total = time.perf_counter() - started
    if largest is None:
        print(f"\nNo size finished within {args.run_limit_seconds:.0f} s (total {total:.0f} s).")
    else:
        print(f"\nLargest n finished within {args.run_limit_seconds:.0f} s per run: {largest} "
              f"(total {total:.0f} s).")
    extrapolate(walls, args.run_limit_seconds)
    return 0


def extrapolate(walls: list[tuple[int, float]], limit: float) -> None:
    """Project, from the last doubling's growth, the largest n that would fit ``limit``.

    The budget rarely lets us *run* a size that takes the full limit, so this says how far
    the measured trend reaches; it is a projection, printed as one.
    """
    if len(walls) < 2:
        return
    (n0, w0), (n1, w1) = walls[-2], walls[-1]
    growth = w1 / w0 if w0 > 0 else GROWTH_GUESS
    if growth <= 1.0:
        return
    n, wall = n1, w1
    while wall * growth <= limit:
        n, wall = n * 2, wall * growth
    print(f"Projection: run time grew x{growth:.2f} from n={n0} to n={n1}; at that rate the "
          f"largest doubling that fits {limit:.0f} s is n={n} (~{wall:.0f} s).")


if __name__ == "__main__":
    sys.exit(main())
