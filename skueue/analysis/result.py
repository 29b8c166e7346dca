"""What ``skueue analyze`` was asked (:class:`Options`) and what it found (:class:`Analysis`).

The pipeline (:mod:`.pipeline`) fills an :class:`Analysis`; the report (:mod:`.report`)
and ``summary.json`` only read it.  Both import this module and neither imports the
other's module back, so the result is the one thing they share.  Everything here is
collected, small and plain: no Spark objects.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from skueue.analysis import stats
from skueue.analysis.checks import HistoryCheck


@attrs.frozen
class Options:
    paths: tuple[str, ...]
    out: Path
    per_file: bool = False
    drained: bool = False
    members: tuple[str, ...] = ()
    """The cluster's process ids, for storage per process (else from logs or history)."""
    unit: str = "auto"
    partitions_fixed: bool = False
    """The user set ``spark.sql.shuffle.partitions``: keep it rather than size it."""


@attrs.define
class Analysis:
    """Everything the report shows (small: collected aggregates only)."""

    options: Options
    master: str
    files: dict[str, dict[str, int]] = attrs.field(factory=dict)
    malformed: list[dict[str, str]] = attrs.field(factory=list)
    checks: list[HistoryCheck] = attrs.field(factory=list)
    summaries: dict[int, stats.Summary] = attrs.field(factory=dict)
    latency: dict[int, list[dict[str, Any]]] = attrs.field(factory=dict)
    throughput: dict[int, list[dict[str, Any]]] = attrs.field(factory=dict)
    storage: dict[int, list[dict[str, Any]]] = attrs.field(factory=dict)
    members_source: str = ""
    storage_missing: list[int] = attrs.field(factory=list)
    """Histories without a storage table: their DHT's members are unknown (a client's
    history, in seconds, with neither ``--members`` nor daemon logs)."""
    event_counts: list[dict[str, Any]] = attrs.field(factory=list)
    batches: list[dict[str, Any]] = attrs.field(factory=list)
    plots: list[Path] = attrs.field(factory=list)
    tables: list[str] = attrs.field(factory=list)
    seconds: dict[str, float] = attrs.field(factory=dict)
    leases: dict[str, Any] | None = None
    """The lease events' summary and problems (skueue/analysis/leases.py), if any."""
    shuffle_partitions: int = 0
    """What the checks and statistics ran with (sized from the input unless set)."""
    pei: list[dict[str, Any]] = attrs.field(factory=list)
    """Per queue: the PEI measure used and its summary (skueue/analysis/pei.py)."""

    @property
    def records(self) -> int:
        return sum(f["record"] for f in self.files.values())

    @property
    def malformed_lines(self) -> int:
        return sum(f["malformed"] for f in self.files.values())

    @property
    def ok(self) -> bool:
        """Every history checked and found linearizable (hence also sequentially
        consistent), and no lease event breaks a lease's promises."""
        leases_ok = self.leases is None or not self.leases["problem_count"]
        return leases_ok and all(
            c.problem is None and c.verdicts["linearizable"].ok for c in self.checks
        )


def fairness(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """min, mean, max and coefficient of variation of the entries stored per process."""
    stored = [int(r["stored"]) for r in rows]
    if not stored:
        return {}
    mean = statistics.fmean(stored)
    cv = statistics.pstdev(stored) / mean if mean else math.nan
    return {"min": min(stored), "mean": mean, "max": max(stored), "cv": cv}


def summary_json(result: Analysis) -> dict[str, Any]:
    """The verdicts and headline numbers, for scripts (``summary.json``)."""
    return {
        "ok": result.ok,
        "master": result.master,
        "records": result.records,
        "malformed_lines": result.malformed_lines,
        "files": result.files,
        "histories": [
            {
                "name": c.name,
                "queue": c.queue,
                "levels": list(c.levels),
                "records": c.records,
                "structure": c.structure,
                "problem": c.problem,
                "verdicts": {
                    m: {"ok": v.ok, "decided": v.decided, "method": v.method,
                        "reason": v.reason}
                    for m, v in c.verdicts.items()
                },
                "findings": [attrs.asdict(f) for f in c.findings],
            }
            for c in result.checks
        ],
        "pei": [{k: _plain(v) for k, v in row.items()} for row in result.pei],
        "leases": result.leases,
        "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
        "shuffle_partitions": result.shuffle_partitions,
    }


def _plain(x: Any) -> Any:
    """JSON has no NaN: an undefined statistic is null."""
    return None if isinstance(x, float) and math.isnan(x) else x
