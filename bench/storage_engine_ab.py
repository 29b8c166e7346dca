"""Two checkouts' storage engines in one run, alternating: before against after.

    .venv/bin/python bench/storage_engine_ab.py --base ../wt-storage-base [--rounds 9]
        [--scenarios sequential,interleaved] [--sync-every 0,1024] [--items 100000]

On a machine shared with other work one run of each engine says little: a load that
comes and goes slows whichever runs at that moment.  This runs each checkout's own
``bench/storage_engine.py`` (its engine and its scenarios) once per row, base then this
one, for ``--rounds`` rounds, and prints the median MB/s of each with all the runs, so
that both saw the same load.  A checkout's bench script puts its own checkout first on
``sys.path``, so each run measures that checkout's engine.  Prints a Markdown table;
``--out`` also writes the runs as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]


def one_run(checkout: Path, args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    """One run of every row of ``checkout``'s bench script, one repeat each."""
    command = [sys.executable, str(checkout / "bench" / "storage_engine.py"),
               "--engines", "paged", "--scenarios", args.scenarios,
               "--sync-every", args.sync_every, "--items", str(args.items),
               "--repeat", "1", "--out", str(out)]  # fmt: skip
    if args.dir is not None:
        command += ["--dir", str(args.dir)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows: list[dict[str, Any]] = json.loads(out.read_text())["rows"]
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--scenarios", default="sequential,interleaved")
    parser.add_argument("--sync-every", default="0,1024")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go")
    parser.add_argument("--out", type=Path, default=None, help="also write the runs as JSON")
    args = parser.parse_args(argv)
    checkouts = {"base": args.base.resolve(), "this": HERE}
    runs: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="skueue-storage-ab-") as scratch:
        for round_ in range(args.rounds):
            for name, checkout in checkouts.items():
                for row in one_run(checkout, args, Path(scratch) / f"{name}.json"):
                    key = (row["scenario"], row["fsync_policy"], name)
                    runs[key].append(row["mb_per_s"])
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    print(f"\n{args.rounds} rounds, each: base then this checkout, one run per row; "
          f"base = {checkouts['base']}\n")  # fmt: skip
    print("| scenario | fsync policy | base MB/s (median) | this MB/s (median) | this/base "
          "| base runs | this runs |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    table = []
    for scenario, policy in dict.fromkeys((s, p) for s, p, _ in runs):
        base, this = runs[(scenario, policy, "base")], runs[(scenario, policy, "this")]
        b, t = statistics.median(base), statistics.median(this)
        table.append({"scenario": scenario, "fsync_policy": policy, "base_median": b,
                      "this_median": t, "base_runs": base, "this_runs": this})  # fmt: skip
        print(
            f"| {scenario} | {policy} | {b:.0f} | {t:.0f} | {t / b:.2f} "
            f"| {' '.join(f'{x:.0f}' for x in base)} | {' '.join(f'{x:.0f}' for x in this)} |"
        )
    report = {"base": str(checkouts["base"]), "rounds": args.rounds, "rows": table}
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
