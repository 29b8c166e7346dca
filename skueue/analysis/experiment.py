"""The paper's Section VII sweeps (SPEC §9) as Spark tasks: one task per point.

Theory of operation
-------------------
A sweep is a list of :class:`~skueue.sim.sweep.Point` values.  ``spark.range(k,
numPartitions=k)`` makes exactly one partition, hence one task, per point; a Python UDF
runs :func:`~skueue.sim.sweep.run_point` for its point on whichever executor got
the task and returns the result row.  Points are numbered costliest first, and Spark
schedules partitions in order, so the longest runs start first and no core idles at the
end (the same rule as ``bench/paper_figures.py``'s process pool).

The simulator is deterministic given the point, so every number but ``wall_seconds``
equals the single-machine benchmark's for the same points and seeds.  Rows come back to
the driver (a few hundred at most), are merged into the Figure 2-4 tables and plots, and
are written as CSV (the benchmark's format, to diff) and Parquet.
"""

from __future__ import annotations

import csv
import math
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from skueue.core.ops import Structure
from skueue.sim.sweep import (
    ROW_FIELDS,
    Point,
    Row,
    fit_rounds_per_doubling,
    mean_rounds,
    number,
    run_point,
)

PROGRESS_POLL_S: Final = 5.0
"""How often ``skueue experiment`` asks Spark how many points are done."""
HOST_FIELD: Final = "host"
"""Extra column: the executor host that ran the point."""
# Digits kept in the CSVs: the same as bench/paper_figures.py, so the files diff cleanly.
DIGITS: Final = {"mean_rounds": 4, "entries_mean": 3, "messages_per_request": 3,
                 "wall_seconds": 2}
_TYPES: Final = {
    "structure": T.StringType(), "n": T.LongType(), "ratio": T.DoubleType(),
    "p": T.DoubleType(), "seed": T.LongType(), "requests": T.LongType(),
    "mean_rounds": T.DoubleType(), "p50": T.DoubleType(), "p99": T.DoubleType(),
    "tree_height": T.LongType(), "largest_batch": T.LongType(),
    "messages_per_request": T.DoubleType(), "entries_min": T.LongType(),
    "entries_mean": T.DoubleType(), "entries_max": T.LongType(), "wall_seconds": T.DoubleType(),
}
ROW_SCHEMA: Final = T.StructType(
    [T.StructField(f, _TYPES[f]) for f in ROW_FIELDS] + [T.StructField(HOST_FIELD, T.StringType())]
)


def _spec(p: Point) -> tuple[str, int, float, int, float | None, int]:
    return (p.structure.value, p.n, p.ratio, p.seed, p.per_node_probability, p.rounds)


def run_points(
    spark: SparkSession,
    points: Sequence[Point],
    progress: Callable[[int, int], None] | None = None,
) -> list[Row]:
    """Run every point as its own Spark task; rows in no particular order."""
    if not points:
        return []
    ordered = [_spec(p) for p in sorted(points, key=lambda p: p.cost, reverse=True)]

    def task(i: int) -> tuple[Any, ...]:
        structure, n, ratio, seed, prob, rounds = ordered[i]
        row = run_point(Structure(structure), n, ratio, seed, prob, rounds)
        return (*[row[f] for f in ROW_FIELDS], socket.gethostname())

    # useArrow=False: plain pickled rows (no pandas, no pyarrow), and no type-hint guessing.
    run_udf = F.udf(task, ROW_SCHEMA, useArrow=False).asNondeterministic()
    tasks = spark.range(0, len(ordered), 1, numPartitions=len(ordered))
    frame = tasks.select(run_udf("id").alias("r")).select("r.*")
    watcher = _Progress(spark, len(ordered), progress) if progress else None
    try:
        rows = frame.collect()
        if watcher is not None:
            watcher.done()
    finally:
        if watcher is not None:
            watcher.stop()
    return [r.asDict() for r in rows]


