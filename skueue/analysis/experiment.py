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
are written as CSV (the benchmark's format, :mod:`skueue.sim.results`, to diff) and
Parquet.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from skueue.core.ops import Structure
from skueue.sim.sweep import ROW_FIELDS, Point, Row, number, run_point

PROGRESS_POLL_S: Final = 5.0
"""How often ``skueue experiment`` asks Spark how many points are done."""
HOST_FIELD: Final = "host"
"""Extra column: the executor host that ran the point."""
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
        try:
            while not self._stop.wait(PROGRESS_POLL_S):
                self._poll()
        except Exception:  # noqa: BLE001 - the context stopped under us (Ctrl-C): no progress left
            return

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


# -- summaries ----------------------------------------------------------------------------


def largest_run(rows: Sequence[Mapping[str, object]]) -> Mapping[str, object] | None:
    """The point with the largest n (the longest run among those on ties)."""
    if not rows:
        return None
    return max(rows, key=lambda r: (number(r, "n"), number(r, "wall_seconds")))
