"""The paper's experiments (SPEC §9, paper §VII) as data: sweep points and result rows.

Theory of operation
-------------------
An experiment is a list of :class:`Point` values, each one synchronous-rounds run
(:mod:`skueue.sim.rounds`).  :func:`run_point` turns one point into one flat
:data:`Row` of plain numbers and strings, so that rows go straight into a CSV, cross a
process-pool boundary unchanged, and are compared across runs without knowing the
simulator's classes.  The generators below only *describe* sweeps; running them (in
parallel, with progress output) is the job of ``bench/paper_figures.py`` (a process pool)
and of ``skueue experiment`` (:mod:`skueue.analysis.experiment`, one Spark task per
point); :mod:`skueue.sim.results` turns the rows into tables and CSV files and
:mod:`skueue.sim.figures` into plots.

Figures 2 and 3 sweep ``n = 2, 4, ..., max_n`` for several insert ratios with the
paper's load (10 requests a round to random processes for 1000 rounds).  Figure 4 fixes
``n`` and instead gives every process a request with probability ``p`` each round, at
insert ratio 0.5, so that local combining becomes visible.

The paper's claim is that mean rounds grow logarithmically in ``n``;
:func:`skueue.sim.results.fit_rounds_per_doubling` measures that as the least-squares
slope of mean rounds against ``log2 n``: a roughly constant slope over the range (rather
than one that keeps growing) is what "logarithmic" means here.

This module reads a wall clock (``wall_seconds``) but is otherwise pure: no files, no
processes, no plotting.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final

import attrs

from skueue.core.ops import Structure
from skueue.sim.rounds import SyncConfig, SyncSim

Row = dict[str, str | int | float | None]
"""One finished point; keys are :data:`ROW_FIELDS`."""

ROW_FIELDS: Final = (
    "structure",
    "n",
    "ratio",
    "p",
    "seed",
    "requests",
    "mean_rounds",
    "p50",
    "p99",
    "tree_height",
    "largest_batch",
    "messages_per_request",
    "entries_min",
    "entries_mean",
    "entries_max",
    "wall_seconds",
)

# The insert (Enqueue/Push) ratios of Figures 2 and 3.
RATIOS: Final = (0.0, 0.25, 0.5, 0.75, 1.0)
# Figure 4's per-node request probabilities; the paper's axis values did not survive the
# text copy, so we use an even grid up to one request per process per round.
PROBABILITIES: Final = tuple(round(k / 10, 1) for k in range(1, 11))
FIGURE4_RATIO: Final = 0.5
FIGURE4_N: Final = 256
"""Figure 4's n when not given and ``max_n`` allows (the paper's value was lost)."""
PAPER_ROUNDS: Final = 1000


@attrs.frozen
class Point:
    """One run of the synchronous-rounds simulator."""

    structure: Structure
    n: int
    ratio: float
    seed: int
    per_node_probability: float | None = None
    """``None``: the paper's 10 requests per round; else Figure 4's per-process chance."""
    rounds: int = PAPER_ROUNDS

    def describe(self) -> str:
        """Stable one-liner for progress output, e.g. ``queue n=64 ratio=0.50 seed=0``."""
        load = "" if self.per_node_probability is None else f" p={self.per_node_probability:.2f}"
        return f"{self.structure.value} n={self.n} ratio={self.ratio:.2f}{load} seed={self.seed}"

    @property
    def cost(self) -> float:
        """A rough relative run time, used to start the longest runs first in a pool.

        Work grows with the number of requests times the path length (~log n); in the
        paper's mode the request count is fixed, so ``n`` itself enters only
        through the tree height.
        """
        requests = self.rounds * (
            10 if self.per_node_probability is None else self.per_node_probability * self.n
        )
        return requests * math.log2(self.n + 1)


def run_point(
    structure: Structure,
    n: int,
    ratio: float,
    seed: int,
    per_node_probability: float | None = None,
    rounds: int = PAPER_ROUNDS,
) -> Row:
    """Run one simulation and summarise it in a flat row (see :data:`ROW_FIELDS`)."""
    config = SyncConfig(
        processes=n,
        structure=structure,
        rounds=rounds,
        per_node_probability=per_node_probability,
        insert_ratio=ratio,
        seed=seed,
    )
    started = time.perf_counter()
    result = SyncSim(config).run()
    wall = time.perf_counter() - started
    latencies = sorted(r.response - r.invoke for r in result.records)
    requests = len(latencies)
    entries = result.entries_per_process
    return {
        "structure": structure.value,
        "n": n,
        "ratio": ratio,
        "p": per_node_probability,
        "seed": seed,
        "requests": requests,
        "mean_rounds": statistics.fmean(latencies) if latencies else math.nan,
        "p50": percentile(latencies, 50),
        "p99": percentile(latencies, 99),
        "tree_height": result.tree_height,
        "largest_batch": result.largest_batch,
        # Per request rather than per run, so runs with different loads compare.
        "messages_per_request": result.network_messages / requests if requests else math.nan,
        "entries_min": min(entries),
        "entries_mean": statistics.fmean(entries),
        "entries_max": max(entries),
        "wall_seconds": wall,
    }


def run(point: Point) -> Row:
    """:func:`run_point` for a :class:`Point`; top-level so a process pool can pickle it."""
    return run_point(
        point.structure, point.n, point.ratio, point.seed, point.per_node_probability, point.rounds
    )


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (a value that actually occurred)."""
    if not ordered:
        return math.nan
    rank = math.ceil(q / 100 * len(ordered))
    return float(ordered[min(max(rank, 1), len(ordered)) - 1])


