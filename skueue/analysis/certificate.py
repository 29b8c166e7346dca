"""The ``ord`` certificate check (:mod:`skueue.check.certificate`) as Spark jobs.

Theory of operation
-------------------
The Python checker replays the history in ``ord`` order against a deque.  A replay is
sequential, but whether each step succeeds depends only on two prefix counts: ``I``,
the inserts with a lower ord, and ``R``, the removals with a result and a lower ord.
Assuming every earlier step replayed correctly, the structure then holds ``h = I - R``
elements and:

- an empty removal is right iff ``h = 0``; a removal with a result needs ``h > 0``;
- queue: the ``j``-th removal (``j = R``) must return the ``j``-th insert's value;
- stack: label each push with the level it fills (``h + 1``) and each pop with the level
  it empties (``h``).  Since ``h`` moves by one, the events of one level alternate push,
  pop, push, ...; so a pop must return the value of the last push at its level.

Those conditions are per record and need no earlier step to have succeeded, and the
first record whose condition fails is exactly where the replay fails; so "no row
violates" is the Python checker's pass, with no sequential step left.  Program order,
real time and unique ords are prefix maxima too (of ``seq`` per process, of ``invoke``
and of ``ord`` overall).  Every prefix is a :func:`~skueue.analysis.scan.prefix_scan`,
so no step runs on one executor; one scan in ``ord`` order yields the counts, the
real-time bound and the duplicate ords together.

Unique inserted values are checked with the patterns' duplicates
(:func:`.patterns.duplicates`), which report for both families.  A queue with priority
levels takes its FIFO rule per level, and the rule across levels, from
:func:`.levels.certificate_levels`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from skueue.analysis.columns import CERTIFICATE, LIN, SC, text, union_all, violations
from skueue.analysis.scan import MAX, SUM, prefix_scan


def certificate_violations(
    recs: DataFrame, buckets: int, *, queues: bool, stacks: bool, drained: bool
) -> DataFrame:
    """Violations of the certificate; ``recs``: roles added, the hids to certify only.

    ``recs`` carries ``structure`` and ``drained`` per row; ``queues``, ``stacks`` and
    ``drained`` say whether any history needs that branch (each branch costs stages).
    """
    fam = CERTIFICATE
    out: list[DataFrame] = []

    # Program order: nothing with a lower ord may have a higher seq in the same process.
    po = prefix_scan(
        recs, parts=["hid", "process"], order=["ord", "seq"], buckets=buckets,
        aggs={"before": (MAX, F.struct("seq", "desc"))},
    ).where(F.col("before.seq") > F.col("seq"))
    out.append(violations(
        po, fam, "program order", SC, F.col("ord"),
        text("certificate breaks program order: ", F.col("before.desc"), " has a lower ord than ",
             F.col("desc"), " but a higher seq"),
    ))

    scanned = prefix_scan(
        recs, parts=["hid"], order=["ord", "process", "seq"], buckets=buckets,
        aggs={
            "ins_b": (SUM, F.col("ins").cast("long")),
            "rem_b": (SUM, F.col("rem").cast("long")),
            "latest": (MAX, F.struct("invoke", "desc")),
            "prev": (MAX, F.struct("ord", "desc")),
        },
    ).withColumn("h", F.col("ins_b") - F.col("rem_b"))

    # Sorted by ord, a repeated ord meets its twin as the largest ord before it.
    twin = scanned.where(F.col("prev.ord") == F.col("ord"))
    out.append(violations(
        twin, fam, "duplicate ord", SC, F.col("ord"),
        text("certificate: ord ", F.col("ord"), " is on two records, ", F.col("prev.desc"),
             " and ", F.col("desc")),
    ))
    late = scanned.where(F.col("response") < F.col("latest.invoke"))
    out.append(violations(
        late, fam, "real time", LIN, F.col("ord"),
        text("certificate breaks real time: ", F.col("desc"), " responded before ",
             F.col("latest.desc"), " was invoked, but has the higher ord"),
    ))
    false_empty = scanned.where(F.col("empty") & (F.col("h") > 0))
    out.append(violations(
        false_empty, fam, "replay", SC, F.col("ord"),
        text("certificate replay: ", F.col("desc"), " returned empty, but ", F.col("h"),
             " element(s) were in the ", F.col("structure")),
    ))
    from_nothing = scanned.where(F.col("rem") & (F.col("h") <= 0))
    out.append(violations(
        from_nothing, fam, "replay", SC, F.col("ord"),
        text("certificate replay: ", F.col("desc"), " returned '", F.col("value"), "', but the ",
             F.col("structure"), " was empty"),
    ))
    if queues:
        out.append(_fifo(scanned))
    if stacks:
        out.append(_lifo(scanned, buckets))
    if drained:
        left = (
            recs.where("drained")
            .groupBy("hid", "structure")
            .agg((F.sum(F.col("ins").cast("long")) - F.sum(F.col("rem").cast("long")))
                 .alias("left"))
            .where("left > 0")
        )
        out.append(violations(
            left, fam, "drained", SC, F.lit(float("inf")),
            text("certificate replay: the run drained, but ", F.col("left"), " element(s) "
                 "remain in the ", F.col("structure")),
        ))
    return union_all(out)


def _fifo(scanned: DataFrame) -> DataFrame:
    """Queue: the j-th removal takes the j-th insert (ranked by ``R`` and ``I``)."""
    rows = scanned.where((F.col("structure") == "queue") & ~F.col("prioritized")
                         & (F.col("ins") | (F.col("rem") & (F.col("h") > 0))))
    rank = F.when(F.col("ins"), F.col("ins_b")).otherwise(F.col("rem_b"))
    # One window per rank instead of a join: a rank holds one insert and at most one removal.
    fronts = rows.select(
        "*", F.max(F.when(F.col("ins"), F.col("value"))).over(
            Window.partitionBy("hid", rank)).alias("front")
    ).where(~F.col("ins") & (F.col("front") != F.col("value")))
    return violations(
        fronts, CERTIFICATE, "replay", SC, F.col("ord"),
        text("certificate replay: ", F.col("desc"), " returned '", F.col("value"), "', but '",
             F.col("front"), "' was at the front"),
    )


def _lifo(scanned: DataFrame, buckets: int) -> DataFrame:
    """Stack: a pop returns the last push at its level."""
    levels = scanned.where((F.col("structure") == "stack")
                           & (F.col("ins") | (F.col("rem") & (F.col("h") > 0)))).select(
        "hid", "ord", "ins", "value", "desc",
        F.when(F.col("ins"), F.col("h") + 1).otherwise(F.col("h")).alias("level"),
    )
    tops = prefix_scan(
        levels, parts=["hid", "level"], order=["ord"], buckets=buckets,
        aggs={"top": (MAX, F.when(F.col("ins"), F.struct("ord", "value")))},
    ).where(~F.col("ins") & (F.col("top.value") != F.col("value")))
    return violations(
        tops, CERTIFICATE, "replay", SC, F.col("ord"),
        text("certificate replay: ", F.col("desc"), " returned '", F.col("value"), "', but '",
             F.col("top.value"), "' was at the top"),
    )
