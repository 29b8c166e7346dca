"""Lease events in ``skueue analyze`` (issue 12, item 8): what the consumers recorded
(:mod:`skueue.check.leases`: ``lease``, ``ack``, ``nack``, ``close``), checked and
summarised on the executors.

- **Check**: per element, :func:`skueue.check.leases.element_problems` (acked twice,
  leased twice at once, delivery counts that do not rise), run by a grouped Python UDF;
  the consumers' close times (one per consumer: few) go to it from the driver.  Loss
  needs the inserts and what was left, which a file of lease events does not hold: the
  fault tests check that with :func:`~skueue.check.leases.check_leases`.
- **Summary**: counts of each event, acks answered True, False (late: the lease had
  ended) and never; how often elements were delivered (elements by their highest
  delivery count); and the lease latency, from a delivery to its ack or nack.
"""

from __future__ import annotations

from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType

from skueue.check.leases import EVENTS, LeaseEvent, element_problems

LEASE_SCHEMA: Final = (
    "consumer string, event string, invoke double, response double, value string, "
    "lease bigint, deliveries bigint, lease_s double, ok boolean"
)
FIELDS: Final = [f.split(" ")[0] for f in LEASE_SCHEMA.split(", ")]
PROBLEMS_SHOWN: Final = 20


def is_lease_event(j: Column) -> Column:
    """A parsed line that is a lease event (it names its consumer and a lease event)."""
    return j["consumer"].isNotNull() & j["event"].isin(*EVENTS) & j["op"].isNull()


def leases_of(lines: DataFrame) -> DataFrame:
    """The lease event lines (``file, text``) as columns."""
    parsed = lines.select(F.from_json("text", LEASE_SCHEMA).alias("e"))
    return parsed.select(*(F.col("e")[name].alias(name) for name in FIELDS))


def summarise(leases: DataFrame) -> dict[str, Any]:
    """Counts, deliveries and latency, and the problems found (at most PROBLEMS_SHOWN
    listed; ``problem_count`` says how many)."""
    counts = {r["event"]: int(r["count"]) for r in leases.groupBy("event").count().collect()}
    acks = leases.where(F.col("event") == "ack").agg(
        F.sum(F.when(F.col("ok"), 1).otherwise(0)).alias("acked"),
        F.sum(F.when(~F.col("ok"), 1).otherwise(0)).alias("late"),
        F.sum(F.when(F.col("ok").isNull(), 1).otherwise(0)).alias("unanswered"),
    ).first()
    deliveries = (
        leases.where(F.col("event") == "lease")
        .groupBy("value")
        .agg(F.max("deliveries").alias("deliveries"))
        .groupBy("deliveries")
        .count()
        .orderBy("deliveries")
        .collect()
    )
    problem_count, problems = _problems(leases)
    return {
        "events": {e: counts.get(e, 0) for e in EVENTS},
        "acks": {k: int(acks[k] or 0) if acks else 0 for k in ("acked", "late", "unanswered")},
        "elements_by_deliveries": [
            {"deliveries": int(r["deliveries"]), "elements": int(r["count"])} for r in deliveries
        ],
        "latency_ms": _latency(leases),
        "problem_count": problem_count,
        "problems": problems,
    }


def _latency(leases: DataFrame) -> dict[str, float] | None:
    """From a delivery to its consumer's ack or nack, in milliseconds."""
    delivered = leases.where(F.col("event") == "lease").select(
        "consumer", "lease", F.col("response").alias("delivered")
    )
    ended = (
        leases.where(F.col("event").isin("ack", "nack"))
        .groupBy("consumer", "lease")
        .agg(F.min("invoke").alias("ended"))
    )
    ms = (F.col("ended") - F.col("delivered")) * 1000
    row = (
        delivered.join(ended, ["consumer", "lease"])
        .agg(F.percentile_approx(ms, [0.5, 0.9, 0.99]).alias("p"), F.count("*").alias("n"))
        .first()
    )
    if row is None or not row["n"]:
        return None
    p50, p90, p99 = row["p"]
    return {"p50": round(p50, 3), "p90": round(p90, 3), "p99": round(p99, 3), "n": row["n"]}


def _problems(leases: DataFrame) -> tuple[int, list[str]]:
    """How many problems the elements' own events show, and the first few."""
    closed = {
        r["consumer"]: r["at"]
        for r in leases.where(F.col("event") == "close")
        .groupBy("consumer")
        .agg(F.min("invoke").alias("at"))
        .collect()
    }

    # useArrow=False: a plain Python UDF (pyspark would otherwise read the hints, which
    # are strings here, to choose an Arrow evaluation, and warn).
    @F.udf(returnType=ArrayType(StringType()), useArrow=False)
    def check(value: str, rows: list[Any]) -> list[str]:
        events = [LeaseEvent(**{k: r[k] for k in FIELDS}) for r in rows]
        return element_problems(value, events, closed)

    found = (
        leases.where(F.col("value").isNotNull())
        .groupBy("value")
        .agg(F.collect_list(F.struct(*FIELDS)).alias("rows"))
        .select(F.explode(check("value", "rows")).alias("problem"))
        .cache()
    )
    shown = [r["problem"] for r in found.orderBy("problem").limit(PROBLEMS_SHOWN).collect()]
    return found.count(), shown
