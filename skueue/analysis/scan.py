"""Two distributed primitives that the checks are built from.

Prefix scan
    The checkers of :mod:`skueue.check.checker` walk a history once in some order (``ord``,
    ``seq``, time) with a running count or maximum.  A Spark window with no partition
    would do that on one executor; :func:`prefix_scan` does it in two levels instead.
    Each part (a history, or a history and a process) is cut into buckets of its order
    key's range; one aggregation gives every bucket's total; a window over the small
    bucket table turns those into "everything in earlier buckets"; a window per bucket
    adds the running value within it.  Ties in the key fall into one bucket, so the
    order's tie-break columns decide them exactly as in a single sort.

Dyadic cover
    Some rules need the maximum over an index range ``[lo, hi)`` that differs per query,
    which no window frame can express.  Aligned blocks ``[b 2^L, (b+1) 2^L)`` of every
    level ``L`` are precomputed (:func:`explode_levels`); :func:`dyadic_cover` lists the
    at most two blocks per level whose union is exactly the range: a block belongs to the
    cover iff it lies inside the range and its parent does not, and only the first and
    the last aligned block inside the range can qualify.  A join then answers every
    query with at most ``2 log2 n`` rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

SUM: Final = "sum"
MAX: Final = "max"
_AGG: Final = {SUM: F.sum, MAX: F.max}


def prefix_scan(
    df: DataFrame,
    *,
    parts: Sequence[str],
    order: Sequence[str],
    aggs: Mapping[str, tuple[str, Column]],
    buckets: int,
) -> DataFrame:
    """Add one column per entry of ``aggs``: the aggregate over the *earlier* rows.

    ``aggs`` maps an output name to ``(SUM or MAX, input column)``.  Earlier means a
    smaller ``order`` tuple within the same ``parts`` values; the row itself is excluded.
    A sum over no rows is 0; a maximum over no rows (or over nulls only) is null.
    ``order[0]`` must be numeric; it decides the buckets.
    """
    key = order[0]
    inputs = [(name, kind, f"_in_{name}") for name, (kind, _) in aggs.items()]
    d = df.select("*", *[expr.alias(f"_in_{name}") for name, (_, expr) in aggs.items()])
    if buckets <= 1:
        # Small input: one sort per part is cheaper than the stages of the two levels.
        w = Window.partitionBy(*parts).orderBy(*order).rowsBetween(Window.unboundedPreceding, -1)
        return d.select(
            *df.columns, *[_finish(kind, None, _AGG[kind](col).over(w), name)
                           for name, kind, col in inputs]
        )
    bounds = d.groupBy(*parts).agg(F.min(key).alias("_lo"), F.max(key).alias("_hi"))
    width = (F.col("_hi") - F.col("_lo")) / buckets
    bucket = F.when(
        width > 0, F.least(F.lit(buckets - 1), F.floor((F.col(key) - F.col("_lo")) / width))
    ).otherwise(F.lit(0))
    d = d.join(bounds, list(parts)).withColumn("_b", bucket.cast("int")).drop("_lo", "_hi")

    totals = d.groupBy(*parts, "_b").agg(
        *[_AGG[kind](col).alias(col) for _, kind, col in inputs]
    )
    before = Window.partitionBy(*parts).orderBy("_b").rowsBetween(Window.unboundedPreceding, -1)
    totals = totals.select(
        *parts, "_b", *[_AGG[kind](col).over(before).alias(f"_p{col}") for _, kind, col in inputs]
    )
    within = (
        Window.partitionBy(*parts, "_b").orderBy(*order).rowsBetween(Window.unboundedPreceding, -1)
    )
    d = d.select("*", *[_AGG[kind](col).over(within).alias(f"_r{col}") for _, kind, col in inputs])
    d = d.join(totals, [*parts, "_b"])
    out = [
        _finish(kind, F.col(f"_p{col}"), F.col(f"_r{col}"), name) for name, kind, col in inputs
    ]
    return d.select(*df.columns, *out)


def _finish(kind: str, earlier: Column | None, running: Column, name: str) -> Column:
    if kind == SUM:
        total = F.coalesce(running, F.lit(0))
        if earlier is not None:
            total = F.coalesce(earlier, F.lit(0)) + total
        return total.alias(name)
    return (running if earlier is None else F.greatest(earlier, running)).alias(name)


ROWS_PER_BUCKET: Final = 20_000_000
"""Default of :data:`ROWS_PER_BUCKET_CONF`."""
ROWS_PER_BUCKET_CONF: Final = "spark.skueue.scanRowsPerBucket"
"""Spark setting: the most rows a scan sorts in one task before it goes two-level."""


def buckets_for(rows: int, partitions: int, rows_per_bucket: int = ROWS_PER_BUCKET) -> int:
    """Buckets for the scans over ``rows`` rows: 1 (one sort per part) up to
    ``rows_per_bucket``, else at least one per shuffle partition.

    Each stage costs Spark a fixed ~0.1 s, and the two-level scan adds four passes over
    its input; on two cores it was twice as slow as one sort per part even at a million
    rows (``bench/analyze_scale.py``).  It pays where one task cannot hold a part: many
    executors, or histories far beyond one machine's sort.  Lower the setting to use it
    sooner on a cluster.
    """
    if rows <= rows_per_bucket:
        return 1
    return max(partitions, math.ceil(rows / rows_per_bucket))


def levels_for(size_max: int) -> int:
    """The top level ``L`` with ``2^L >= size_max``, so no block above it fits a range."""
    return max(0, math.ceil(math.log2(max(1, size_max))))


def explode_levels(df: DataFrame, index: str, top: int) -> DataFrame:
    """One row per input row and level ``0..top``: adds ``level`` and ``block``."""
    exploded = df.select("*", F.explode(F.sequence(F.lit(0), F.lit(top))).alias("level"))
    return exploded.withColumn("block", F.expr(f"shiftright({index}, level)"))


def dyadic_cover(lo: str, hi: str, top: int) -> Column:
    """``array<struct<level, block>>``: aligned blocks whose union is ``[lo, hi)``.

    Needs ``0 <= lo`` and ``hi <= 2^top``; an empty range gives an empty array.
    """
    # SQL text, because the per-level arithmetic lives in a higher-order function.
    first = f"shiftright({lo} + shiftleft(1L, L) - 1, L)"
    last = f"shiftright({hi}, L) - 1"

    def inside(block: str, level: str) -> str:
        return (
            f"(shiftleft({block}, {level}) >= {lo} AND shiftleft({block} + 1, {level}) <= {hi})"
        )

    cond = f"{inside('s.block', 'L')} AND NOT {inside('shiftright(s.block, 1)', 'L + 1')}"
    return F.expr(
        f"array_distinct(flatten(transform(sequence(0, {top}), L -> filter("
        f"array(named_struct('level', L, 'block', {first}), "
        f"named_struct('level', L, 'block', {last})), s -> {cond}))))"
    )
