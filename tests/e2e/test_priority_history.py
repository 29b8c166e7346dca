"""Issue 14 on real daemons: a mixed-priority workload's history is linearizable, loses
and duplicates nothing, and every dequeue popped the most urgent element (PEI 0), by the
local checkers and by ``skueue analyze``.

Three ``skueued`` serve a queue made with four levels; four clients (two requests in
flight each, spread over the daemons) enqueue at random levels and dequeue, then a drain
empties it.  Each enqueue's level in the history is the one its position says the daemon
assigned (:func:`skueue.sim.recorder.insert_level`), so the checkers hold the daemons to
what they did, not to what was asked.  The run happens once per module: the Spark test
analyses the very history file the local checks read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import attrs
import pytest

import skueue
from skueue.check.checker import check
from skueue.check.history import Record, write_jsonl
from skueue.check.pei import pei_by_order, pei_observed
from skueue.cli.skueue import main
from skueue.cluster.loadgen import LoadConfig, LoadResult, run_load
from tests.e2e.daemons import Daemon, start_cluster, stop_and_check
from tests.e2e.oracle import assert_history_ok

QUEUE = "pq"
LEVELS = 4
LOAD_TIMEOUT_S = 120.0


@attrs.frozen
class Run:
    config: LoadConfig
    result: LoadResult
    path: Path

    @property
    def records(self) -> list[Record]:
        return self.result.records


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    started: list[Daemon] = []
    try:
        cluster = start_cluster(3, "queue", tmp_path_factory.mktemp("skueued"), started)
        with skueue.connect_blocking(cluster.addresses[0]) as q:
            q.create_queue(QUEUE, priorities=LEVELS)
        config = LoadConfig(
            nodes=tuple(cluster.addresses), clients=4, ops=1500, insert_ratio=0.55,
            value_bytes=32, seed=14, in_flight=2, queues=(QUEUE,), priorities=LEVELS,
        )  # fmt: skip

        async def bounded() -> LoadResult:
            with anyio.fail_after(LOAD_TIMEOUT_S):
                return await run_load(config)

        result = anyio.run(bounded)
    finally:
        stop_and_check(started)
    path = tmp_path_factory.mktemp("history") / "priorities.jsonl"
    with path.open("w") as f:
        write_jsonl(result.records, f)
    yield Run(config, result, path)


def test_a_mixed_priority_workload_is_linearizable_with_pei_zero(run: Run) -> None:
    records = run.records
    assert {r.queue for r in records} == {QUEUE}
    levels = {r.priority or 0 for r in records if r.op == "enqueue"}
    assert levels == set(range(LEVELS)), levels
    # Linearizable and SC by the certificate, every element removed exactly once.
    assert_history_ok(run.result, run.config)
    verdict = check(records, model="linearizable", drained=True)
    assert (verdict.ok, verdict.method) == (True, "certificate"), verdict.describe()
    removed = sum(r.op == "dequeue" and r.value is not None for r in records)
    by_order = pei_by_order(records)
    assert len(by_order) == removed and set(by_order) == {0}
    assert set(pei_observed(records)) == {0}
    # The levels mattered: some element was dequeued before an older, less urgent one.
    assert _overtakes(records) > 0


@pytest.mark.spark
@pytest.mark.usefixtures("spark")  # the tests' session (tests/conftest.py)
def test_analyze_reports_pei_zero_on_the_same_history(
    run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "analysis"
    code = main(["analyze", str(run.path), "--drained", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    summary = json.loads((out / "summary.json").read_text())
    (unit,) = summary["histories"]
    assert unit["queue"] == QUEUE and unit["levels"] == list(range(LEVELS))
    assert unit["verdicts"]["linearizable"] == {"ok": True, "decided": True,
                                                "method": "certificate", "reason": None}
    (pei,) = summary["pei"]
    removed = sum(r.op == "dequeue" and r.value is not None for r in run.records)
    assert (pei["queue"], pei["method"], pei["count"]) == (QUEUE, "exact at ord", removed)
    assert (pei["median"], pei["mean"], pei["p90"], pei["p99"], pei["max"]) == (0, 0, 0, 0, 0)
    assert f"queue {QUEUE}: PEI (exact at ord) over {removed} dequeues: median 0" in printed


def _overtakes(records: list[Record]) -> int:
    """Dequeues (in ord order) that took an element inserted after a less urgent one that
    was still in the queue."""
    inserted = {r.value: r for r in records if r.op == "enqueue"}
    present: dict[str, Record] = {}
    count = 0
    for r in sorted(records, key=lambda r: r.ord or 0):
        if r.op == "enqueue":
            present[str(r.value)] = r
        elif r.value is not None:
            mine = inserted[r.value]
            count += any((x.priority or 0) > (mine.priority or 0) and (x.ord or 0) < (mine.ord or 0)
                         for x in present.values())  # fmt: skip
            del present[r.value]
    return count