class _Progress:
    """Polls Spark's status tracker (classic sessions only) and reports finished tasks.

    The job's stage is found once among the active stages (the one with a task per
    point) and then followed by id: a finished stage leaves the active list, which read
    as "0 done" at the very end.  Counts only grow; :meth:`done` reports the total.
    """

    def __init__(self, spark: SparkSession, total: int, report: Callable[[int, int], None]):
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._report = report
        self._total = total
        self._stage: int | None = None
        self._last = -1
        self._tracker: Any = None
        self._thread: threading.Thread | None = None
        try:
            self._tracker = spark.sparkContext.statusTracker()
        except Exception:  # Spark Connect has no SparkContext: no progress, no harm.
            return
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(PROGRESS_POLL_S):
            self._poll()

    def _poll(self) -> None:
        if self._stage is None:
            for sid in self._tracker.getActiveStageIds():
                info = self._tracker.getStageInfo(sid)
                if info is not None and info.numTasks == self._total:
                    self._stage = sid
                    break
        if self._stage is None:
            return
        info = self._tracker.getStageInfo(self._stage)
        if info is not None:
            self._advance(info.numCompletedTasks)

    def _advance(self, done: int) -> None:
        with self._lock:
            if done > self._last and not (self._stop.is_set() and done < self._total):
                self._last = done
                self._report(done, self._total)

    def stop(self) -> None:
        """Stop polling (the job failed, or :meth:`done` was called)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(PROGRESS_POLL_S + 1.0)

    def done(self) -> None:
        """The job finished: stop polling and report every point done."""
        self.stop()
        if self._tracker is not None:
            self._advance(self._total)


# -- tables and files ----------------------------------------------------------------------


def sort_key(row: Mapping[str, object]) -> tuple[float, ...]:
    p = -1.0 if row["p"] is None else number(row, "p")
    return (number(row, "n"), p, number(row, "ratio"), number(row, "seed"),
            0.0 if row["structure"] == "queue" else 1.0)


def write_csv(rows: Iterable[Mapping[str, object]], path: Path) -> None:
    """The benchmark's CSV format (``bench/paper_figures.py``): same columns and digits."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=ROW_FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(k, row[k]) for k in ROW_FIELDS})


def _cell(key: str, value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float) and key in DIGITS:
        return round(value, DIGITS[key])
    return value


def size_table(rows: Sequence[Mapping[str, object]]) -> str:
    """Markdown: one line per n, one column per ratio (mean rounds), plus the tree height."""
    curves = mean_rounds(rows, "n", "ratio")
    ratios = list(curves)
    heights = {number(r, "n"): number(r, "tree_height") for r in rows}
    lines = ["| n | tree height | " + " | ".join(f"ratio {r:g}" for r in ratios) + " |",
             "|" + "---:|" * (len(ratios) + 2)]
    for n in sorted(heights):
        cells = " | ".join(f"{curves[r][n]:.1f}" if n in curves[r] else "" for r in ratios)
        lines.append(f"| {int(n)} | {int(heights[n])} | {cells} |")
    return "\n".join(lines)


def rate_table(rows: Sequence[Mapping[str, object]]) -> str:
    """Markdown: one line per request probability, one column per structure."""
    curves = mean_rounds(rows, "p", "structure")
    names = list(curves)
    ps = sorted({number(r, "p") for r in rows})
    lines = ["| p | " + " | ".join(str(s) for s in names) + " |",
             "|" + "---:|" * (len(names) + 1)]
    for p in ps:
        cells = " | ".join(f"{curves[s][p]:.1f}" if p in curves[s] else "" for s in names)
        lines.append(f"| {p:g} | {cells} |")
    return "\n".join(lines)


def slope_table(rows: Sequence[Mapping[str, object]]) -> str:
    """Markdown: fitted rounds per doubling of n, over all sizes and over the larger half."""
    ns = sorted({number(r, "n") for r in rows})
    if len(ns) < 2:
        return "(one size only: no slope)"
    big = ns[len(ns) // 2:]
    whole = fit_rounds_per_doubling(rows)
    upper = fit_rounds_per_doubling([r for r in rows if number(r, "n") in big])
    lines = [f"| ratio | rounds per doubling (n = {int(ns[0])}..{int(ns[-1])}) "
             f"| rounds per doubling (n = {int(big[0])}..{int(big[-1])}) |",
             "|---:|---:|---:|"]
    for ratio, slope in whole.items():
        lines.append(f"| {ratio:g} | {slope:.2f} | {upper.get(ratio, math.nan):.2f} |")
    return "\n".join(lines)


def largest_run(rows: Sequence[Mapping[str, object]]) -> Mapping[str, object] | None:
    """The point with the largest n (the longest run among those on ties)."""
    if not rows:
        return None
    return max(rows, key=lambda r: (number(r, "n"), number(r, "wall_seconds")))


def elapsed(started: float) -> float:
    return time.perf_counter() - started
