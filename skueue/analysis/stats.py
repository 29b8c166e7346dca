"""Statistics of histories and logs: throughput, latency, storage fairness, batches, events.

Throughput and latency are measured on the workload alone: records whose ``phase`` is
``"drain"`` (``skueue bench``'s final drain: one ``dequeue_many`` becomes hundreds of
records with one latency, at one instant) are left out of them (:func:`measured`); the
checks and the storage table still see every record.

Every function returns a small DataFrame (one row per bin, kind or process); the big
input never reaches the driver.  Times are whatever the history holds: rounds from
``skueue sim``, seconds from ``skueue bench``; :func:`history_summaries` tells which
(whole numbers only means rounds).

Storage fairness (paper Lemma 4, Corollary 19) needs the DHT owner of every inserted
position: the process whose virtual node is ``pred(k(p))`` on the ring of the members.
The key hash is mmh3, which Spark lacks, so one Python UDF call handles a whole chunk of
positions (grouped by ``position >> CHUNK_BITS``): per-call overhead, not hashing, is
what makes row-at-a-time Python UDFs slow.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from skueue.check.history import INSERT_OPS, REMOVE_OPS
from skueue.core.ops import DEFAULT_QUEUE
from skueue.dht.keys import POSITION_MAX, position_key
from skueue.overlay.ring import ring_nodes

PERCENTILES: Final = (0.5, 0.9, 0.99)
PERCENTILE_ACCURACY: Final = 100_000
"""Rank error of ``percentile_approx`` is at most 1/accuracy of the count."""
BINS_TARGET: Final = 100
MIN_COVERED: Final = 1e-9
"""The least part of a bin counted as covered: the span can end right at a bin's start."""
CHUNK_BITS: Final = 12
DRAIN_PHASE: Final = "drain"
BATCH_EVENT: Final = "batch up"
"""The daemon's debug-level event for one batch sent up the aggregation tree."""
BATCH_FIELD: Final = "batch_ops"
"""Its field holding the batch size (operations in the batch)."""


@attrs.frozen
class Summary:
    """One history at a glance."""

    hid: int
    records: int
    by_op: Mapping[str, int]
    empty: int
    start: float
    end: float
    unit: str
    """``rounds`` or ``seconds``."""
    processes: int
    drain: int = 0
    """Records of a final drain, left out of every number above."""

    @property
    def span(self) -> float:
        return self.end - self.start


def kind() -> Column:
    """Operation kind for latency: the op, with ``(empty)`` for a removal that found none."""
    ins = F.col("op").isin(*sorted(INSERT_OPS))
    return F.when(~ins & F.col("value").isNull(), F.concat(F.col("op"), F.lit(" (empty)"))
                  ).otherwise(F.col("op"))


def measured(records: DataFrame) -> DataFrame:
    """The records that throughput and latency describe: all but a final drain's."""
    if "phase" not in records.columns:
        return records
    return records.where(F.col("phase").isNull() | (F.col("phase") != DRAIN_PHASE))


def drained_counts(records: DataFrame) -> dict[int, int]:
    """Records of a final drain per history (none when ``phase`` is unknown)."""
    if "phase" not in records.columns:
        return {}
    rows = records.where(F.col("phase") == DRAIN_PHASE).groupBy("hid").count().collect()
    return {int(r["hid"]): int(r["count"]) for r in rows}


def history_summaries(records: DataFrame, unit: str = "auto") -> dict[int, Summary]:
    """Counts, time span and time unit of every history, without its drain: small jobs."""
    drains = drained_counts(records)
    records = measured(records)
    frac = F.greatest(F.abs(F.col("invoke") - F.floor("invoke")),
                      F.abs(F.col("response") - F.floor("response")))
    rows = records.groupBy("hid").agg(
        F.count("*").alias("n"),
        F.sum(F.when(~F.col("op").isin(*sorted(INSERT_OPS)) & F.col("value").isNull(), 1)
              .otherwise(0)).alias("empty"),
        F.min("invoke").alias("start"),
        F.max("response").alias("end"),
        F.max(frac).alias("frac"),
        F.countDistinct("process").alias("processes"),
    ).collect()
    ops = {
        (int(r["hid"]), r["op"]): int(r["count"])
        for r in records.groupBy("hid", "op").count().collect()
    }
    out = {}
    for r in rows:
        hid = int(r["hid"])
        guessed = "rounds" if float(r["frac"]) == 0.0 else "seconds"
        out[hid] = Summary(
            hid=hid,
            records=int(r["n"]),
            by_op={op: n for (h, op), n in sorted(ops.items()) if h == hid},
            empty=int(r["empty"]),
            start=float(r["start"]),
            end=float(r["end"]),
            unit=guessed if unit == "auto" else unit,
            processes=int(r["processes"]),
            drain=drains.get(hid, 0),
        )
    return out


def nice_width(span: float, bins: int = BINS_TARGET, whole: bool = False) -> float:
    """A bin width of 1, 2 or 5 times a power of ten giving at most about ``bins`` bins."""
    raw = max(span, 1e-9) / bins
    exp = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        width = m * 10.0**exp
        if width >= raw:
            break
    return float(max(1, round(width))) if whole else width


