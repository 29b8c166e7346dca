"""The rules of a queue with priority levels (issue 14) as Spark jobs.

Theory of operation
-------------------
A queue with priority levels hands every dequeue the oldest element of the most urgent
level that holds any (:mod:`skueue.check.certificate`; the patterns' ``_priorities`` in
:mod:`skueue.check.patterns`).  A queue uses few levels (at most ``PRIORITIES_MAX``), so a
question about "the levels more urgent than ``c``" is asked once per level in use: each
row is copied to every *cut* (a level's rank among the levels its queue uses, 0 the most
urgent) that it counts for, and a prefix scan per ``(unit, cut)`` answers it.

Certificate, replayed in ``ord`` order; as in :mod:`.certificate`, each condition assumes
that every earlier step replayed correctly, so "no row violates" is the replay's pass:

- a removal's level is its value's insert's; a value that no record inserted fails;
- within its level the ``j``-th removal takes the ``j``-th insert (a prefix scan per
  ``(unit, level)`` counts both; one window per rank matches them, as
  :func:`.certificate._fifo` does for a queue of one level), and the level is not empty;
- no more urgent level holds an element: per cut ``c``, the running sum of +1 per insert
  and -1 per removal of the levels before ``c``, in ``ord`` order, is 0 at every removal
  of level ``c``.

The checks that count all levels together (a false empty, a removal from an empty queue,
what a drained run left) stay in :mod:`.certificate`, as does its FIFO rule for queues
without levels.

Pattern (real time, so it breaks linearizability only): a dequeue ``d`` of a level-``c``
element while an insert ``x`` of a more urgent level responded before ``d`` was invoked
and was never removed, or its removal was invoked after ``d`` responded.  Per cut, a
prefix maximum of when ``x``'s removal was invoked, over the inserts by response, read by
the dequeues of that level at their invocation (queries first on ties: strictly before).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from skueue.analysis.columns import CERTIFICATE, INF, LIN, PATTERNS, SC, text, union_all, violations
from skueue.analysis.scan import MAX, SUM, prefix_scan

_ORDER = ["ord", "process", "seq"]


def _rank(level: Column) -> Column:
    """A level's rank among the levels its unit uses (``levels``, sorted): 0 the most urgent."""
    return (F.array_position("levels", level) - 1).cast("int")


def _cuts(first: Column) -> Column:
    """The ranks from ``first`` to the unit's last level; empty past the last."""
    last = F.size("levels") - 1
    return F.when(first <= last, F.sequence(first, last)).otherwise(F.array().cast("array<int>"))


