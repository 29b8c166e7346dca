"""The sound violation patterns of :mod:`skueue.check.patterns` as Spark jobs.

Theory of operation
-------------------
Fresh, duplicate, causality and lost are joins and aggregations by value.  False empty
and FIFO (the Python checker's ``_Earlier`` aggregate) ask, for a *query* made of an
anchor op and a target op, whether some insert ``x`` forced before the anchor is never
removed, or is removed only by an op forced after the target.  "Forced before" is
program order in one sweep and real time in another; in each the set of such inserts is
a prefix of a sorted order, so the question becomes three prefix maxima over the union of
inserts and queries, sorted with queries first on ties (the set is strict):

- "some ``x`` is never removed": a flag;
- real time: the largest ``invoke`` of ``rem(x)``, against the target's ``response``;
- program order: per removing process ``q``, the largest ``seq`` of ``rem(x)``, against the
  target's ``seq`` when the target is ``q``'s; the scan is partitioned by ``q`` as well.

The LIFO rules need range maxima, not prefixes: :mod:`.lifo`.

In a queue with priority levels FIFO and false empty hold within each level: every sweep
is partitioned by the level (``lvl``, the insert's; 0 in a queue without levels), an
empty removal is a query in every level its queue uses, and a finding names its level
(``at priority 1: ...``), as the Python checker's does.  The rule across levels is
:func:`.levels.less_urgent_first`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from skueue.analysis.columns import CERTIFICATE, LIN, PATTERNS, SC, text, union_all, violations
from skueue.analysis.scan import MAX, prefix_scan

FAM = PATTERNS


_FIELDS = ("process", "seq", "invoke", "response", "desc")


def pairs(recs: DataFrame) -> DataFrame:
    """Every insert ``x_*`` with its removal ``d_*`` by value; either side may be missing.

    A row with no insert is a removal of a value never inserted (fresh); a row with no
    removal is an insert still in the structure.  Callers cache it: every rule reads it.
    """
    # Joined by column names: both sides come from ``recs``, and Spark's self-join column
    # references would be ambiguous.
    x = recs.where("ins").select(
        "hid", "value", "structure", "drained", "lvl", "prioritized", "levels",
        *[F.col(c).alias(f"x_{c}") for c in _FIELDS]
    )
    d = recs.where("rem").select("hid", "value", *[F.col(c).alias(f"d_{c}") for c in _FIELDS])
    joined = x.join(d, ["hid", "value"], "full")
    return joined.select(
        "*", F.col("value").alias("x_value"), F.col("d_process").isNull().alias("missing")
    )


def inserts_with_removals(paired: DataFrame) -> DataFrame:
    """The rows of :func:`pairs` that have an insert."""
    return paired.where(F.col("x_process").isNotNull())


def duplicates(recs: DataFrame, *, certificate: bool) -> DataFrame:
    """Values inserted twice or removed twice (one aggregation for both families).

    An insert duplicate breaks the certificate's replay too, so with ``certificate`` its
    rows are repeated for that family on the certified histories.
    """
    dups = (
        recs.where("ins or rem")
        .groupBy("hid", "ins", "value")
        .agg(F.count("*").alias("n"),
             F.sort_array(F.collect_list(F.struct("process", "seq", "desc"))).alias("ds"),
             F.first("certified").alias("certified"))
        .where("n > 1")
    )
    role = F.when(F.col("ins"), "inserted").otherwise("removed")
    tail = F.when(F.col("ins"), " (elements must be unique)").otherwise("")
    reason = text("duplicate: '", F.col("value"), "' ", role, " twice, by ",
                  F.col("ds")[0]["desc"], " and ", F.col("ds")[1]["desc"], tail)
    out = violations(dups, FAM, "duplicate", SC, F.lit(0.0), reason)
    if certificate:
        cert = dups.where(F.col("ins") & F.col("certified"))
        out = out.unionByName(violations(cert, CERTIFICATE, "duplicate", SC, F.lit(0.0), reason))
    return out


def pattern_violations(
    recs: DataFrame, paired: DataFrame, buckets: int, *, queues: bool, drained: bool
) -> DataFrame:
    """Violations found by the patterns (except duplicates and LIFO).

    ``recs``: roles added, with ``structure`` and ``drained``; ``paired``: its
    :func:`pairs`; ``queues``/``drained``: whether any history needs those branches.
    """
    out: list[DataFrame] = []
    fresh = paired.where(F.col("x_process").isNull())
    out.append(violations(
        fresh, FAM, "fresh", SC, F.col("d_seq"),
        text("fresh: ", F.col("d_desc"), " returned '", F.col("value"),
             "', which was never inserted"),
    ))

    xd = inserts_with_removals(paired)
    found = xd.where(~F.col("missing"))
    po = (F.col("d_process") == F.col("x_process")) & (F.col("d_seq") < F.col("x_seq"))
    rt = F.col("d_response") < F.col("x_invoke")
    causal = found.where(po | rt)
    out.append(violations(
        causal, FAM, "causality", F.when(po, SC).otherwise(LIN), F.col("d_seq"),
        text(F.when(po, "program order").otherwise("real time"), ": ", F.col("d_desc"),
             " returned '", F.col("x_value"), "' before ", F.col("x_desc"), " inserted it"),
    ))
    if drained:
        lost = xd.where(F.col("drained") & F.col("missing"))
        out.append(violations(
            lost, FAM, "lost", SC, F.col("x_seq"),
            text("lost: ", F.col("x_desc"), " was never removed, but the run drained"),
        ))

    queries = _queries(recs, xd, queues)
    out += _program_order_sweep(xd, queries, buckets)
    out += _real_time_sweep(xd, queries, buckets)
    return union_all(out)


def _queries(recs: DataFrame, xd: DataFrame, queues: bool) -> DataFrame:
    """Anchor ``a_*`` and target ``t_*`` of every false-empty and FIFO query.

    An empty removal is its own anchor and target; in a queue, an insert ``y`` that was
    removed anchors a FIFO query whose target is ``rem(y)``.
    """
    cols = _FIELDS
    # An empty removal asks every level of its queue (one level, 0, without priorities).
    empties = recs.where("empty").drop("lvl").withColumn("lvl", F.explode("levels")).select(
        "hid", "lvl", _level_prefix(), F.lit("false empty").alias("rule"),
        *[F.col(c).alias(f"a_{c}") for c in cols], *[F.col(c).alias(f"t_{c}") for c in cols],
    )
    if not queues:
        return empties
    fifo = xd.where(~F.col("missing") & (F.col("structure") == "queue")).select(
        "hid", "lvl", _level_prefix(), F.lit("FIFO").alias("rule"),
        *[F.col(f"x_{c}").alias(f"a_{c}") for c in cols],
        *[F.col(f"d_{c}").alias(f"t_{c}") for c in cols],
    )
    return empties.unionByName(fifo)


def _level_prefix() -> Column:
    """``at priority L: `` before a finding in a queue with priority levels."""
    return F.when(F.col("prioritized"), text("at priority ", F.col("lvl"), ": ")
                  ).otherwise(F.lit("")).alias("pre")


def _report(why: str, how: Column) -> Column:
    """The Python checker's wording for a false empty or a FIFO violation."""
    empty = text("false empty: ", F.col("t_desc"), " returned empty, but an insert forced "
                 f"before it ({why}) is still in: ", how)
    fifo = text("FIFO: ", F.col("t_desc"), " dequeued ", F.col("a_desc"), ", but an element "
                f"enqueued before that ({why}) is still ahead of it: ", how)
    return F.concat(F.col("pre"), F.when(F.col("rule") == "false empty", empty).otherwise(fifo))