def bins_of(s: Summary) -> tuple[float, int]:
    """Bin width and number of bins covering ``s``'s span from its start."""
    width = nice_width(s.span, whole=s.unit == "rounds")
    return width, int(math.floor(s.span / width)) + 1


def throughput(records: DataFrame, summaries: Mapping[int, Summary]) -> DataFrame:
    """Completions per time unit, per history, time bin and op kind, drain left out.

    ``hid, bin, start, width, covered, kind, count, rate``: ``covered`` is the part of the
    bin inside the history's span (``width`` but for the last bin, which the span
    usually ends in), ``rate`` is completions per unit over that part: over the whole
    width, the last bin fell off a cliff.  Every bin of the span is there for every kind
    the history has, with zeros where nothing completed: a quiet stretch is a gap, not a
    line drawn across it.
    """
    records = measured(records).where(F.col("hid").isin(*sorted(summaries)))
    starts = F.create_map(*[x for s in summaries.values() for x in (F.lit(s.hid), F.lit(s.start))])
    widths = F.create_map(*[
        x for s in summaries.values() for x in (F.lit(s.hid), F.lit(bins_of(s)[0]))
    ])
    binned = records.select(
        "hid", kind().alias("kind"),
        F.floor((F.col("response") - starts[F.col("hid")]) / widths[F.col("hid")]).alias("bin"),
    )
    counts = binned.groupBy("hid", "bin", "kind").agg(F.count("*").alias("count"))
    grid = records.sparkSession.createDataFrame(
        [(s.hid, b, float(s.start + b * w), float(w), covered(s, b, w))
         for s in summaries.values() for w, n in [bins_of(s)] for b in range(n)],
        "hid int, bin long, start double, width double, covered double",
    )
    kinds = binned.select("hid", "kind").distinct()
    return grid.join(kinds, "hid").join(counts, ["hid", "bin", "kind"], "left").select(
        "hid", "bin", "start", "width", "covered", "kind",
        F.coalesce("count", F.lit(0)).alias("count"),
        (F.coalesce("count", F.lit(0)) / F.col("covered")).alias("rate"),
    )


def covered(s: Summary, bin_: int, width: float) -> float:
    """How much of bin ``bin_`` lies inside ``s``'s span.  Rounds are whole steps, and
    the span's last round is one of them (a bin that starts at it covers one round);
    seconds are continuous (never zero: the last completion is in the bin)."""
    span = s.span + 1.0 if s.unit == "rounds" else s.span
    return float(max(min(width, span - bin_ * width), MIN_COVERED))


def latency(records: DataFrame) -> DataFrame:
    """Per history and op kind (and ``all``): count, mean, p50/p90/p99, max of response-invoke.

    A final drain is left out (see :func:`measured`).
    """
    lat = measured(records).select("hid", kind().alias("kind"),
                         (F.col("response") - F.col("invoke")).alias("latency"))
    every = lat.withColumn("kind", F.lit("all"))
    both = lat.unionByName(every)
    pct = F.percentile_approx("latency", list(PERCENTILES), PERCENTILE_ACCURACY)
    return both.groupBy("hid", "kind").agg(
        F.count("*").alias("count"),
        F.mean("latency").alias("mean"),
        pct.alias("pct"),
        F.max("latency").alias("max"),
    ).select(
        "hid", "kind", "count", "mean",
        *[F.col("pct")[i].alias(f"p{round(q * 100)}") for i, q in enumerate(PERCENTILES)],
        "max",
    )


# -- storage ------------------------------------------------------------------------------


def ring_of(members: Sequence[str]) -> tuple[list[int], list[str]]:
    """Sorted node labels of the members' ring and the process owning each label."""
    nodes = ring_nodes(members)
    return [n.label for n in nodes], [n.process for n in nodes]


def owners_of_chunk(
    ring: tuple[list[int], list[str]],
    positions: Sequence[int],
    kept: Sequence[bool],
    queue: str = DEFAULT_QUEUE,
) -> list[tuple[str, int, int]]:
    """``(owner, stored, still held)`` counts for one chunk of ``queue``'s inserted
    positions (a position of a queue with priority levels as the DHT sees it).

    The owner of position ``p`` is the node ``u`` with ``u <= k(p) < succ(u)`` (below the
    lowest label, the highest node's: the ring wraps), as the DHT stores it; the key
    hashes the queue's name and the position (``dht/keys.py``).
    """
    labels, owners = ring
    counts: dict[str, list[int]] = {}
    for p, keep in zip(positions, kept, strict=True):
        if not 1 <= p <= POSITION_MAX:
            continue
        owner = owners[bisect.bisect_right(labels, position_key(queue, p)) - 1]
        c = counts.setdefault(owner, [0, 0])
        c[0] += 1
        c[1] += int(keep)
    return [(o, c[0], c[1]) for o, c in counts.items()]


