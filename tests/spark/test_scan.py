"""The two distributed primitives against brute force: both paths of the prefix scan, and
the dyadic cover of index ranges."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from skueue.analysis.scan import MAX, SUM, dyadic_cover, levels_for, prefix_scan

pytestmark = pytest.mark.spark


def test_prefix_scan_one_and_two_levels_equal_a_sequential_pass(spark: SparkSession) -> None:
    rng = random.Random(5)
    # Ties in the key (k) are broken by the second order column; parts of unequal sizes.
    rows = [(rng.randrange(3), float(rng.randrange(40)), i, rng.randrange(100))
            for i in range(300)]
    df = spark.createDataFrame(rows, "part int, k double, tie int, v long")
    aggs = {"total": (SUM, F.col("v")), "top": (MAX, F.col("v"))}
    expected: dict[int, tuple[int, int | None]] = {}
    for part in range(3):
        mine = sorted((r for r in rows if r[0] == part), key=lambda r: (r[1], r[2]))
        total: int = 0
        top: int | None = None
        for r in mine:
            expected[r[2]] = (total, top)
            total += r[3]
            top = r[3] if top is None else max(top, r[3])
    for buckets in (1, 4, 7):
        got = {
            r["tie"]: (r["total"], r["top"])
            for r in prefix_scan(df, parts=["part"], order=["k", "tie"], aggs=aggs,
                                 buckets=buckets).collect()
        }
        assert got == expected, f"buckets={buckets}"


def test_dyadic_cover_is_exactly_the_range(spark: SparkSession) -> None:
    n = 37
    top = levels_for(n)
    ranges = [(lo, hi) for lo in range(n + 1) for hi in range(lo, n + 1)]
    df = spark.createDataFrame(ranges, "lo long, hi long")
    for r in df.select("lo", "hi", dyadic_cover("lo", "hi", top).alias("c")).collect():
        covered: list[int] = []
        for block in r["c"]:
            size = 1 << block["level"]
            covered += range(block["block"] * size, (block["block"] + 1) * size)
        assert sorted(covered) == list(range(r["lo"], r["hi"])), (r["lo"], r["hi"], r["c"])
        per_level: dict[int, int] = {}
        for block in r["c"]:
            per_level[block["level"]] = per_level.get(block["level"], 0) + 1
        assert max(per_level.values(), default=0) <= 2