def _never(x_desc: Column) -> Column:
    return text("", x_desc, " is never removed")


def _late(best: str, why: str) -> Column:
    return text("", F.col(f"{best}.x"), " is removed only by ", F.col(f"{best}.d"),
                f", which is forced after it ({why})")


def _union_rows(xd: DataFrame, queries: DataFrame, part: Column, key: Column,
                q_part: Column, q_key: Column, x_filter: Column | None = None) -> DataFrame:
    """Inserts (``t = 1``) and queries (``t = 0``) in one frame: ``hid, part, k, t, ...``."""
    xs = xd if x_filter is None else xd.where(x_filter)
    x_rows = xs.select(
        "hid", "lvl", part.alias("part"), key.alias("k"), F.lit(1).alias("t"), "missing",
        "x_desc", "x_response", "d_desc", "d_invoke", "d_seq", F.lit(None).alias("rule"),
        F.lit(None).cast("string").alias("pre"),
        *[F.lit(None).cast(t).alias(f"{s}_{c}") for s in ("a", "t")
          for c, t in (("process", "string"), ("seq", "long"), ("invoke", "double"),
                       ("response", "double"), ("desc", "string"))],
    )
    q_rows = queries.select(
        "hid", "lvl", q_part.alias("part"), q_key.alias("k"), F.lit(0).alias("t"), "pre",
        F.lit(None).cast("boolean").alias("missing"),
        F.lit(None).cast("string").alias("x_desc"), F.lit(None).cast("double").alias("x_response"),
        F.lit(None).cast("string").alias("d_desc"), F.lit(None).cast("double").alias("d_invoke"),
        F.lit(None).cast("long").alias("d_seq"), "rule",
        *[F.col(f"{s}_{c}") for s in ("a", "t")
          for c in ("process", "seq", "invoke", "response", "desc")],
    )
    return x_rows.unionByName(q_rows)


