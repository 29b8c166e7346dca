"""The two LIFO rules of :mod:`skueue.check.patterns` as Spark jobs.

Theory of operation
-------------------
Both rules look for ``push(x) => push(y) => pop(x)`` where ``y`` is never popped or is
popped by an op forced after ``pop(x)``.  The ``y`` candidates form a contiguous range of
an index, different for every pop, so each rule is a range maximum:

- program order: the pushes of the popping process ``p`` indexed by ``seq``; the range is
  the pushes after ``x`` and before ``pop(x)``.  Three maxima over it: "never popped",
  ``seq`` of ``pop(y)`` when ``p`` popped it, ``invoke`` of ``pop(y)`` (real time);
- real time: all pushes indexed by ``invoke``; the range is the pushes invoked after
  ``x`` responded.  Of those, only pushes that responded before ``pop(x)`` was invoked
  count: a prefix in response order within each block of the cover, so the blocks are
  scanned in time order together with the queries.

Ranges become at most two aligned blocks per level (:func:`~.scan.dyadic_cover`); every
push is exploded into its block at each level, which costs ``log2 n`` rows per push: the
price of answering arbitrary ranges without a sequential pass.  Only stack histories pay
it.  Each query is an insert-with-removal row of :func:`.patterns.inserts_with_removals`
(``x`` and ``pop(x)``), and block maxima are windows over the union of pushes and
queries, so no step joins a result back to its input: every stage costs Spark a fixed
overhead, which dominates small histories.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from skueue.analysis.columns import INF, LIN, PATTERNS, SC, text, violations
from skueue.analysis.scan import MAX, SUM, dyadic_cover, explode_levels, prefix_scan

FAM = PATTERNS
_QUERY = ("q_seq", "q_desc", "q_xdesc", "q_response", "q_invoke")


def _lifo(why: str, how: Column) -> Column:
    return text("LIFO: x = ", F.col("q_xdesc"), " is pushed before y = ", F.col("y"),
                ", which is pushed before ", F.col("q_desc"), f" pops x ({why}), so y must be "
                "popped first, but ", how)


def _popped_by(best: str, why: str) -> Column:
    return text("y is popped only by ", F.col(f"{best}.py"), f", forced after ({why})")


def _query_fields(present: bool) -> list[Column]:
    """``pop(x)`` and ``x`` as query fields, or typed nulls on the rows of other pushes."""
    src = {"q_seq": ("d_seq", "long"), "q_desc": ("d_desc", "string"),
           "q_xdesc": ("x_desc", "string"), "q_response": ("d_response", "double"),
           "q_invoke": ("d_invoke", "double")}
    return [
        (F.col(col) if present else F.lit(None).cast(typ)).alias(name)
        for name, (col, typ) in src.items()
    ]


def _key(at: Column) -> Column:
    """What a candidate ``y`` contributes: when it is popped, and the two descriptions."""
    return F.struct(at.cast("double").alias("at"), F.col("x_desc").alias("y"),
                    F.col("d_desc").alias("py"))


def lifo_violations(xd: DataFrame, top: int, buckets: int) -> DataFrame:
    """LIFO violations of the stack histories.

    ``xd``: :func:`~.patterns.inserts_with_removals` (with ``structure``); ``top``: a
    level with ``2^top`` at least the pushes of any one history.
    """
    pushes = xd.where(F.col("structure") == "stack")
    return _program_order(pushes, top, buckets).unionByName(_real_time(pushes, top, buckets))


def _program_order(pushes: DataFrame, top: int, buckets: int) -> DataFrame:
    why = "program order"
    own_pop = F.col("d_process") == F.col("x_process")
    measures = [
        F.when(F.col("missing"), F.col("x_desc")).alias("never"),
        F.when(own_pop, _key(F.col("d_seq"))).alias("own"),
        F.when(~F.col("missing"), _key(F.col("d_invoke"))).alias("late"),
    ]
    nulls = [F.lit(None).cast("string").alias("never"),
             F.lit(None).cast(pushes.select(measures[1]).schema[0].dataType).alias("own"),
             F.lit(None).cast(pushes.select(measures[2]).schema[0].dataType).alias("late")]
    # Each push of p, and each pop by p of a push by p (a query), in p's program order.
    rows = pushes.select("hid", F.col("x_process").alias("p"), F.col("x_seq").alias("k"),
                         F.lit(1).alias("push"), "value", *measures, *_query_fields(False)
                         ).unionByName(
        pushes.where(own_pop).select("hid", F.col("x_process").alias("p"),
                                     F.col("d_seq").alias("k"), F.lit(0).alias("push"), "value",
                                     *nulls, *_query_fields(True)))
    counted = prefix_scan(rows, parts=["hid", "p"], order=["k"], buckets=buckets,
                          aggs={"idx": (SUM, F.col("push").cast("long"))})
    # A query's range: from just after x (its value's push) up to the pushes before it.
    by_value = Window.partitionBy("hid", "p", "value")
    counted = counted.withColumn("lo", F.max(F.when(F.col("push") == 1, F.col("idx") + 1))
                                 .over(by_value))
    push_rows = explode_levels(counted.where("push = 1"), "idx", top)
    queries = counted.where((F.col("push") == 0) & (F.col("lo") < F.col("idx")))
    query_rows = queries.select(
        "*", F.explode(dyadic_cover("lo", "idx", top)).alias("c")
    ).select(*queries.columns, F.col("c.level").alias("level"), F.col("c.block").alias("block"))
    block = Window.partitionBy("hid", "p", "level", "block")
    both = push_rows.select(*query_rows.columns).unionByName(query_rows)
    best = (
        both.select("hid", "p", "push", *_QUERY,
                    *[F.max(m).over(block).alias(m) for m in ("never", "own", "late")])
        .where("push = 0")
        .groupBy("hid", "p", *_QUERY)
        .agg(*[F.max(m).alias(m) for m in ("never", "own", "late")])
    )
    never = best.where(F.col("never").isNotNull()).withColumn("y", F.col("never"))
    own = best.where(F.col("own.at") > F.col("q_seq")).withColumn("y", F.col("own.y"))
    late = best.where(F.col("late.at") > F.col("q_response")).withColumn("y", F.col("late.y"))
    return (
        violations(never, FAM, "LIFO", SC, F.col("q_seq"), _lifo(why, F.lit("y is never popped")))
        .unionByName(violations(own, FAM, "LIFO", SC, F.col("q_seq"),
                                _lifo(why, _popped_by("own", "program order"))))
        .unionByName(violations(late, FAM, "LIFO", LIN, F.col("q_seq"),
                                _lifo(why, _popped_by("late", "real time"))))
    )


def _real_time(pushes: DataFrame, top: int, buckets: int) -> DataFrame:
    why = "real time"
    key = _key(F.when(F.col("missing"), F.lit(INF)).otherwise(F.col("d_invoke")))
    # Pushes by invoke (t = 0), and per query the pushes invoked no later than x responded
    # (t = 1 sorts it after pushes invoked at that very time).
    rows = pushes.select("hid", F.col("x_invoke").alias("k"), F.lit(0).alias("t"),
                         F.col("value").alias("tie"), F.lit(1).alias("push"),
                         F.col("x_response").alias("time"), key.alias("key"),
                         *_query_fields(False)).unionByName(
        pushes.where(~F.col("missing")).select(
            "hid", F.col("x_response").alias("k"), F.lit(1).alias("t"), F.lit("").alias("tie"),
            F.lit(0).alias("push"), F.col("d_invoke").alias("time"),
            F.lit(None).cast(pushes.select(key).schema[0].dataType).alias("key"),
            *_query_fields(True)))
    counted = prefix_scan(rows, parts=["hid"], order=["k", "t", "tie"], buckets=buckets,
                          aggs={"idx": (SUM, F.col("push").cast("long"))})
    counted = counted.withColumn("hi", F.sum("push").over(Window.partitionBy("hid")))
    push_rows = explode_levels(counted.where("push = 1"), "idx", top)
    queries = counted.where((F.col("push") == 0) & (F.col("idx") < F.col("hi")))
    query_rows = queries.select(
        "*", F.explode(dyadic_cover("idx", "hi", top)).alias("c")
    ).select(*queries.columns, F.col("c.level").alias("level"), F.col("c.block").alias("block"))
    cols = ["hid", "level", "block", "time", "push", "key", *_QUERY]
    # Pushes that responded strictly before pop(x) was invoked: queries sort first on ties.
    scanned = prefix_scan(
        push_rows.select(*cols).unionByName(query_rows.select(*cols)),
        parts=["hid", "level", "block"], order=["time", "push"], buckets=buckets,
        aggs={"best": (MAX, F.col("key"))},
    )
    found = (
        scanned.where("push = 0")
        .groupBy("hid", *_QUERY)
        .agg(F.max("best").alias("best"))
        .where(F.col("best.at") > F.col("q_response"))
        .withColumn("y", F.col("best.y"))
    )
    how = F.when(F.col("best.at") == INF, F.lit("y is never popped")).otherwise(
        _popped_by("best", "real time"))
    return violations(found, FAM, "LIFO", LIN, F.col("q_seq"), _lifo(why, how))
