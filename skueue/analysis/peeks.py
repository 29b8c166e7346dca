"""Peeks in ``skueue analyze`` (issue 14): each must have seen the head at its ``ord``.

Theory of operation
-------------------
A peek removes nothing, so the distributed certificate and patterns, which reason about
what each removal took, leave peeks out (as the local patterns do).  They are checked
here instead, on every queue whose records all carry an ``ord`` and that has peeks: the
queue's records become one group (``groupBy`` unit, ``collect_list``), and one plain
Python UDF call per group runs :func:`skueue.check.certificate.peek_violations`, the pure
replay in ``ord`` order, returning how many peeks saw the wrong head and the first.  Only
the units with peeks are grouped (the checks' overview knows which), so a history
without any costs nothing here.

One group is one task: a queue of more than ``spark.skueue.peekRecordsMax`` records
(:data:`PEEK_RECORDS_MAX` by default) is not grouped, and its peeks are not checked.
Without ``ord``, peeks are checked only by the exact search of small histories.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from skueue.analysis.columns import whole_or_float
from skueue.check.certificate import peek_violations
from skueue.check.history import QUEUE_OPS, Record

PEEK_RECORDS_MAX: Final = 1_000_000
"""Default of :data:`PEEK_RECORDS_MAX_CONF`: the largest queue one task checks."""
PEEK_RECORDS_MAX_CONF: Final = "spark.skueue.peekRecordsMax"
_FIELDS: Final = ("process", "seq", "op", "value", "invoke", "response", "ord", "priority")
_RESULT: Final = T.StructType(
    [T.StructField("count", T.LongType()), T.StructField("example", T.StringType())]
)


def check_group(rows: Sequence[Any]) -> tuple[int, str | None]:
    """One queue's peeks from its rows (``_FIELDS``); runs on an executor."""
    records = [
        Record(r[0], r[1], r[2], r[3], whole_or_float(r[4]), whole_or_float(r[5]), ord=r[6],
               priority=r[7] or None)
        for r in rows
    ]  # fmt: skip
    found = peek_violations(records)
    return len(found), (found[0] if found else None)


def peek_findings(records: DataFrame, units: Sequence[int]) -> dict[int, tuple[int, str]]:
    """Per unit (``hid``) among ``units`` (certified queues with peeks) whose peeks are
    wrong: how many, and the first.  A unit too large to group is left out (see the
    module doc)."""
    if not units:
        return {}
    spark = records.sparkSession
    limit = int(spark.conf.get(PEEK_RECORDS_MAX_CONF, None) or PEEK_RECORDS_MAX)
    ops = records.where(F.col("hid").isin(sorted(units)) & F.col("op").isin(*sorted(QUEUE_OPS)))
    sizes = {int(r["hid"]): int(r["n"]) for r in ops.groupBy("hid").count()
             .withColumnRenamed("count", "n").collect()}  # fmt: skip
    out: dict[int, tuple[int, str]] = {}
    small = sorted(hid for hid, n in sizes.items() if n <= limit)
    if small:
        udf = F.udf(check_group, _RESULT, useArrow=False)
        grouped = (
            ops.where(F.col("hid").isin(small))
            .groupBy("hid")
            .agg(F.collect_list(F.struct(*_FIELDS)).alias("rows"))
        )
        for r in grouped.select("hid", udf("rows").alias("r")).collect():
            if r["r"]["count"]:
                out[int(r["hid"])] = (int(r["r"]["count"]), str(r["r"]["example"]))
    return out
