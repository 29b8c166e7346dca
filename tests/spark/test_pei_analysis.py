"""The PEI in ``skueue analyze`` (issue 14 item 5): per queue, the same numbers as
:mod:`skueue.check.pei` on the same records, exact at ``ord`` when every record has one and
the observed lower bound otherwise; and ``analyze`` itself on priority histories, one of
them with an injected violation that it must flag, through the real command line."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from pyspark.sql import SparkSession

from skueue.analysis.checks import check_histories
from skueue.analysis.pei import (
    BY_CERTIFICATE,
    BY_ORDER,
    OBSERVED,
    PEI_RECORDS_MAX_CONF,
    pei_per_queue,
)
from skueue.check.checker import check
from skueue.check.history import Record, write_jsonl
from skueue.check.pei import PeiSummary, pei_by_order, pei_observed
from skueue.cli.skueue import main
from tests.spark.test_priority_checks import (
    SCHEMA,
    legal_priority_history,
    record_row,
    swap_across_levels,
    swap_within_level,
)

pytestmark = pytest.mark.spark


def local(records: list[Record]) -> tuple[str, PeiSummary]:
    """The local measure of one queue, as analyze must choose it."""
    if all(r.ord is not None for r in records):
        return BY_ORDER, PeiSummary.of(pei_by_order(records))
    return OBSERVED, PeiSummary.of(pei_observed(records))


def _batch() -> list[list[Record]]:
    out = []
    for seed in range(12):
        rng = random.Random(seed)
        h = legal_priority_history(
            rng,
            levels=rng.choice([1, 2, 4]),
            processes=3,
            ops=rng.randint(10, 60),
            drain=rng.random() < 0.5,
        )
        mutate = (None, swap_across_levels, swap_within_level)[seed % 3]
        if mutate is not None:
            h = mutate(h, rng) or h
        if seed % 2:
            h = [attrs.evolve(r, ord=None) for r in h]
        out.append(h)
    two = legal_priority_history(
        random.Random(99), levels=3, processes=2, ops=30, drain=False, queue="a"
    )
    other = legal_priority_history(
        random.Random(98), levels=2, processes=2, ops=30, drain=False, queue="b"
    )
    out.append(two + [attrs.evolve(r, process=r.process + "2") for r in other])
    return out


def _frame(spark: SparkSession, histories: list[list[Record]]) -> Any:
    rows = [record_row(hid, "f", r) for hid, h in enumerate(histories) for r in h]
    return spark.createDataFrame(rows, SCHEMA)


def test_per_queue_numbers_equal_the_local_measure(spark: SparkSession) -> None:
    histories = _batch()
    rows = pei_per_queue(_frame(spark, histories), [])
    assert len(rows) == len(histories) + 1  # the last history has two queues
    seen = set()
    for row in rows:
        mine = [r for r in histories[row["hid"]] if r.queue == row["queue"]]
        method, s = local(mine)
        seen.add((method, s.max > 0))
        got = (
            row["method"],
            row["count"],
            row["median"],
            row["mean"],
            row["p90"],
            row["p99"],
            row["max"],
        )
        want = (method, s.count, s.median, s.mean, s.p90, s.p99, s.max)
        assert all(
            g == w or (isinstance(w, float) and math.isnan(w) and math.isnan(g))
            for g, w in zip(got, want, strict=True)
        ), f"{row} != {want}"
    # Guards against a batch where every PEI is 0: both measures see inversions.
    assert {(BY_ORDER, True), (BY_ORDER, False), (OBSERVED, True), (OBSERVED, False)} <= seen


@pytest.fixture
def tiny_limit(spark: SparkSession) -> Iterator[None]:
    spark.conf.set(PEI_RECORDS_MAX_CONF, "20")
    try:
        yield
    finally:
        spark.conf.unset(PEI_RECORDS_MAX_CONF)


def test_a_queue_too_large_for_one_task_is_zero_by_the_certificate_or_not_measured(
    spark: SparkSession,
    tiny_limit: None,
) -> None:
    good = legal_priority_history(random.Random(5), levels=3, processes=2, ops=60, drain=True)
    bad = swap_across_levels(good, random.Random(5))
    assert bad is not None
    frame = _frame(spark, [good, bad])
    rows = {r["hid"]: r for r in pei_per_queue(frame, check_histories(spark, frame, {}))}
    removed = sum(r.op == "dequeue" and r.value is not None for r in good)
    assert (rows[0]["method"], rows[0]["count"], rows[0]["max"]) == (BY_CERTIFICATE, removed, 0)
    assert rows[1]["method"] is None and "not measured" in rows[1]["note"]


@attrs.frozen
class Run:
    code: int
    out: Path
    stdout: str
    summary: dict[str, Any]

    def histories(self, stem: str) -> list[dict[str, Any]]:
        return [h for h in self.summary["histories"] if Path(h["name"]).stem == stem]

    def pei(self, stem: str, queue: str | None = None) -> dict[str, Any]:
        (row,) = [
            r for r in self.summary["pei"] if Path(r["name"]).stem == stem and r["queue"] == queue
        ]
        return row


def _histories() -> dict[str, list[Record]]:
    clean = legal_priority_history(random.Random(1), levels=4, processes=3, ops=200, drain=True)
    violated = swap_across_levels(clean, random.Random(1))
    assert violated is not None
    pq = legal_priority_history(
        random.Random(2), levels=2, processes=2, ops=40, drain=True, queue="pq"
    )
    jobs = [
        attrs.evolve(r, queue="jobs", priority=None, process=r.process + "j")
        for r in legal_priority_history(random.Random(3), levels=1, processes=2, ops=40, drain=True)
    ]
    return {
        "clean": clean,
        "violated": violated,
        "unordered": [attrs.evolve(r, ord=None) for r in violated],
        "named": pq + jobs,
    }


@pytest.fixture(scope="module")
def analysed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Run:
    src = tmp_path_factory.mktemp("pei-in")
    for name, records in _histories().items():
        with (src / f"{name}.jsonl").open("w") as f:
            write_jsonl(records, f)
    out = tmp_path_factory.mktemp("pei-out")
    capture = pytest.MonkeyPatch()
    printed: list[str] = []
    capture.setattr(
        "builtins.print",
        lambda *a, **k: printed.append(" ".join(map(str, a))) if k.get("file") is None else None,
    )
    try:
        code = main(["analyze", str(src), "--per-file", "--drained", "--out", str(out)])
    finally:
        capture.undo()
    summary = json.loads((out / "summary.json").read_text())
    return Run(code, out, "\n".join(printed), summary)


def test_analyze_flags_the_injected_priority_violation(analysed: Run) -> None:
    assert analysed.code == 1
    (violated,) = analysed.histories("violated")
    for model in ("linearizable", "sc"):
        assert violated["verdicts"][model]["ok"] is False
        # > 100 ops: the failed certificate proves nothing; the patterns prove it.
        assert violated["verdicts"][model]["method"] == "patterns"
        assert violated["verdicts"][model]["decided"] is True
    assert {"certificate", "patterns"} <= {f["family"] for f in violated["findings"]}
    (clean,) = analysed.histories("clean")
    assert clean["verdicts"]["linearizable"] == {
        "ok": True,
        "decided": True,
        "method": "certificate",
        "reason": None,
    }
    assert clean["levels"] == [0, 1, 2, 3]
    assert "violated.jsonl: linearizable/patterns/queue: VIOLATION" in analysed.stdout


def test_analyze_reports_the_pei_the_local_functions_give(analysed: Run) -> None:
    histories = _histories()
    for stem, queue in [
        ("clean", None),
        ("violated", None),
        ("unordered", None),
        ("named", "pq"),
        ("named", "jobs"),
    ]:
        row = analysed.pei(stem, queue)
        method, s = local([r for r in histories[stem] if r.queue == queue])
        assert (
            row["method"],
            row["count"],
            row["median"],
            row["mean"],
            row["p90"],
            row["p99"],
            row["max"],
        ) == (method, s.count, s.median, s.mean, s.p90, s.p99, s.max), (stem, queue)
    assert analysed.pei("clean")["max"] == 0 and analysed.pei("violated")["max"] > 0
    assert analysed.pei("unordered")["method"] == OBSERVED
    report = (analysed.out / "report.md").read_text()
    assert "## Popped element index (PEI)" in report and "observed lower bound" in report
    assert "clean.jsonl: PEI (exact at ord) over" in analysed.stdout


def test_named_queues_get_their_own_verdicts(analysed: Run) -> None:
    units = {h["queue"]: h for h in analysed.histories("named")}
    assert set(units) == {"pq", "jobs"}
    recs = _histories()["named"]
    for queue, h in units.items():
        mine = [r for r in recs if r.queue == queue]
        assert h["verdicts"]["linearizable"]["ok"] == check(mine, drained=True).ok is True
