"""``skueue analyze`` end to end: input paths in; Parquet tables, plots and a report out.

Theory of operation
-------------------
1. Stage: every input line is parsed once into ``OUT/lines`` (Parquet, partitioned by
   ``kind``: record, event, lease, malformed).  Everything after reads that table.
2. Check: :func:`.checks.check_histories`; every violation row lands in
   ``OUT/violations``.  Then the PEI of every queue (:mod:`.pei`).
3. Statistics: throughput, latency, storage per process, log events and batch sizes,
   each written to ``OUT/<table>`` and then read back small for plots and the report.
4. Plots (PNG) and ``report.md`` (and ``summary.json`` for machines) are written by the
   driver, so ``OUT`` must be a path that both the driver and the executors can write:
   any local path in ``local`` mode, shared storage on a cluster.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from skueue.analysis import leases, plots, stats
from skueue.analysis.checks import check_histories
from skueue.analysis.pei import pei_per_queue
from skueue.analysis.readers import InputError, Inputs, line_counts, load, stage
from skueue.analysis.report import render
from skueue.analysis.result import Analysis, Options, summary_json
from skueue.analysis.session import sized_shuffle_partitions

MALFORMED_SHOWN: Final = 10
BATCHES_PLOTTED_MAX: Final = 1_000_000
"""Batch sizes brought to the driver for the histogram (two small ints each)."""
BATCH_NODE_ORDER: Final = {"left": 0, "middle": 1, "right": 2, "all": 3}


def analyze(
    spark: SparkSession,
    options: Options,
    *,
    master: str,
    progress: Callable[[str], None] = lambda _: None,
) -> Analysis:
    """Run the whole pipeline; raises :class:`InputError` when nothing can be analysed."""
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    result = Analysis(options, master)
    clock = _Clock(result.seconds)

    with clock("read"):
        progress(f"reading {len(options.paths)} path(s)")
        stage(spark, options.paths, str(out / "lines"))
        result.files = line_counts(spark, str(out / "lines"))
        if not result.files:
            raise InputError(f"no lines to analyse in {', '.join(options.paths)}")
        inputs = load(spark, str(out / "lines"), per_file=options.per_file)
        result.malformed = [
            r.asDict() for r in inputs.malformed.limit(MALFORMED_SHOWN).collect()
        ]
        result.tables.append("lines (partitioned by kind: record, event, lease, malformed)")

    lines = sum(sum(f.values()) for f in result.files.values())
    with sized_shuffle_partitions(spark, lines, fixed=options.partitions_fixed) as partitions:
        result.shuffle_partitions = partitions
        _check_and_summarise(spark, inputs, result, clock, progress)
    with clock("report"):
        (out / "report.md").write_text(render(result), encoding="utf-8")
        (out / "summary.json").write_text(json.dumps(summary_json(result), indent=2) + "\n",
                                          encoding="utf-8")
    return result


def _check_and_summarise(
    spark: SparkSession,
    inputs: Inputs,
    result: Analysis,
    clock: _Clock,
    progress: Callable[[str], None],
) -> None:
    options, out = result.options, result.options.out
    if result.records:
        with clock("check"):
            progress(f"checking {result.records} records")
            result.checks = check_histories(
                spark, inputs.records, inputs.names, drained=options.drained,
                violations_path=str(out / "violations"),
            )
            result.tables.append("violations")
        with clock("pei"):
            progress("popped element index (PEI) per queue")
            result.pei = pei_per_queue(inputs.records, result.checks, inputs.names)
        with clock("statistics"):
            progress("statistics")
            _history_stats(spark, inputs, result, out)
    if any(f["event"] for f in result.files.values()):
        with clock("logs"):
            progress("log events")
            _log_stats(inputs.events, result, out)
    if inputs.leases is not None and any(f.get("lease") for f in result.files.values()):
        with clock("leases"):
            progress("lease events")
            result.leases = leases.summarise(inputs.leases)


class _Clock:
    """Records the wall time of each step into a dict, for the report."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into = into
        self.step = ""
        self.started = 0.0

    def __call__(self, step: str) -> _Clock:
        self.step = step
        return self

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.into[self.step] = time.perf_counter() - self.started


def _write_small(df: DataFrame, path: Path) -> list[dict[str, Any]]:
    """Write an aggregate as Parquet (one file), then read it back to the driver."""
    df.coalesce(1).write.mode("overwrite").parquet(str(path))
    return [r.asDict() for r in df.sparkSession.read.parquet(str(path)).collect()]