def _program_order_sweep(xd: DataFrame, queries: DataFrame, buckets: int) -> list[DataFrame]:
    """Inserts forced before the anchor by program order: the anchor process's earlier ones."""
    why = "program order"
    is_x = F.col("t") == 1
    rows = _union_rows(xd, queries, F.col("x_process"), F.col("x_seq"),
                       F.col("a_process"), F.col("a_seq"))
    scanned = prefix_scan(
        rows, parts=["hid", "lvl", "part"], order=["k", "t"], buckets=buckets,
        aggs={
            "never": (MAX, F.when(is_x & F.col("missing"), F.col("x_desc"))),
            "late": (MAX, F.when(is_x & ~F.col("missing"),
                                 F.struct(F.col("d_invoke").alias("at"), F.col("x_desc").alias("x"),
                                          F.col("d_desc").alias("d")))),
        },
    ).where(F.col("t") == 0)
    out = [
        violations(scanned.where(F.col("never").isNotNull()), FAM, "false empty/FIFO", SC,
                   F.col("t_seq"), _report(why, _never(F.col("never")))),
        violations(scanned.where(F.col("late.at") > F.col("t_response")), FAM,
                   "false empty/FIFO", LIN, F.col("t_seq"),
                   _report(why, _late("late", "real time"))),
    ]
    # Removed by the target's own process, later in its program order.
    by_remover = _union_rows(
        xd, queries, F.concat_ws("\u0000", "x_process", "d_process"), F.col("x_seq"),
        F.concat_ws("\u0000", "a_process", "t_process"), F.col("a_seq"), ~F.col("missing"),
    )
    own = prefix_scan(
        by_remover, parts=["hid", "lvl", "part"], order=["k", "t"], buckets=buckets,
        aggs={"late": (MAX, F.when(is_x, F.struct(F.col("d_seq").alias("at"),
                                                  F.col("x_desc").alias("x"),
                                                  F.col("d_desc").alias("d"))))},
    ).where((F.col("t") == 0) & (F.col("late.at") > F.col("t_seq")))
    out.append(violations(own, FAM, "false empty/FIFO", SC, F.col("t_seq"),
                          _report(why, _late("late", "program order"))))
    return out


def _real_time_sweep(xd: DataFrame, queries: DataFrame, buckets: int) -> list[DataFrame]:
    """Inserts forced before the anchor by real time: those that responded before it began."""
    why = "real time"
    is_x = F.col("t") == 1
    never = xd.where("missing").groupBy("hid", "lvl").agg(
        F.min(F.struct("x_response", "x_desc")).alias("never")
    )
    missed = queries.join(never, ["hid", "lvl"]).where(
        F.col("never.x_response") < F.col("a_invoke"))
    out = [violations(missed, FAM, "false empty/FIFO", LIN, F.col("t_seq"),
                      _report(why, _never(F.col("never.x_desc"))))]
    rows = _union_rows(xd, queries, F.lit(""), F.col("x_response"), F.lit(""), F.col("a_invoke"),
                       ~F.col("missing"))
    late = prefix_scan(
        rows, parts=["hid", "lvl"], order=["k", "t"], buckets=buckets,
        aggs={"late": (MAX, F.when(is_x, F.struct(F.col("d_invoke").alias("at"),
                                                  F.col("x_desc").alias("x"),
                                                  F.col("d_desc").alias("d"))))},
    ).where((F.col("t") == 0) & (F.col("late.at") > F.col("t_response")))
    out.append(violations(late, FAM, "false empty/FIFO", LIN, F.col("t_seq"),
                          _report(why, _late("late", "real time"))))
    by_remover = _union_rows(xd, queries, F.col("d_process"), F.col("x_response"),
                             F.col("t_process"), F.col("a_invoke"), ~F.col("missing"))
    own = prefix_scan(
        by_remover, parts=["hid", "lvl", "part"], order=["k", "t"], buckets=buckets,
        aggs={"late": (MAX, F.when(is_x, F.struct(F.col("d_seq").alias("at"),
                                                  F.col("x_desc").alias("x"),
                                                  F.col("d_desc").alias("d"))))},
    ).where((F.col("t") == 0) & (F.col("late.at") > F.col("t_seq")))
    out.append(violations(own, FAM, "false empty/FIFO", LIN, F.col("t_seq"),
                          _report(why, _late("late", "program order"))))
    return out
