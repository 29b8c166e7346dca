"""One consistency verdict per history and model, as :func:`skueue.check.checker.check` decides.

Theory of operation
-------------------
The distributed certificate (:mod:`.certificate`) and patterns (:mod:`.patterns`,
:mod:`.lifo`) emit violation rows; all of them run as one Spark job whose output is
small (one row per violation found, usually none) and is summarised per history, check
and scope.  Both models come out of the same pass (see :mod:`.columns`).  The decision
then follows ``check(method="auto")`` step for step:

1. every record has an ``ord`` and the certificate holds: consistent (a proof);
2. otherwise, a history of at most ``EXACT_OPS_MAX`` operations goes to the exact search,
   on the driver, with the same code as ``check`` (such a history is tiny);
3. otherwise the patterns decide what they can: a violation they find is a proof.  If
   they find none, a history without ords passes (not a proof), and one whose
   certificate failed is *unproven*: a failed certificate proves only that the anchor's
   order is no witness, not that the history is inconsistent.

So on small histories the verdict is the exact checker's, and at scale the
certificate's or the patterns', exactly as for the single-machine checker.

Histories that ``validate_history`` or ``structure_of`` would reject (two records with one
``(process, seq)``; queue and stack operations mixed) get no verdict but a ``problem``.

Peeks remove nothing, so the distributed checks leave them out; :mod:`.peeks` checks each
against the head at its ``ord``.

A history of several named queues is checked queue by queue, as ``check`` does: each
``(history, queue)`` becomes a unit of its own, with its own id in the ``hid`` column the
checks partition by, and gets its own :class:`HistoryCheck`.  A queue with priority levels
(an enqueue with a ``priority``) is checked by the per-level rules of :mod:`.levels`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from skueue.analysis.certificate import certificate_violations
from skueue.analysis.columns import (
    CERTIFICATE,
    LIN,
    PATTERNS,
    SC,
    union_all,
    whole_or_float,
    with_roles,
)
from skueue.analysis.levels import certificate_levels, less_urgent_first
from skueue.analysis.lifo import lifo_violations
from skueue.analysis.patterns import (
    duplicates,
    inserts_with_removals,
    pairs,
    pattern_violations,
)
from skueue.analysis.peeks import peek_findings
from skueue.analysis.scan import (
    ROWS_PER_BUCKET,
    ROWS_PER_BUCKET_CONF,
    buckets_for,
    levels_for,
)
from skueue.analysis.session import shuffle_partitions
from skueue.check.checker import EXACT_OPS_MAX, ExactLimitError, Verdict, check_exact, unproven
from skueue.check.history import PEEK, QUEUE_OPS, STACK_OPS, Record

MODELS: Final = ("sc", "linearizable")
MEMORY_CACHE_ROWS_MAX: Final = 2_000_000
"""Histories up to this size are cached in memory (spilling to disk); larger on disk."""
SCOPES: Final = {"sc": (SC,), "linearizable": (SC, LIN)}
# Which finding names a verdict when several fire: the Python checkers' order of tests.
PRIORITY: Final = {
    CERTIFICATE: ("duplicate ord", "duplicate", "program order", "real time", "replay", "peek",
                  "drained"),
    PATTERNS: ("duplicate", "fresh", "causality", "lost", "false empty/FIFO", "priority",
               "LIFO"),
}
DEFAULT_QUEUE_KEY: Final = ""
"""The unit key of records without a ``queue`` (a queue name is never empty)."""
Unit = tuple[int, str | None]
"""A history id and a queue name (None: the default queue)."""


@attrs.frozen
class Finding:
    """All violations of one kind in one history."""

    family: str
    """``certificate`` or ``patterns``."""
    check: str
    scope: str
    """``sc``: breaks both models; ``lin``: breaks linearizability only."""
    count: int
    example: str
    """The violation with the smallest key (ord, or seq)."""


@attrs.frozen
class HistoryCheck:
    """Everything the checks found about one history."""

    hid: int
    name: str
    records: int
    structure: str | None
    problem: str | None
    """Why the history cannot be checked at all, or None."""
    certified: bool
    """Every record carries an ``ord``, so the certificate applies."""
    drained: bool
    findings: tuple[Finding, ...] = ()
    verdicts: Mapping[str, Verdict] = attrs.field(factory=dict)
    """Model -> the decided verdict (empty when ``problem`` is set)."""
    queue: str | None = None
    """The named queue this check is about; None for the default queue."""
    levels: tuple[int, ...] = ()
    """The priority levels its enqueues used, when it is a queue with priority levels."""
    peeks: bool = False
    """It has peeks (checked apart: :mod:`.peeks`)."""

    @property
    def label(self) -> str:
        """The history's name, and the queue's when it has one."""
        return self.name if self.queue is None else f"{self.name}, queue {self.queue}"

    def first(self, family: str, model: str) -> str | None:
        """The distributed ``family``'s first violation under ``model``, or None."""
        cands = [f for f in self.findings if f.family == family and f.scope in SCOPES[model]]
        if not cands:
            return None
        order = PRIORITY[family]
        cands.sort(key=lambda f: (order.index(f.check), f.scope != SC))
        return cands[0].example


