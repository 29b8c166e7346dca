"""``skueue experiment``: the paper's Figures 2-4 sweeps, one Spark task per point."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from skueue.cli.args import fail, positive_int, require_spark_extra

PROG = "skueue experiment"
FIGURES = {
    2: ("figure2_queue", "Figure 2: Skueue queue, mean rounds per request vs n"),
    3: ("figure3_stack", "Figure 3: Skueue stack, mean rounds per request vs n"),
    4: ("figure4_rate", "Figure 4: mean rounds per request vs request probability"),
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "experiment",
        help="run the paper's Section VII sweeps on Spark (Figures 2-4)",
        description="Run the synchronous-rounds simulator over the paper's sweeps, one Spark "
        "task per (n, ratio, seed), and write the Figure 2-4 tables, CSVs, Parquet and plots.",
    )
    p.add_argument("--figures", type=int, nargs="+", choices=sorted(FIGURES),
                   default=sorted(FIGURES), help="which figures (default: 2 3 4)")
    p.add_argument("--max-n", type=positive_int, default=4096,
                   help="largest n of every figure; Figures 2/3 double n from --min-n up to "
                   "it, so it must be --min-n times a power of two (default 4096)")
    p.add_argument("--min-n", type=positive_int, default=2,
                   help="smallest n of Figures 2/3 (default 2)")
    p.add_argument("--seeds", type=positive_int, default=1, help="runs per point (default 1)")
    p.add_argument("--rounds", type=positive_int, default=1000,
                   help="rounds that create requests (paper: 1000)")
    p.add_argument("--figure4-n", type=positive_int, default=None,
                   help="n of Figure 4, at most --max-n (default: 256, or --max-n if "
                   "smaller; the paper's value was lost)")
    p.add_argument("--master", default=None,
                   help="local[*], spark://HOST:PORT or sc://HOST:PORT (default: "
                   "$SPARK_REMOTE, else spark-submit's master, else local[*])")
    p.add_argument("--out", type=Path, default=Path("skueue-experiment"), metavar="DIR",
                   help="output directory (default ./skueue-experiment)")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE",
                   help="extra Spark setting (repeatable)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    require_spark_extra(PROG)
    from skueue.analysis import experiment as ex
    from skueue.analysis.session import MasterError, parse_conf, plan_master, started_session
    from skueue.sim.figures import plot_rounds_vs_n, plot_rounds_vs_probability
    from skueue.sim.results import rate_table, size_table, slope_table, sort_key, write_csv
    from skueue.sim.sweep import (
        check_sizes,
        figure2_points,
        figure3_points,
        figure4_points,
        number,
    )

    try:
        figure4_n = check_sizes(args.max_n, args.min_n, args.figure4_n)
        plan = plan_master(args.master)
        conf = parse_conf(args.conf)
    except (MasterError, ValueError) as e:
        fail(PROG, str(e))
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(PROG, f"cannot create {args.out}: {e.strerror}")

    by_figure = {
        2: list(figure2_points(args.max_n, args.seeds, args.rounds, args.min_n)),
        3: list(figure3_points(args.max_n, args.seeds, args.rounds, args.min_n)),
        4: list(figure4_points(figure4_n, args.seeds, rounds=args.rounds)),
    }
    points = [p for f in args.figures for p in by_figure[f]]

    def progress(done: int, total: int) -> None:
        print(f"{PROG}: {done}/{total} points done", file=sys.stderr, flush=True)

    print(f"{PROG}: {len(points)} points on {plan.describe()}", file=sys.stderr, flush=True)
    with started_session(args.master, app_name=PROG, conf=conf) as session:
        master = session.master
        started = time.perf_counter()
        rows = sorted(ex.run_points(session.spark, points, progress), key=sort_key)
        wall = time.perf_counter() - started
        if rows:
            session.spark.createDataFrame(rows, ex.ROW_SCHEMA).coalesce(1).write.mode(
                "overwrite").parquet(str(args.out / "rows"))

    report = [f"# Skueue experiment (master {master})", ""]
    for figure in args.figures:
        stem, title = FIGURES[figure]
        if figure == 4:
            mine = [r for r in rows if r["p"] is not None]
        else:
            structure = "queue" if figure == 2 else "stack"
            mine = [r for r in rows if r["p"] is None and r["structure"] == structure]
        if not mine:
            continue
        write_csv(mine, args.out / f"{stem}.csv")
        # Links relative to report.md, which sits next to them: they resolve wherever
        # the directory is copied or rendered.
        files = [f"![{title}]({stem}.png)", "",
                 f"Data: [{stem}.csv]({stem}.csv) (one row per point and seed).", ""]
        if figure == 4:
            plot_rounds_vs_probability(mine, args.out / f"{stem}.png")
            report += [f"## {title} (n = {figure4_n}, insert ratio 0.5)", "", *files,
                       rate_table(mine), ""]
        else:
            plot_rounds_vs_n(mine, args.out / f"{stem}.png", title)
            report += [f"## {title}", "", *files, size_table(mine), "",
                       "Fitted rounds per doubling of n (least squares on log2 n):", "",
                       slope_table(mine), ""]
    big = ex.largest_run(rows)
    hosts = sorted({str(r[ex.HOST_FIELD]) for r in rows})
    if big is not None:
        report += [f"Largest n run: {big['n']} ({big['structure']}, ratio {big['ratio']}, "
                   f"seed {big['seed']}): {number(big, 'wall_seconds'):.1f} s in one task.", ""]
    report += [f"{len(rows)} points, {args.seeds} seed(s), on {len(hosts)} executor host(s) "
               f"({', '.join(hosts)}): wall time {wall:.0f} s. Outputs in {args.out}; "
               f"every row as Parquet in [`rows/`](rows/).", ""]
    text = "\n".join(report)
    (args.out / "report.md").write_text(text, encoding="utf-8")
    print(text)
    return 0
