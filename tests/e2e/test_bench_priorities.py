"""``skueue bench --queue NAME --priorities P`` makes a priority queue's history from the
command line (issue 28, item 23): the queue is made with P levels first, enqueues go to
random levels, and the history is linearizable with PEI 0, for the local checkers and
for ``skueue analyze``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from skueue.check.checker import check
from skueue.check.history import Record, read_jsonl
from skueue.check.pei import pei_by_order
from skueue.cli.skueue import main
from tests.e2e.test_cli import skueue

LEVELS = 3


@attrs.frozen
class Run:
    report: dict[str, Any]
    path: Path
    records: list[Record]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    path = tmp_path_factory.mktemp("bench") / "priorities.jsonl"
    out = skueue(
        "bench", "--spawn", "2", "--in-memory", "--queue", "pq", "--priorities", str(LEVELS),
        "--ops", "400", "--clients", "3", "--enqueue-ratio", "0.6", "--history", str(path),
        "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert b"made pq with 3 priority levels" in out.stderr
    with path.open() as f:
        records = read_jsonl(f)
    yield Run(json.loads(out.stdout), path, records)


def test_bench_makes_a_priority_history(run: Run) -> None:
    assert (run.report["queues"], run.report["priorities"]) == (["pq"], LEVELS)
    assert run.report["linearizable"] is True, run.report["verdict"]
    assert {r.queue for r in run.records} == {"pq"}
    assert {r.priority or 0 for r in run.records if r.op == "enqueue"} == set(range(LEVELS))
    verdict = check(run.records, model="linearizable", drained=True)
    assert (verdict.ok, verdict.method) == (True, "certificate"), verdict.describe()
    assert set(pei_by_order(run.records)) == {0}


@pytest.mark.spark
@pytest.mark.usefixtures("spark")  # the tests' session (tests/conftest.py)
def test_analyze_measures_the_pei_of_the_bench_history(
    run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(run.path), "--drained", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "queue pq: PEI (exact at ord)" in printed and "median 0" in printed
    (unit,) = json.loads((tmp_path / "summary.json").read_text())["histories"]
    assert unit["levels"] == list(range(LEVELS))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--priorities", "3"], "--priorities needs --queue NAME"),
        (["--priorities", "17", "--queue", "pq"],
         "--priorities: 17 is over the limit of 16 (PRIORITIES_MAX)"),
        (["--queue", "no spaces"], "only ASCII letters, digits"),
        (["--spawn", "1", "--structure", "stack", "--queue", "s", "--priorities", "2"],
         "a stack has no priority levels"),
    ],
)
def test_bench_refuses_queue_settings_it_cannot_run(args: list[str], message: str) -> None:
    # Refused before anything starts: no daemon at the address, none spawned.
    where = [] if "--spawn" in args else ["--nodes", "127.0.0.1:1"]
    out = skueue("bench", *args, *where)
    err = out.stderr.decode(errors="replace")
    assert out.returncode == 2, err
    assert message in err and len(err.strip().splitlines()) == 1, err