def _by_hid(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(int(r["hid"]), []).append(r)
    return out


def _history_stats(spark: SparkSession, inputs: Inputs, result: Analysis, out: Path) -> None:
    records = inputs.records
    opts = result.options
    result.summaries = stats.history_summaries(records, opts.unit)
    result.latency = _by_hid(_write_small(stats.latency(records), out / "latency"))
    result.throughput = _by_hid(
        _write_small(stats.throughput(records, result.summaries), out / "throughput")
    )
    members, result.members_source = _members(spark, inputs, opts.members, result.summaries)
    result.storage = _by_hid(_write_small(stats.storage(records, members), out / "storage"))
    result.storage_missing = sorted(set(result.summaries) - set(members))
    result.tables += ["latency", "throughput", "storage"]
    for hid, s in result.summaries.items():
        tag = _tag(inputs.names.get(hid, str(hid)), len(result.summaries))
        title = f"{tag}: {s.records} operations"
        result.plots.append(plots.plot_throughput(
            result.throughput.get(hid, []), s.unit, f"Throughput, {title}",
            out / f"throughput{tag.suffix}.png"))
        result.plots.append(plots.plot_latency(
            result.latency.get(hid, []), s.unit, f"Latency per operation kind, {title}",
            out / f"latency{tag.suffix}.png"))
        if result.storage.get(hid):
            result.plots.append(plots.plot_storage(
                result.storage[hid], f"DHT entries stored per member (Corollary 19), {tag}",
                out / f"storage{tag.suffix}.png", member_source=result.members_source))


@attrs.frozen
class _Tag:
    """A history's name in titles, and its file-name suffix when there are several."""

    name: str
    suffix: str

    def __str__(self) -> str:
        return self.name


def _tag(name: str, count: int) -> _Tag:
    if count <= 1:
        return _Tag("history", "")
    stem = Path(name).name.split(".")[0] or "history"
    return _Tag(stem, f"-{stem}")


def _members(
    spark: SparkSession,
    inputs: Inputs,
    given: Sequence[str],
    summaries: Mapping[int, stats.Summary],
) -> tuple[dict[int, list[str]], str]:
    """The processes whose DHT stores entries, per history, and where they came from.

    Without ``--members`` or daemon logs, only a simulator's history (times in rounds)
    names them: its processes are the DHT's members.  A history in seconds was made by
    clients of real daemons (``skueue bench``), whose process ids (``c0``, ``c4.1``) own
    no DHT entries: hashing positions onto a ring of clients drew bars that no daemon
    stored, under a title that read as DHT fairness.  Such a history gets no storage
    table (the report says what would give one).
    """
    hids = sorted(inputs.names)
    if given:
        return {h: list(given) for h in hids}, "--members"
    daemons = sorted(
        r["daemon"] for r in inputs.events.select("daemon").distinct().collect()
        if r["daemon"] is not None
    )
    if daemons:
        return {h: daemons for h in hids}, "the daemons' ready events in the logs"
    simulated = [h for h, s in summaries.items() if s.unit == "rounds"]
    rows = inputs.records.where(F.col("hid").isin(*simulated)).select(
        "hid", "process").distinct().collect() if simulated else []
    per: dict[int, list[str]] = {}
    for r in rows:
        per.setdefault(int(r["hid"]), []).append(r["process"])
    return {h: sorted(p) for h, p in per.items()}, "the simulated history's process ids"


def _log_stats(events: DataFrame, result: Analysis, out: Path) -> None:
    out_events = out / "events"
    events.write.mode("overwrite").parquet(str(out_events))
    events = events.sparkSession.read.parquet(str(out_events))
    result.tables.append("events")
    result.event_counts = _write_small(stats.event_counts(events), out / "event_counts")
    width = stats.event_width(stats.event_span(events))
    timeline = _write_small(stats.event_timeline(events, width), out / "event_timeline")
    result.tables += ["event_counts", "event_timeline"]
    daemons = sorted({str(r["daemon"]) for r in result.event_counts if r["daemon"]})
    named = f" of {', '.join(daemons)}" if 0 < len(daemons) <= 4 else (
        f" of {len(daemons)} daemons" if daemons else "")
    if timeline:
        result.plots.append(plots.plot_events(
            timeline, f"Daemon log events{named}", out / "events.png", width))
    batches = stats.batch_sizes(events)
    summary = _write_small(stats.batch_summary(batches), out / "batch_sizes")
    result.batches = sorted(summary, key=lambda r: BATCH_NODE_ORDER.get(r["node"], 9))
    if summary:
        result.tables.append("batch_sizes")
        rows = [r.asDict() for r in batches.select("node", "size").limit(BATCHES_PLOTTED_MAX)
                .collect()]
        result.plots.append(plots.plot_batches(
            rows, f"Batch sizes sent up the tree{named}", out / "batches.png"))