def storage(records: DataFrame, members: Mapping[int, Sequence[str]]) -> DataFrame:
    """Entries each member stored over the run, and still held at the end, per history.

    ``hid, process, stored, held``; every member appears, also with zero entries.
    """
    rings = {hid: ring_of(m) for hid, m in members.items() if m}
    schema = T.ArrayType(T.StructType([
        T.StructField("process", T.StringType()),
        T.StructField("stored", T.LongType()),
        T.StructField("held", T.LongType()),
    ]))

    def count(hid: int, queue: str, positions: list[int], kept: list[bool]) -> list[Any]:
        ring = rings.get(hid)
        return [] if ring is None else owners_of_chunk(ring, positions, kept, queue)

    # useArrow=False: plain pickled rows (no pandas, no pyarrow), and no type-hint guessing.
    chunk_udf = F.udf(count, schema, useArrow=False)
    named = F.col("queue") if "queue" in records.columns else F.lit(None)
    ins = records.where(F.col("op").isin(*sorted(INSERT_OPS)) & F.col("position").isNotNull())
    # A peek leaves its element where it is: only removals take it out.
    removed = records.where(F.col("op").isin(*sorted(REMOVE_OPS)) & F.col("value").isNotNull()
                            ).select("hid", "value", F.lit(True).alias("removed"))
    flagged = ins.join(removed, ["hid", "value"], "left").select(
        "hid", F.coalesce(named, F.lit(DEFAULT_QUEUE)).alias("queue"), "position",
        F.col("removed").isNull().alias("kept"),
    )
    chunk = F.shiftright("position", CHUNK_BITS).alias("chunk")
    chunks = flagged.groupBy("hid", "queue", chunk).agg(
        F.collect_list("position").alias("positions"), F.collect_list("kept").alias("kept")
    )
    counted = chunks.select(
        "hid", F.explode(chunk_udf("hid", "queue", "positions", "kept")).alias("c")
    )
    totals = counted.groupBy("hid", F.col("c.process").alias("process")).agg(
        F.sum("c.stored").alias("stored"), F.sum("c.held").alias("held")
    )
    session = records.sparkSession
    everyone = session.createDataFrame(
        [(hid, p) for hid, m in members.items() for p in sorted(set(m))],
        "hid int, process string",
    )
    return everyone.join(totals, ["hid", "process"], "left").select(
        "hid", "process", F.coalesce("stored", F.lit(0)).alias("stored"),
        F.coalesce("held", F.lit(0)).alias("held"),
    )


# -- logs ---------------------------------------------------------------------------------


def event_counts(events: DataFrame) -> DataFrame:
    """``daemon, level, event, count``."""
    return events.groupBy("daemon", "level", "event").count()


def event_span(events: DataFrame) -> tuple[float, float] | None:
    """First and last event time (epoch seconds), or None without timestamps."""
    t = F.unix_micros("timestamp") / 1e6
    row = events.where(F.col("timestamp").isNotNull()).agg(
        F.min(t).alias("lo"), F.max(t).alias("hi")).collect()[0]
    return None if row["lo"] is None else (float(row["lo"]), float(row["hi"]))


def event_width(span: tuple[float, float] | None) -> float:
    """Seconds per bin of the event timeline: whole seconds, about 100 bins at most."""
    return 1.0 if span is None else nice_width(span[1] - span[0], whole=True)


def event_timeline(events: DataFrame, width_s: float) -> DataFrame:
    """Events per level and time bin: ``start, level, count`` (``start`` in epoch seconds)."""
    t = F.unix_micros("timestamp") / 1e6
    return events.where(F.col("timestamp").isNotNull()).groupBy(
        (F.floor(t / width_s) * width_s).alias("start"), "level"
    ).count()


def batch_sizes(events: DataFrame) -> DataFrame:
    """Sizes of the batches sent up the tree: ``daemon, node, size``.

    Only the ``batch_ops`` of the daemon's ``batch up`` events: other fields that merely
    mention batches (limits, counters, ids) are no batch sizes.
    """
    fields = F.col("fields")
    return events.where(F.col("event") == BATCH_EVENT).select(
        F.coalesce(fields["process"], F.col("daemon")).alias("daemon"),
        fields["node"].alias("node"),
        fields[BATCH_FIELD].try_cast("long").alias("size"),
    ).where(F.col("size").isNotNull() & (F.col("size") >= 0))


def batch_summary(batches: DataFrame) -> DataFrame:
    """Per virtual node (``left``/``middle``/``right``) and ``all``: count, mean,
    p50/p90/p99 and max of the batch sizes, and how many batches were empty."""
    pct = F.percentile_approx("size", list(PERCENTILES), PERCENTILE_ACCURACY)
    both = batches.select(F.coalesce("node", F.lit("?")).alias("node"), "size").unionByName(
        batches.select(F.lit("all").alias("node"), "size"))
    return both.groupBy("node").agg(
        F.count("*").alias("count"), F.sum((F.col("size") == 0).cast("long")).alias("empty"),
        F.mean("size").alias("mean"), pct.alias("pct"), F.max("size").alias("max"),
    ).select(
        "node", "count", "empty", "mean",
        *[F.col("pct")[i].alias(f"p{round(q * 100)}") for i, q in enumerate(PERCENTILES)], "max",
    )
