"""The PEI (popped element index, seed 000) of every queue in ``skueue analyze`` (issue 14).

Theory of operation
-------------------
:mod:`skueue.check.pei` defines the measure and its two readings: exact at each
dequeue's ``ord`` (:func:`~skueue.check.pei.pei_by_order`), when every record of the
queue carries one, else the lower bound every linearization must reach, from real time
alone (:func:`~skueue.check.pei.pei_observed`).  Both replay one queue in order, so here
each queue's enqueues and dequeues become one group (``groupBy`` history and queue,
``collect_list``), and one plain Python UDF call per group runs those pure functions and
returns the queue's :class:`~skueue.check.pei.PeiSummary`: one row per queue reaches the
driver, whatever the history's size.  This is the pattern of the lease checks
(:mod:`.leases`): no pandas, no Arrow.

A group is one task, so one queue must fit in one Python worker (about 400 bytes per
record).  A queue of more than ``spark.skueue.peiRecordsMax`` records
(:data:`PEI_RECORDS_MAX` by default) is not grouped.  Its PEI is still known when the
certificate proved the queue sequentially consistent: the replay in ``ord`` order that
passed gave every dequeue the oldest element of the most urgent level present, so every
PEI at ``ord`` is 0 (``by the certificate``).  Otherwise the report says it was not
measured, and why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from skueue.analysis.checks import DEFAULT_QUEUE_KEY, HistoryCheck
from skueue.check.history import QUEUE_OPS, Record
from skueue.check.pei import PeiSummary, pei_by_order, pei_observed

PEI_RECORDS_MAX: Final = 1_000_000
"""Default of :data:`PEI_RECORDS_MAX_CONF`: the largest queue one task measures."""
PEI_RECORDS_MAX_CONF: Final = "spark.skueue.peiRecordsMax"
BY_ORDER: Final = "exact at ord"
OBSERVED: Final = "observed lower bound"
BY_CERTIFICATE: Final = "exact at ord, by the certificate"
_FIELDS: Final = ("op", "value", "invoke", "response", "ord", "priority")
_SUMMARY: Final = T.StructType(
    [
        T.StructField("method", T.StringType()),
        T.StructField("count", T.LongType()),
        T.StructField("median", T.DoubleType()),
        T.StructField("mean", T.DoubleType()),
        T.StructField("p90", T.DoubleType()),
        T.StructField("p99", T.DoubleType()),
        T.StructField("max", T.LongType()),
    ]
)


def summarise_group(rows: Sequence[Any]) -> tuple[Any, ...]:
    """One queue's PEI summary from its rows (``_FIELDS``); runs on an executor."""
    records = [
        Record("-", 0, r[0], r[1], r[2], r[3], ord=r[4], priority=r[5] or None) for r in rows
    ]
    exact = all(r.ord is not None for r in records)
    s = PeiSummary.of(pei_by_order(records) if exact else pei_observed(records))
    return (BY_ORDER if exact else OBSERVED, s.count, s.median, s.mean, s.p90, s.p99, s.max)


def pei_per_queue(
    records: DataFrame, checks: Sequence[HistoryCheck], names: Mapping[int, str] | None = None
) -> list[dict[str, Any]]:
    """One row per queue (history, queue) with a queue's records: the history's id and
    name, the queue, its levels, the measure used and the summary, or ``note`` saying why
    it was not measured."""
    spark = records.sparkSession
    limit = int(spark.conf.get(PEI_RECORDS_MAX_CONF, None) or PEI_RECORDS_MAX)
    qkey = F.coalesce("queue", F.lit(DEFAULT_QUEUE_KEY)).alias("qkey")
    ops = records.where(F.col("op").isin(*sorted(QUEUE_OPS))).select("hid", qkey, *_FIELDS)
    sizes = {
        (int(r["hid"]), r["qkey"]): (int(r["n"]), int(r["removed"]))
        for r in ops.groupBy("hid", "qkey")
        .agg(
            F.count("*").alias("n"),
            F.sum(((F.col("op") == "dequeue") & F.col("value").isNotNull()).cast("long")).alias(
                "removed"
            ),
        )
        .collect()
    }
    small = sorted(k for k, (n, _) in sizes.items() if n <= limit)
    measured: dict[tuple[int, str], dict[str, Any]] = {}
    if small:
        keys = spark.createDataFrame(small, "hid int, qkey string")
        udf = F.udf(summarise_group, _SUMMARY, useArrow=False)
        grouped = (
            ops.join(F.broadcast(keys), ["hid", "qkey"])
            .groupBy("hid", "qkey")
            .agg(F.collect_list(F.struct(*_FIELDS)).alias("rows"))
        )
        for r in grouped.select("hid", "qkey", udf("rows").alias("s")).collect():
            measured[(int(r["hid"]), r["qkey"])] = r["s"].asDict()
    by_unit = {(c.hid, c.queue or DEFAULT_QUEUE_KEY): c for c in checks}
    out = []
    for key in sorted(sizes):
        n, removed = sizes[key]
        check = by_unit.get(key)
        row: dict[str, Any] = {
            "hid": key[0],
            "name": (names or {}).get(key[0], str(key[0])),
            "queue": key[1] or None,
            "records": n,
            "method": None,
            "levels": list(check.levels) if check is not None else [],
            "note": None,
            "count": 0,
            "median": math.nan,
            "mean": math.nan,
            "p90": math.nan,
            "p99": math.nan,
            "max": 0,
        }
        if key in measured:
            row.update(measured[key])
        elif check is not None and _certified_sc(check):
            row.update(
                method=BY_CERTIFICATE,
                count=removed,
                max=0,
                **dict.fromkeys(("median", "mean", "p90", "p99"), 0.0 if removed else math.nan),
            )
        else:
            row["note"] = (
                f"not measured: {n} records in one queue, over the "
                f"{limit} one task measures ({PEI_RECORDS_MAX_CONF})"
            )
        out.append(row)
    return out


def _certified_sc(check: HistoryCheck) -> bool:
    """The certificate's replay in ``ord`` order passed for this queue."""
    v = check.verdicts.get("sc")
    return v is not None and v.ok and v.method == "certificate"
