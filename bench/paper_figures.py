"""Reproduce the paper's Figures 2-4 (SPEC §9, paper §VII) with the synchronous-rounds simulator.

    .venv/bin/python bench/paper_figures.py --max-n 4096 --jobs 2

Writes ``figure2_queue.csv``, ``figure3_stack.csv``, ``figure4_rate.csv`` and one PNG per
figure into ``--out``, prints Markdown tables of mean rounds per request and the fitted
rounds per doubling of ``n``, and reports one line per finished point on stderr.

Figure 4's ``n`` is a choice of ours: the paper's value did not survive the text copy
("We consider an instance of [lost] nodes").  Its load is ``p * n`` requests a round, so
its cost grows with ``n`` far faster than Figures 2/3; the default 256 keeps the whole
benchmark to about ten minutes on two cores.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from skueue.sim.results import (
    rate_table,
    read_csv,
    size_table,
    slope_table,
    sort_key,
    write_csv,
)
from skueue.sim.sweep import (
    Point,
    Row,
    figure2_points,
    figure3_points,
    figure4_points,
    number,
    run,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
FIGURES = {
    2: ("figure2_queue", "Figure 2: Skueue queue, mean rounds per request vs n"),
    3: ("figure3_stack", "Figure 3: Skueue stack, mean rounds per request vs n"),
    4: ("figure4_rate", None),  # titled with FIGURE4_TITLE, which names n
}
FIGURE4_TITLE = ("Figure 4: Skueue, mean rounds per request vs request probability\n"
                 "(n = {n}, insert ratio 0.5)")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-n", type=int, default=4096,
                        help="largest n of Figures 2/3; n doubles from 2 (default 4096)")
    parser.add_argument("--seeds", type=int, default=1, help="runs per point (default 1)")
    parser.add_argument("--figure4-n", type=int, default=256,
                        help="n of Figure 4; the paper's value was lost (default 256)")
    parser.add_argument("--rounds", type=int, default=1000,
                        help="rounds that create requests (paper: 1000)")
    parser.add_argument("--figures", type=int, nargs="+", choices=sorted(FIGURES),
                        default=sorted(FIGURES), help="which figures to run (default all)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR,
                        help="output directory (default bench/results)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--replot", action="store_true",
                        help="run nothing: redraw PNGs and tables from the CSVs in --out")
    args = parser.parse_args(argv)
    if args.max_n < 2 or args.seeds < 1 or args.figure4_n < 1 or args.jobs < 1:
        parser.error("--max-n >= 2, --seeds >= 1, --figure4-n >= 1 and --jobs >= 1 required")
    return args


def points_of(args: argparse.Namespace) -> dict[int, list[Point]]:
    sweeps = {
        2: lambda: figure2_points(args.max_n, args.seeds, args.rounds),
        3: lambda: figure3_points(args.max_n, args.seeds, args.rounds),
        4: lambda: figure4_points(args.figure4_n, args.seeds, rounds=args.rounds),
    }
    return {f: list(sweeps[f]()) for f in args.figures}


def run_all(points: list[Point], jobs: int) -> Iterator[Row]:
    """Yield rows as they finish; the costliest points start first so no core idles at the end."""
    ordered = sorted(points, key=lambda p: p.cost, reverse=True)
    if jobs == 1:
        yield from map(run, ordered)
        return
    with multiprocessing.Pool(jobs) as pool:
        yield from pool.imap_unordered(run, ordered)


def describe(row: Mapping[str, object]) -> str:
    load = "" if row["p"] is None else f" p={number(row, 'p'):.2f}"
    return (f"{row['structure']} n={row['n']} ratio={number(row, 'ratio'):.2f}{load} "
            f"seed={row['seed']}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        from skueue.sim.figures import plot_rounds_vs_n, plot_rounds_vs_probability
    except ImportError as e:
        if not (e.name or "").startswith("matplotlib"):
            raise
        print("paper_figures: error: needs the spark extra: pip install 'skueue[spark]' "
              "(matplotlib not installed)", file=sys.stderr)
        return 1
    by_figure = points_of(args)
    everything = [p for points in by_figure.values() for p in points]
    args.out.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    rows: list[Row] = []
    if args.replot:
        everything = []
        for figure in by_figure:
            rows.extend(read_csv(args.out / f"{FIGURES[figure][0]}.csv"))
    for done, row in enumerate(run_all(everything, args.jobs), start=1):
        rows.append(row)
        print(f"[{done}/{len(everything)}] {describe(row)}: {number(row, 'mean_rounds'):.1f} "
              f"rounds, {number(row, 'wall_seconds'):.1f} s "
              f"(elapsed {time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    wall = time.perf_counter() - started

    rows.sort(key=sort_key)
    for figure, points in by_figure.items():
        stem, title = FIGURES[figure]
        if figure == 4:
            mine = [r for r in rows if r["p"] is not None]
        else:
            structure = points[0].structure.value
            mine = [r for r in rows if r["p"] is None and r["structure"] == structure]
        if not args.replot:
            write_csv(mine, args.out / f"{stem}.csv")
        if figure == 4:
            n4 = ", ".join(sorted({str(r["n"]) for r in mine}, key=int))
            plot_rounds_vs_probability(mine, args.out / f"{stem}.png", FIGURE4_TITLE.format(n=n4))
            print(f"\n## Figure 4: mean rounds per request, n = {n4}, "
                  f"insert ratio 0.5\n\n{rate_table(mine)}")
        else:
            plot_rounds_vs_n(mine, args.out / f"{stem}.png", title)
            print(f"\n## {title}\n\n{size_table(mine)}\n\n"
                  f"Fitted rounds per doubling of n (least squares on log2 n):\n\n"
                  f"{slope_table(mine)}")
    if args.replot:
        print(f"\nRedrawn from the CSVs in {args.out}")
    else:
        print(f"\n{len(rows)} runs, {args.seeds} seed(s), {args.jobs} job(s): "
              f"wall time {wall:.0f} s; outputs in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