def check_histories(
    spark: SparkSession,
    records: DataFrame,
    names: Mapping[int, str],
    *,
    drained: bool = False,
    violations_path: str | None = None,
) -> list[HistoryCheck]:
    """Check every history in ``records`` (columns of :class:`.readers.Inputs`).

    ``records`` may carry a boolean ``drained`` column (per history); else ``drained``
    applies to all.  With ``violations_path`` every violation row is written there as
    Parquet (and summarised from there, so the checks run once).
    """
    if "drained" not in records.columns:
        records = records.withColumn("drained", F.lit(drained))
    for name, kind in (("queue", "string"), ("priority", "bigint")):
        if name not in records.columns:
            records = records.withColumn(name, F.lit(None).cast(kind))
    records, units = _units(spark, records)
    recs = with_roles(records)
    meta = _overview(recs, {cid: names.get(hid, str(hid)) for cid, (hid, _) in units.items()})
    good = [m for m in meta if m.problem is None]
    if not good:
        return _named(meta, units)
    table = spark.createDataFrame(
        [(m.hid, m.structure, m.drained, m.certified, bool(m.levels), list(m.levels) or [0])
         for m in good],
        "hid int, structure string, drained_h boolean, certified boolean, "
        "prioritized boolean, levels array<bigint>",
    )
    valid = recs.drop("drained").join(F.broadcast(table), "hid").withColumnRenamed(
        "drained_h", "drained"
    ).withColumn("lvl", F.when(F.col("ins"), F.coalesce("priority", F.lit(0)))).where(
        F.col("op") != PEEK  # a peek removes nothing: checked apart (.peeks)
    )
    # Scans sort each history apart, so the largest one decides how to cut them.
    largest = max(m.records for m in good)
    per_bucket = int(spark.conf.get(ROWS_PER_BUCKET_CONF, None) or ROWS_PER_BUCKET)
    buckets = buckets_for(largest, shuffle_partitions(spark), per_bucket)
    # Every check reads these two; cached, they are computed once, not once per branch.
    # Spark builds a cached partition on the heap before it can spill it; for large
    # histories that overflowed a small driver heap, so they go to local disk as written.
    level = (StorageLevel.MEMORY_AND_DISK if largest <= MEMORY_CACHE_ROWS_MAX
             else StorageLevel.DISK_ONLY)
    valid = valid.persist(level)
    paired = pairs(valid).persist(level)
    try:
        findings = _findings(spark, valid, paired, good, buckets, violations_path)
    finally:
        paired.unpersist()
        valid.unpersist()
    peeky = [m.hid for m in good if m.certified and m.peeks]
    for hid, (n, example) in peek_findings(records, peeky).items():
        findings.setdefault(hid, []).append(Finding(CERTIFICATE, "peek", SC, n, example))
    out = []
    small = [m.hid for m in good if m.records <= EXACT_OPS_MAX]
    exact_records = _collect_records(records, small) if small else {}
    for m in meta:
        if m.problem is not None:
            out.append(m)
            continue
        m = attrs.evolve(m, findings=tuple(sorted(
            findings.get(m.hid, []), key=lambda f: (f.family, f.check, f.scope))))
        verdicts = {
            model: _decide(m, model, exact_records.get(m.hid)) for model in MODELS
        }
        out.append(attrs.evolve(m, verdicts=verdicts))
    return _named(out, units)


def _units(spark: SparkSession, records: DataFrame) -> tuple[DataFrame, dict[int, Unit]]:
    """Each ``(history, queue)`` as one unit: ``records`` with the unit's id as ``hid``,
    and the units by id (one small job: the distinct pairs)."""
    key = F.coalesce("queue", F.lit(DEFAULT_QUEUE_KEY)).alias("qkey")
    pairs = sorted((int(r["hid"]), r["qkey"])
                   for r in records.select("hid", key).distinct().collect())
    units = {cid: (hid, q or None) for cid, (hid, q) in enumerate(pairs)}
    if all(cid == hid and q is None for cid, (hid, q) in units.items()):
        return records, units  # one default queue per history: the ids stay
    ids = spark.createDataFrame([(hid, q, cid) for cid, (hid, q) in enumerate(pairs)],
                                "hid int, qkey string, cid int")
    mapped = records.join(F.broadcast(ids), [records["hid"] == ids["hid"], key == ids["qkey"]])
    return mapped.select(ids["cid"].alias("hid"), *[records[c] for c in records.columns
                                                     if c != "hid"]), units



def _named(checks: list[HistoryCheck], units: Mapping[int, Unit]) -> list[HistoryCheck]:
    """The checks of units, with their history's id and their queue."""
    return [attrs.evolve(c, hid=units[c.hid][0], queue=units[c.hid][1]) for c in checks]


