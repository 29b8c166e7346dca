"""Column expressions shared by the distributed checks.

A violation is one row of :data:`VIOLATION_COLUMNS`; every check returns a DataFrame of
them, and :mod:`.checks` unions them into one Spark job.  ``scope`` says which models a
violation breaks: ``"sc"`` rows break both sequential consistency and linearizability
(program order alone forces them); ``"lin"`` rows need real time and break only
linearizability.  So the verdict for ``sc`` looks at ``sc`` rows, the one for
``linearizable`` at all rows, and one pass decides both models.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from skueue.check.history import INSERT_OPS


def whole_or_float(x: float) -> float | int:
    """A time read back from Spark (a double): whole numbers as int again, so that the
    records' descriptions match those of the Python checkers."""
    return int(x) if float(x).is_integer() else float(x)

VIOLATION_COLUMNS: Final = ("hid", "family", "check", "scope", "key", "reason")
SC: Final = "sc"
LIN: Final = "lin"
CERTIFICATE: Final = "certificate"
PATTERNS: Final = "patterns"
INF: Final = float("inf")


def time_text(c: Column) -> Column:
    """A time as :meth:`Record.describe` prints it: ``5`` for a whole number, else ``5.25``."""
    whole = (c == F.floor(c)) & (F.abs(c) < 1e15)
    return F.when(whole, c.cast("long").cast("string")).otherwise(c.cast("string"))


def describe(prefix: str = "") -> Column:
    """The SQL twin of :meth:`skueue.check.history.Record.describe`, from columns ``prefix*``."""

    def c(name: str) -> Column:
        return F.col(f"{prefix}{name}")

    inserts = c("op").isin(*sorted(INSERT_OPS))
    what = F.when(inserts, F.concat(c("op"), F.lit("("), c("value"), F.lit(")"))).otherwise(
        F.concat(c("op"), F.lit(" -> "), F.coalesce(c("value"), F.lit("empty")))
    )
    extra = F.concat(
        F.when(c("position").isNotNull(), F.concat(F.lit(" pos="), c("position"))).otherwise(""),
        F.when(c("ord").isNotNull(), F.concat(F.lit(" ord="), c("ord"))).otherwise(""),
    )
    return F.concat(
        c("process"), F.lit("#"), c("seq"), F.lit(" "), what,
        F.lit(" ["), time_text(c("invoke")), F.lit(", "), time_text(c("response")), F.lit("]"),
        extra,
    )


def with_roles(records: DataFrame) -> DataFrame:
    """Add ``ins`` (enqueue/push), ``rem`` (removal with a result), ``empty`` and ``desc``."""
    ins = F.col("op").isin(*sorted(INSERT_OPS))
    return records.select(
        "*",
        ins.alias("ins"),
        (~ins & F.col("value").isNotNull()).alias("rem"),
        (~ins & F.col("value").isNull()).alias("empty"),
        describe().alias("desc"),
    )


def violations(
    df: DataFrame, family: str, check: str, scope: Column | str, key: Column, reason: Column
) -> DataFrame:
    """Shape ``df``'s rows as violations (``df`` must have ``hid``)."""
    scope_col = F.lit(scope) if isinstance(scope, str) else scope
    return df.select(
        F.col("hid"),
        F.lit(family).alias("family"),
        F.lit(check).alias("check"),
        scope_col.alias("scope"),
        key.cast("double").alias("key"),
        reason.alias("reason"),
    )


def text(*parts: Column | str) -> Column:
    """Concatenate literals and columns into a reason."""
    return F.concat(*[F.lit(p) if isinstance(p, str) else p.cast("string") for p in parts])


def union_all(frames: list[DataFrame]) -> DataFrame:
    """The rows of every frame (same columns by name); at least one frame."""
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out
