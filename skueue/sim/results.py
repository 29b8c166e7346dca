"""A sweep's rows as we report them: the fitted rounds per doubling, Markdown tables, CSV.

The paper's claim (Section VII) is that mean rounds per request grow logarithmically in
``n``.  :func:`fit_rounds_per_doubling` measures that as the least-squares slope of mean
rounds against ``log2 n``; :func:`slope_table` shows the slope over all sizes next to the
slope over the larger half.  A logarithmic curve has about the same slope in both
columns; a clearly larger slope over the larger sizes would mean faster-than-logarithmic
growth.

The single-machine benchmark (``bench/paper_figures.py``), ``skueue experiment`` (Spark)
and the other benchmarks that fit a slope all use this module, so their tables and CSV
files are the same and diff cleanly.  Pure Python: no pyspark, no matplotlib.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from skueue.sim.sweep import ROW_FIELDS, Row, mean_rounds, number

DIGITS: Final = {"mean_rounds": 4, "entries_mean": 3, "messages_per_request": 3,
                 "wall_seconds": 2}
"""Digits kept in the CSVs: enough to compare runs, few enough to keep the files small."""
NO_REQUESTS: Final = "no requests"
"""A table's cell for a point whose runs made no request, hence have no mean."""
INT_FIELDS: Final = frozenset({"n", "seed", "requests", "tree_height", "largest_batch",
                               "entries_min", "entries_max"})


# -- the fit -----------------------------------------------------------------------------


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ``ys`` against ``xs``; needs two distinct ``xs``."""
    if len(set(xs)) < 2:
        raise ValueError(f"a slope needs at least two distinct x values, got {sorted(set(xs))}")
    mx = statistics.fmean(xs)
    my = statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return sxy / sxx


def fit_rounds_per_doubling(rows: Iterable[Mapping[str, object]]) -> dict[float, float]:
    """Least-squares slope of mean rounds against ``log2 n``, one per ratio.

    Pass the rows of one structure.  Every row is one sample (seeds are not averaged
    first), which gives the same slope as fitting the per-size means when every size has
    the same number of seeds.  A ratio with fewer than two distinct sizes has no slope
    and is left out.
    """
    samples: dict[float, list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        samples[number(row, "ratio")].append(
            (math.log2(number(row, "n")), number(row, "mean_rounds"))
        )
    slopes = {}
    for ratio, all_points in sorted(samples.items()):
        points = [(x, y) for x, y in all_points if not math.isnan(y)]  # no requests: no mean
        xs = [x for x, _ in points]
        if len(set(xs)) < 2:
            continue
        slopes[ratio] = slope(xs, [y for _, y in points])
    return slopes


# -- Markdown tables ---------------------------------------------------------------------


def size_table(rows: Sequence[Mapping[str, object]]) -> str:
    """One line per n, one column per ratio (mean rounds), plus the tree height."""
    curves = mean_rounds(rows, "n", "ratio")
    ratios = list(curves)
    heights = {number(r, "n"): number(r, "tree_height") for r in rows}
    lines = ["| n | tree height | " + " | ".join(f"ratio {r:g}" for r in ratios) + " |",
             "|" + "---:|" * (len(ratios) + 2)]
    for n in sorted(heights):
        cells = " | ".join(_mean_cell(curves[r].get(n)) for r in ratios)
        lines.append(f"| {int(n)} | {int(heights[n])} | {cells} |")
    return "\n".join(lines)


def rate_table(rows: Sequence[Mapping[str, object]]) -> str:
    """One line per request probability, one column per structure (Figure 4)."""
    curves = mean_rounds(rows, "p", "structure")
    names = list(curves)
    ps = sorted({number(r, "p") for r in rows})
    lines = ["| p | " + " | ".join(str(s) for s in names) + " |",
             "|" + "---:|" * (len(names) + 1)]
    for p in ps:
        cells = " | ".join(_mean_cell(curves[s].get(p)) for s in names)
        lines.append(f"| {p:g} | {cells} |")
    return "\n".join(lines)


def _mean_cell(mean: float | None) -> str:
    """A table cell: empty where the point was not run, and says so where it made no
    request (too few rounds or processes, or too small a p), rather than ``nan``."""
    if mean is None:
        return ""
    return NO_REQUESTS if math.isnan(mean) else f"{mean:.1f}"


def slope_table(rows: Sequence[Mapping[str, object]]) -> str:
    """Fitted rounds per doubling of n, over all sizes and over the larger half.

    Where a range holds a single size for a ratio there is nothing to fit, and the cell
    says so rather than showing ``nan``.
    """
    ns = sorted({number(r, "n") for r in rows})
    if len(ns) < 2:
        return "(one size only: no slope)"
    big = ns[len(ns) // 2:]
    whole = fit_rounds_per_doubling(rows)
    upper = fit_rounds_per_doubling([r for r in rows if number(r, "n") in big])
    lines = [f"| ratio | rounds per doubling (n = {_span(ns)}) "
             f"| rounds per doubling (n = {_span(big)}) |",
             "|---:|---:|---:|"]
    for ratio, fitted in whole.items():
        lines.append(f"| {ratio:g} | {fitted:.2f} | {_fitted_cell(upper.get(ratio))} |")
    return "\n".join(lines)


def _span(ns: Sequence[float]) -> str:
    return f"{int(ns[0])}..{int(ns[-1])}" if len(ns) > 1 else f"{int(ns[0])}"


def _fitted_cell(fitted: float | None) -> str:
    return "one size: no slope" if fitted is None else f"{fitted:.2f}"


# -- CSV ---------------------------------------------------------------------------------


def sort_key(row: Mapping[str, object]) -> tuple[float, ...]:
    """Rows in the CSVs' order: n, then p, ratio, seed, and the queue before the stack."""
    p = -1.0 if row["p"] is None else number(row, "p")
    return (number(row, "n"), p, number(row, "ratio"), number(row, "seed"),
            0.0 if row["structure"] == "queue" else 1.0)


def write_csv(rows: Iterable[Mapping[str, object]], path: Path) -> None:
    """One line per row, the columns of :data:`ROW_FIELDS`, floats rounded to :data:`DIGITS`."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=ROW_FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(k, row[k]) for k in ROW_FIELDS})


def read_csv(path: Path) -> list[Row]:
    """Rows back from :func:`write_csv`, with their types (an empty ``p`` is ``None``)."""
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
                    row[key] = int(text) if key in INT_FIELDS else float(text)
            rows.append(row)
    return rows


def _cell(key: str, value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float) and key in DIGITS:
        return round(value, DIGITS[key])
    return value