def _findings(
    spark: SparkSession,
    valid: DataFrame,
    paired: DataFrame,
    good: list[HistoryCheck],
    buckets: int,
    violations_path: str | None,
) -> dict[int, list[Finding]]:
    """Run every distributed check in one job; the findings by history."""
    queues = any(m.structure == "queue" for m in good)
    stacks = [m.records for m in good if m.structure == "stack"]
    drained = any(m.drained for m in good)
    certified = any(m.certified for m in good)
    levels = [m for m in good if m.levels]
    # Branches no history needs are left out: each would still cost Spark its stages.
    parts = [
        duplicates(valid, certificate=certified),
        pattern_violations(valid, paired, buckets, queues=queues, drained=drained),
    ]
    if certified:
        parts.append(certificate_violations(
            valid.where("certified"), buckets, queues=queues, stacks=bool(stacks),
            drained=drained,
        ))
    if levels:
        parts.append(less_urgent_first(inserts_with_removals(paired), buckets))
        if any(m.certified for m in levels):
            parts.append(certificate_levels(valid.where("certified and prioritized"), buckets))
    if stacks:
        parts.append(lifo_violations(inserts_with_removals(paired), levels_for(max(stacks)),
                                     buckets))
    # A union runs one task per partition of every branch (17 for a history of 80 rows);
    # merged back to the shuffle partitions, the branches still run side by side.
    found = union_all(parts).coalesce(shuffle_partitions(spark))
    if violations_path is not None:
        found.write.mode("overwrite").parquet(violations_path)
        found = spark.read.parquet(violations_path)
    summary = (
        found.groupBy("hid", "family", "check", "scope")
        .agg(F.count("*").alias("n"), F.min_by("reason", "key").alias("example"))
        .collect()
    )
    findings: dict[int, list[Finding]] = {}
    for row in summary:
        findings.setdefault(int(row["hid"]), []).append(
            Finding(row["family"], row["check"], row["scope"], int(row["n"]), row["example"])
        )
    return findings


def _overview(recs: DataFrame, names: Mapping[int, str]) -> list[HistoryCheck]:
    """Size, structure, ords and validity of every history: two small jobs."""
    rows = recs.groupBy("hid").agg(
        F.count("*").alias("n"),
        F.sum(F.col("ord").isNull().cast("long")).alias("no_ord"),
        F.collect_set("op").alias("ops"),
        F.max("drained").alias("drained"),
        F.max("priority").alias("urgent_max"),
        # Levels in use: small (a queue has at most PRIORITIES_MAX).
        F.array_sort(F.collect_set(F.when(F.col("ins"), F.coalesce("priority", F.lit(0)))))
        .alias("levels"),
    ).collect()
    dups = {
        int(r["hid"]): r["ds"]
        for r in recs.groupBy("hid", "process", "seq")
        .agg(F.count("*").alias("n"), F.sort_array(F.collect_list("desc")).alias("ds"))
        .where("n > 1")
        .groupBy("hid")
        .agg(F.min("ds").alias("ds"))
        .collect()
    }
    out = []
    for r in sorted(rows, key=lambda r: r["hid"]):
        hid = int(r["hid"])
        ops = set(r["ops"])
        structure = "queue" if ops <= QUEUE_OPS else "stack" if ops <= STACK_OPS else None
        problem = None
        if structure is None:
            problem = f"history mixes queue and stack operations: {sorted(ops)}"
        elif hid in dups:
            ds = dups[hid]
            problem = f"two records share one process and seq: {ds[0]} and {ds[1]}"
        out.append(HistoryCheck(
            hid=hid, name=names.get(hid, str(hid)), records=int(r["n"]), structure=structure,
            problem=problem, certified=int(r["no_ord"]) == 0, drained=bool(r["drained"]),
            levels=tuple(int(x) for x in r["levels"]) if r["urgent_max"] else (),
            peeks=PEEK in ops,
        ))
    return out


def _collect_records(records: DataFrame, hids: list[int]) -> dict[int, list[Record]]:
    """The records of small histories, for the exact search on the driver."""
    out: dict[int, list[Record]] = {h: [] for h in hids}
    rows = records.where(F.col("hid").isin(hids)).select(
        "hid", "process", "seq", "op", "value", "invoke", "response", "position", "ord",
        "queue", "priority",
    ).collect()
    for r in rows:
        out[int(r["hid"])].append(Record(
            r["process"], int(r["seq"]), r["op"], r["value"], whole_or_float(r["invoke"]),
            whole_or_float(r["response"]), r["position"], r["ord"], queue=r["queue"],
            priority=r["priority"] or None,
        ))
    return out


def _decide(m: HistoryCheck, model: str, small: list[Record] | None) -> Verdict:
    """``check(method="auto")``'s decision from the distributed findings."""
    assert m.structure is not None
    cert = m.first(CERTIFICATE, model) if m.certified else None
    if m.certified and cert is None:
        return Verdict(True, model, "certificate", m.structure, None)
    limit = f"{m.records} ops > {EXACT_OPS_MAX}"
    if small is not None:
        try:
            return check_exact(small, model=model, structure=m.structure, drained=m.drained)
        except ExactLimitError:
            limit = "over the exact search's state budget"
    reason = m.first(PATTERNS, model)
    if cert is not None and reason is None:
        return unproven(model, m.structure, cert, limit)
    return Verdict(reason is None, model, "patterns", m.structure, reason)