def certificate_levels(recs: DataFrame, buckets: int) -> DataFrame:
    """Certificate violations of the certified units with priority levels (see the module
    doc); ``recs``: roles added, ``lvl`` on inserts, ``levels`` per unit."""
    fam = CERTIFICATE
    of = recs.where("ins").groupBy("hid", "value").agg(F.max("lvl").alias("of"))
    rows = (
        recs.where("ins or rem")
        .join(of, ["hid", "value"], "left")
        .withColumn("lvl", F.coalesce("lvl", "of"))
    )
    out = [
        violations(
            rows.where(F.col("rem") & F.col("lvl").isNull()),
            fam,
            "replay",
            SC,
            F.col("ord"),
            text(
                "certificate replay: ",
                F.col("desc"),
                " returned '",
                F.col("value"),
                "', which no record inserted",
            ),
        )
    ]
    known = rows.where(F.col("lvl").isNotNull())

    scanned = prefix_scan(
        known,
        parts=["hid", "lvl"],
        order=_ORDER,
        buckets=buckets,
        aggs={"ins_l": (SUM, F.col("ins").cast("long")), "rem_l": (SUM, F.col("rem").cast("long"))},
    )
    rank = F.when(F.col("ins"), F.col("ins_l")).otherwise(F.col("rem_l"))
    fronts = scanned.select(
        "*",
        F.max(F.when(F.col("ins"), F.col("value")))
        .over(Window.partitionBy("hid", "lvl", rank))
        .alias("front"),
    ).where(F.col("rem") & (F.col("front") != F.col("value")))
    out.append(
        violations(
            fronts,
            fam,
            "replay",
            SC,
            F.col("ord"),
            text(
                "certificate replay: ",
                F.col("desc"),
                " returned '",
                F.col("value"),
                "', but '",
                F.col("front"),
                "' was at the front of priority ",
                F.col("lvl"),
            ),
        )
    )
    drained = scanned.where(F.col("rem") & (F.col("ins_l") <= F.col("rem_l")))
    out.append(
        violations(
            drained,
            fam,
            "replay",
            SC,
            F.col("ord"),
            text(
                "certificate replay: ",
                F.col("desc"),
                " returned '",
                F.col("value"),
                "', but priority ",
                F.col("lvl"),
                " was empty",
            ),
        )
    )

    ranked = known.select(*known.columns, _rank(F.col("lvl")).alias("q"))
    exploded = ranked.select("*", F.explode(_cuts(F.col("q"))).alias("cut"))
    # A row counts at the cuts after its own level; at its own, a removal asks.
    delta = F.when(F.col("cut") > F.col("q"), F.when(F.col("ins"), 1).otherwise(-1)).otherwise(0)
    urgent = prefix_scan(
        exploded,
        parts=["hid", "cut"],
        order=_ORDER,
        buckets=buckets,
        aggs={"above": (SUM, delta.cast("long"))},
    ).where(F.col("rem") & (F.col("cut") == F.col("q")) & (F.col("q") > 0) & (F.col("above") > 0))
    out.append(
        violations(
            urgent,
            fam,
            "replay",
            SC,
            F.col("ord"),
            text(
                "certificate replay: ",
                F.col("desc"),
                " returned '",
                F.col("value"),
                "' (priority ",
                F.col("lvl"),
                "), but ",
                F.col("above"),
                " element(s) of more urgent levels were in the queue",
            ),
        )
    )
    return union_all(out)


def less_urgent_first(xd: DataFrame, buckets: int) -> DataFrame:
    """The pattern across levels (see the module doc); ``xd``: inserts with their removals
    (:func:`.patterns.inserts_with_removals`), with ``lvl``, ``levels``, ``prioritized``."""
    xs = xd.where("prioritized").select("*", _rank(F.col("lvl")).alias("q"))
    late = F.when(F.col("missing"), F.lit(INF)).otherwise(F.col("d_invoke"))
    key = F.struct(late.alias("at"), F.col("x_desc").alias("x"), F.col("lvl").alias("lvl"))
    query = [("d_desc", "string"), ("d_seq", "long"), ("d_response", "double"), ("lvl", "long")]
    x_rows = xs.select(
        "hid",
        F.explode(_cuts(F.col("q") + 1)).alias("cut"),
        F.col("x_response").alias("k"),
        F.lit(1).alias("t"),
        key.alias("key"),
        *[F.lit(None).cast(kind).alias(f"q_{c}") for c, kind in query],
    )
    q_rows = xs.where(~F.col("missing") & (F.col("q") > 0)).select(
        "hid",
        F.col("q").alias("cut"),
        F.col("d_invoke").alias("k"),
        F.lit(0).alias("t"),
        F.lit(None).cast(xs.select(key).schema[0].dataType).alias("key"),
        *[F.col(c).alias(f"q_{c}") for c, _ in query],
    )
    found = prefix_scan(
        x_rows.unionByName(q_rows),
        parts=["hid", "cut"],
        order=["k", "t"],
        buckets=buckets,
        aggs={"best": (MAX, F.col("key"))},
    ).where((F.col("t") == 0) & (F.col("best.at") > F.col("q_d_response")))
    return violations(
        found,
        PATTERNS,
        "priority",
        LIN,
        F.col("q_d_seq"),
        text(
            "priority: ",
            F.col("q_d_desc"),
            " returned a level-",
            F.col("q_lvl"),
            " element while ",
            F.col("best.x"),
            " (level ",
            F.col("best.lvl"),
            ") had to be in the queue",
        ),
    )
