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
import csv
import math
import multiprocessing
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from skueue.sim.figures import plot_rounds_vs_n, plot_rounds_vs_probability
from skueue.sim.sweep import (
    ROW_FIELDS,
    Point,
    Row,
    figure2_points,
    figure3_points,
    figure4_points,
    fit_rounds_per_doubling,
    mean_rounds,
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
# Digits kept in the CSVs: enough to compare runs, few enough to keep the files small.
DIGITS = {"mean_rounds": 4, "entries_mean": 3, "messages_per_request": 3, "wall_seconds": 2}


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


def write_csv(rows: Iterable[Row], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=ROW_FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(k, v) for k, v in row.items()})


def read_csv(path: Path) -> list[Row]:
    """Rows back from :func:`write_csv`, with their types (an empty ``p`` is ``None``)."""
    ints = {"n", "seed", "requests", "tree_height", "largest_batch", "entries_min",
            "entries_max"}
    rows: list[Row] = []
    with path.open(newline="", encoding="utf-8") as f:
        for raw in csv.DictReader(f):
            row: Row = {}
            for key, text in raw.items():
                if key == "structure":
                    row[key] = text
                elif text == "":
                    row[key] = None
                else:
                    row[key] = int(text) if key in ints else float(text)
            rows.append(row)
    return rows


def _cell(key: str, value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float) and key in DIGITS:
        return round(value, DIGITS[key])
    return value


def _sort_key(row: Row) -> tuple[float, ...]:
    p = -1.0 if row["p"] is None else number(row, "p")
    return (number(row, "n"), p, number(row, "ratio"), number(row, "seed"),
            0.0 if row["structure"] == "queue" else 1.0)


# -- reporting ---------------------------------------------------------------------------


def size_table(rows: list[Row]) -> str:
    """Markdown: one line per n, one column per ratio, plus the tree height."""
    curves = mean_rounds(rows, "n", "ratio")
    ratios = list(curves)
    heights = {number(r, "n"): number(r, "tree_height") for r in rows}
    header = "| n | tree height | " + " | ".join(f"ratio {r:g}" for r in ratios) + " |"
    lines = [header, "|" + "---:|" * (len(ratios) + 2)]
    for n in sorted(heights):
        cells = " | ".join(f"{curves[r][n]:.1f}" if n in curves[r] else "" for r in ratios)
        lines.append(f"| {int(n)} | {int(heights[n])} | {cells} |")
    return "\n".join(lines)


def rate_table(rows: list[Row]) -> str:
    """Markdown: one line per probability, one column per structure."""
    curves = mean_rounds(rows, "p", "structure")
    names = list(curves)
    ps = sorted({number(r, "p") for r in rows})
    lines = ["| p | " + " | ".join(str(s) for s in names) + " |", "|" + "---:|" * (len(names) + 1)]
    for p in ps:
        cells = " | ".join(f"{curves[s][p]:.1f}" if p in curves[s] else "" for s in names)
        lines.append(f"| {p:g} | {cells} |")
    return "\n".join(lines)


def slope_table(rows: list[Row]) -> str:
    """Markdown: fitted rounds per doubling of n, over all sizes and over the larger half.

    A logarithmic curve has the same slope in both columns; a clearly larger slope over
    the larger sizes would mean faster-than-logarithmic growth.
    """
    ns = sorted({number(r, "n") for r in rows})
    big = ns[len(ns) // 2:]
    whole = fit_rounds_per_doubling(rows)
    upper = fit_rounds_per_doubling([r for r in rows if number(r, "n") in big])
    lines = [f"| ratio | rounds per doubling (n = {int(ns[0])}..{int(ns[-1])}) "
             f"| rounds per doubling (n = {int(big[0])}..{int(big[-1])}) |",
             "|---:|---:|---:|"]
    for ratio, slope in whole.items():
        up = upper.get(ratio, math.nan)
        lines.append(f"| {ratio:g} | {slope:.2f} | {up:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
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

    rows.sort(key=_sort_key)
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
