"""Seed 000's relaxed priority queue against Skueue's priority levels, on the seed's axes.

    .venv/bin/python bench/pei_compare.py --jobs 2

Reproduces the seed's Figures 2-7 (PEI against the consumer lag for three strategies,
against n, against k, and against concurrent clients with both client policies) with
the simulator of :mod:`skueue.sim.relaxed_pq`, and runs Skueue's queue with 16 priority
levels in the synchronous-rounds simulator on the same axes: its PEI (by the anchor's
order; it must be 0 at every pop, or this script fails) and its mean rounds per request.

Writes ``pei_lag.csv``, ``pei_n.csv``, ``pei_k.csv``, ``pei_clients.csv`` (one row per
point and seed), ``pei_distribution.csv`` (Figure 2), ``pei_compare.json`` (every row and
how the run was made) and one PNG per figure into ``--out``, prints Markdown tables, and
reports one line per finished point on stderr.  About two minutes on two cores;
``--smoke`` runs every figure at toy sizes in seconds.
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import platform
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from skueue.sim.pei_sweep import (
    FIGURES,
    LEVELS,
    ROW_FIELDS,
    SECOND_CHOICE,
    SMOKE,
    Point,
    Row,
    Scale,
    distribution,
    points,
    run,
)
from skueue.sim.sweep import number

RESULTS_DIR = Path(__file__).resolve().parent / "results"
STRATEGIES = ("peek-before-pop", "peek-before-add", "no-peek")
PLOTS = {"lag": "pei_vs_lag", "n": "pei_vs_n", "k": "pei_vs_k", "clients": "pei_vs_clients"}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--figures",
        nargs="+",
        choices=FIGURES,
        default=list(FIGURES),
        help="which sweeps (default all; Figure 2 always)",
    )
    parser.add_argument(
        "--seeds", type=int, default=None, help="runs per relaxed point (default 3; --smoke: 1)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="every figure at toy sizes, in seconds (for tests)"
    )
    parser.add_argument(
        "--out", type=Path, default=RESULTS_DIR, help="output directory (default bench/results)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--replot",
        action="store_true",
        help="run nothing: redraw PNGs and tables from the CSVs in --out",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or (args.seeds is not None and args.seeds < 1):
        parser.error("--jobs and --seeds must be at least 1")
    return args


def scale_of(args: argparse.Namespace) -> Scale:
    base = SMOKE if args.smoke else Scale()
    if args.seeds is None:
        return base
    return attrs.evolve(base, seeds=args.seeds)


def run_all(todo: list[Point], jobs: int) -> Iterator[Row]:
    """Rows as they finish; the costliest points start first so no core idles at the end."""
    ordered = sorted(todo, key=lambda p: p.cost, reverse=True)
    if jobs == 1:
        yield from map(run, ordered)
        return
    with multiprocessing.Pool(jobs) as pool:
        yield from pool.imap_unordered(run, ordered, chunksize=1)


# -- files -------------------------------------------------------------------------------


def write_rows(rows: Sequence[Mapping[str, object]], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=ROW_FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(row[k]) for k in ROW_FIELDS})


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):
        return round(value, 4)
    return value


def read_rows(path: Path) -> list[dict[str, object]]:
    with path.open(newline="", encoding="utf-8") as f:
        return [{k: (None if v == "" else v) for k, v in row.items()} for row in csv.DictReader(f)]


def sort_key(row: Mapping[str, object]) -> tuple[object, ...]:
    return (
        FIGURES.index(str(row["figure"])),
        str(row["design"]),
        str(row["strategy"]),
        number(row, "warmup"),
        number(row, "n"),
        number(row, "k") if row["k"] is not None else -1,
        number(row, "lag"),
        number(row, "clients"),
        number(row, "seed"),
    )


# -- tables ------------------------------------------------------------------------------


def _mean(rows: Sequence[Mapping[str, object]], key: str) -> float:
    return statistics.fmean(number(r, key) for r in rows)


def _pick(rows: Sequence[Mapping[str, object]], **match: object) -> list[Mapping[str, object]]:
    return [r for r in rows if all(str(r[k]) == str(v) for k, v in match.items())]


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _skueue_cells(rows: Sequence[Mapping[str, object]], **match: object) -> list[str]:
    mine = _pick(rows, design="skueue", **match)
    if not mine:
        return ["", ""]
    return [f"{max(int(number(r, 'max')) for r in mine)}", f"{_mean(mine, 'mean_rounds'):.1f}"]


def _table(header: Sequence[str], lines: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    out += ["| " + " | ".join(line) + " |" for line in lines]
    return "\n".join(out)


def lag_table(rows: Sequence[Mapping[str, object]]) -> str:
    relaxed = _pick(rows, figure="lag", design="relaxed")
    header = ["L"]
    for protocol in ("seed's", "steady"):
        header += [f"{s} ({protocol}) median / mean" for s in STRATEGIES]
    header += ["Skueue max PEI", "Skueue rounds"]
    lines = []
    for lag in sorted({int(number(r, "lag")) for r in relaxed}):
        line = [f"{lag:,}"]
        for steady in (False, True):
            for strategy in STRATEGIES:
                mine = [
                    r
                    for r in _pick(relaxed, lag=lag, strategy=strategy)
                    if (number(r, "warmup") > 0) == steady
                ]
                line.append(f"{_fmt(_mean(mine, 'median'))} / {_fmt(_mean(mine, 'mean'))}")
        lines.append(line + _skueue_cells(rows, figure="lag", lag=lag))
    return _table(header, lines)


def stats_table(rows: Sequence[Mapping[str, object]], figure: str, x: str) -> str:
    relaxed = _pick(rows, figure=figure, design="relaxed")
    header = [x, "median", "mean", "p90", "p99", "Skueue max PEI", "Skueue rounds"]
    lines = []
    for value in sorted({int(number(r, x)) for r in relaxed}):
        mine = _pick(relaxed, **{x: value})
        cells = [_fmt(_mean(mine, s)) for s in ("median", "mean", "p90", "p99")]
        skueue = _skueue_cells(rows, figure=figure, n=value) if x == "n" else ["", ""]
        lines.append([f"{value:,}", *cells, *skueue])
    for r in _pick(rows, figure=figure, design="skueue") if x != "n" else []:
        lines.append([f"Skueue, n = {r['n']}", *["0"] * 4, *_skueue_cells([r])])
    return _table(header, lines)


def clients_table(rows: Sequence[Mapping[str, object]]) -> str:
    relaxed = _pick(rows, figure="clients", design="relaxed")
    stats = ("median", "mean", "p90", "p99")
    header = [
        "c",
        *(f"basic {s}" for s in stats),
        *(f"second choice {s}" for s in stats),
        "Skueue max PEI",
        "Skueue rounds",
    ]
    lines = []
    for c in sorted({int(number(r, "clients")) for r in relaxed}):
        line = [str(c)]
        for second in (False, True):
            mine = [
                r
                for r in _pick(relaxed, clients=c)
                if str(r["strategy"]).endswith(SECOND_CHOICE) == second
            ]
            line += [_fmt(_mean(mine, s)) for s in stats]
        lines.append(line + _skueue_cells(rows, figure="clients", clients=c))
    return _table(header, lines)


def _title(rows: Sequence[Mapping[str, object]], figure: str) -> str:
    relaxed = _pick(rows, figure=figure, design="relaxed")
    first = next((r for r in relaxed if r["strategy"] == STRATEGIES[0]), relaxed[0])
    n, k, lag = (int(number(first, f)) for f in ("n", "k", "lag"))
    return {
        "lag": f"Figure 3: median / mean PEI against the consumer lag (n = {n}, k = {k}; "
        "no peek: k = 1), the seed's protocol and the steady state",
        "n": f"Figure 4: PEI against n (k = {k}, lag {lag:,})",
        "k": f"Figure 5: PEI against k (n = {n}, lag {lag:,})",
        "clients": f"Figures 6 and 7: PEI against concurrent clients (n = {n}, k = {k}, "
        f"lag {lag:,}), basic policy and second choice",
    }[figure]


TABLES = {
    "lag": lag_table,
    "n": lambda rows: stats_table(rows, "n", "n"),
    "k": lambda rows: stats_table(rows, "k", "k"),
    "clients": clients_table,
}


# -- main --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        from skueue.sim import pei_figures
    except ImportError as e:
        if not (e.name or "").startswith("matplotlib"):
            raise
        print(
            "pei_compare: error: needs the spark extra: pip install 'skueue[spark]' "
            "(matplotlib not installed)",
            file=sys.stderr,
        )
        return 1
    scale = scale_of(args)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rows: list[Mapping[str, object]] = []
    if args.replot:
        for figure in args.figures:
            rows.extend(read_rows(args.out / f"pei_{figure}.csv"))
        with (args.out / "pei_distribution.csv").open(encoding="utf-8") as f:
            counts = [(int(r["index"]), int(r["pops"])) for r in csv.DictReader(f)]
    else:
        todo = points(scale, args.figures)
        for done, row in enumerate(run_all(todo, args.jobs), start=1):
            rows.append(row)
            print(
                f"[{done}/{len(todo)}] {row['figure']} {row['design']} {row['strategy']} "
                f"n={row['n']} k={row['k']} L={row['lag']} c={row['clients']} "
                f"warmup={row['warmup']} seed={row['seed']}: mean PEI "
                f"{number(row, 'mean'):.1f}, {number(row, 'wall_seconds'):.1f} s "
                f"(elapsed {time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
        counts = distribution(scale)
    wall = time.perf_counter() - started
    rows.sort(key=sort_key)

    bad = [r for r in rows if r["design"] == "skueue" and number(r, "max") != 0]
    for r in bad:
        print(
            f"pei_compare: error: Skueue popped a less urgent element: {dict(r)}", file=sys.stderr
        )

    n, k = scale.lag_n, scale.lag_k
    pei_figures.plot_distribution(
        counts,
        args.out / "pei_distribution.png",
        f"PEI distribution, n = {n} subqueues, k = {k} peeks, lag {scale.distribution_lag:,}, "
        f"{sum(c for _, c in counts):,} pops (seed 000, Figure 2)",
    )
    print(f"# Seed 000's relaxed priority queue against Skueue ({LEVELS} priority levels)\n")
    zero = sum(c for i, c in counts if i == 0) / max(1, sum(c for _, c in counts))
    print(
        f"Figure 2 (n = {n}, k = {k}, lag {scale.distribution_lag:,}): {zero:.1%} of the "
        "pops took the most urgent element.\n"
    )
    for figure in args.figures:
        mine = [r for r in rows if r["figure"] == figure]
        if not args.replot:
            write_rows(mine, args.out / f"pei_{figure}.csv")
        plot = getattr(pei_figures, f"plot_{PLOTS[figure]}")
        plot(mine, args.out / f"{PLOTS[figure]}.png")
        print(f"## {_title(mine, figure)}\n\n{TABLES[figure](mine)}\n")
    if not args.replot:
        with (args.out / "pei_distribution.csv").open("w", encoding="utf-8") as f:
            f.write("index,pops\n" + "".join(f"{i},{c}\n" for i, c in counts))
        meta = {
            "command": "bench/pei_compare.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "scale": attrs.asdict(scale),
            "wall_seconds": round(wall, 1),
            "jobs": args.jobs,
            "python": platform.python_version(),
            "rows": [{k: r[k] for k in ROW_FIELDS} for r in rows],
        }
        (args.out / "pei_compare.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(
            f"{len(rows)} runs, {args.jobs} job(s): wall time {wall:.0f} s; outputs in {args.out}"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