# -- sweeps ------------------------------------------------------------------------------


def sizes(max_n: int, min_n: int = 2) -> list[int]:
    """``min_n, 2 min_n, ...`` up to ``max_n``: the paper's doubling x-axis."""
    if min_n < 1 or max_n < min_n:
        raise ValueError(f"need 1 <= min_n <= max_n, got {min_n}, {max_n}")
    out = []
    n = min_n
    while n <= max_n:
        out.append(n)
        n *= 2
    return out


def check_sizes(max_n: int, min_n: int = 2, figure4_n: int | None = None) -> int:
    """Check an experiment's sizes; return Figure 4's n (:data:`FIGURE4_N` unless given,
    never above ``max_n``).  Raises ValueError, one line naming the limit.

    ``max_n`` bounds every figure, and must lie on the doubling axis from ``min_n``:
    otherwise the sweep stopped short of it without a word (``--max-n 3`` ran n = 2).
    The simulator takes any n; the axis is what doubles.
    """
    if min_n < 1 or max_n < min_n:
        raise ValueError(f"--max-n {max_n} is below --min-n {min_n}")
    axis = sizes(max_n, min_n)
    if axis[-1] != max_n:
        raise ValueError(
            f"--max-n {max_n} is not on the doubling axis from --min-n {min_n} "
            f"({', '.join(map(str, axis[:3]))}, ...): use {axis[-1]} or {2 * axis[-1]}"
        )
    if figure4_n is None:
        return min(FIGURE4_N, max_n)
    if figure4_n > max_n:
        raise ValueError(f"--figure4-n {figure4_n} is above --max-n {max_n}")
    return figure4_n


def _size_sweep(
    structure: Structure, max_n: int, seeds: int, rounds: int, min_n: int = 2
) -> Iterator[Point]:
    for n in sizes(max_n, min_n):
        for ratio in RATIOS:
            for seed in range(seeds):
                yield Point(structure, n, ratio, seed, rounds=rounds)


def figure2_points(
    max_n: int, seeds: int = 1, rounds: int = PAPER_ROUNDS, min_n: int = 2
) -> Iterator[Point]:
    """Figure 2: the queue, every size from ``min_n`` up to ``max_n``, every Enqueue ratio."""
    return _size_sweep(Structure.QUEUE, max_n, seeds, rounds, min_n)


def figure3_points(
    max_n: int, seeds: int = 1, rounds: int = PAPER_ROUNDS, min_n: int = 2
) -> Iterator[Point]:
    """Figure 3: the stack, every size from ``min_n`` up to ``max_n``, every Push ratio."""
    return _size_sweep(Structure.STACK, max_n, seeds, rounds, min_n)


def figure4_points(
    n: int,
    seeds: int = 1,
    probabilities: Iterable[float] = PROBABILITIES,
    rounds: int = PAPER_ROUNDS,
) -> Iterator[Point]:
    """Figure 4: fixed ``n``, per-node request probability ``p``, queue and stack."""
    for p in probabilities:
        for structure in (Structure.QUEUE, Structure.STACK):
            for seed in range(seeds):
                yield Point(
                    structure, n, FIGURE4_RATIO, seed, per_node_probability=p, rounds=rounds
                )


# -- summaries ---------------------------------------------------------------------------


CurveKey = str | float


def number(row: Mapping[str, object], key: str) -> float:
    """A numeric field of a row, also from a row read back from CSV (where it is text)."""
    value = row[key]
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"row field {key!r} is not a number: {value!r}")


def _curve_key(value: object) -> CurveKey:
    # Ratios arrive as floats (or as text from a CSV); structures as their names.
    if isinstance(value, int | float):
        return float(value)
    text = str(value)
    try:
        return float(text)
    except ValueError:
        return text


def _order(key: CurveKey) -> tuple[int, float, str]:
    return (0, key, "") if isinstance(key, float) else (1, 0.0, key)


def mean_rounds(
    rows: Iterable[Mapping[str, object]], x: str, curve: str
) -> dict[CurveKey, dict[float, float]]:
    """``{curve value: {x value: mean of mean_rounds over seeds}}``, both levels sorted.

    ``x`` is a numeric field (``n`` or ``p``); ``curve`` is ``ratio`` or ``structure``.
    A seed whose run made no request (possible at a small p, n and rounds) has no mean
    and is left out; a point where no seed made one is NaN, and :func:`no_requests`
    names it, so that tables and plots can say so instead of dropping it.
    """
    cells: dict[CurveKey, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        cells[_curve_key(row[curve])][number(row, x)].append(number(row, "mean_rounds"))
    return {
        c: {k: _mean_of_measured(v) for k, v in sorted(cells[c].items())}
        for c in sorted(cells, key=_order)
    }


def _mean_of_measured(values: Sequence[float]) -> float:
    measured = [v for v in values if not math.isnan(v)]
    return statistics.fmean(measured) if measured else math.nan


def no_requests(curves: Mapping[CurveKey, Mapping[float, float]]) -> list[tuple[CurveKey, float]]:
    """The (curve, x) points of :func:`mean_rounds` where no run made a request."""
    return [(c, x) for c, curve in curves.items() for x, v in curve.items() if math.isnan(v)]
