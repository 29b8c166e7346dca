"""The checkers on queues with priority levels (issue 14 item 4): the certificate, the
exact search and the patterns accept what a priority queue may do (a more urgent element
overtaking an older, less urgent one) and each finds an injected violation (a less urgent
element returned while a more urgent one was present; FIFO broken within a level)."""

from __future__ import annotations

import io

import pytest

from skueue.check.checker import check
from skueue.check.history import HistoryError, Record, read_jsonl, record_from_json, write_jsonl
from skueue.core.ops import Structure
from skueue.sim.adversary import AsyncConfig
from tests.property.test_priority_schedules import PrioritySim


def seq(*ops: tuple[str, str | None, int]) -> list[Record]:
    """One process, one op after another in real time, ranks in that order."""
    return [
        Record("A", i, op, value, 2 * i, 2 * i + 1, ord=i, priority=priority or None)
        for i, (op, value, priority) in enumerate(ops)
    ]


GOOD = seq(
    ("enqueue", "old-low", 2),
    ("enqueue", "new-top", 0),
    ("enqueue", "mid", 1),
    ("dequeue", "new-top", 0),  # overtakes the older, less urgent one
    ("dequeue", "mid", 0),
    ("dequeue", "old-low", 0),
    ("dequeue", None, 0),
)
LESS_URGENT_FIRST = seq(
    ("enqueue", "low", 2),
    ("enqueue", "top", 0),
    ("dequeue", "low", 0),  # "top" was there
    ("dequeue", "top", 0),
)
FIFO_BROKEN = seq(
    ("enqueue", "a", 1),
    ("enqueue", "b", 1),
    ("dequeue", "b", 0),
    ("dequeue", "a", 0),
)


@pytest.mark.parametrize("method", ["certificate", "exact", "patterns"])
def test_a_priority_queue_history_passes_every_method(method: str) -> None:
    verdict = check(GOOD, model="linearizable", method=method, drained=True)
    assert verdict.ok, verdict.describe()


@pytest.mark.parametrize("method", ["certificate", "exact", "patterns"])
@pytest.mark.parametrize("history", [LESS_URGENT_FIRST, FIFO_BROKEN], ids=["levels", "fifo"])
def test_injected_violations_are_found_by_every_method(history: list[Record], method: str) -> None:
    verdict = check(history, model="linearizable", method=method)
    assert not verdict.ok, f"{method} missed it"


def test_the_pattern_names_the_more_urgent_element() -> None:
    verdict = check(LESS_URGENT_FIRST, model="linearizable", method="patterns")
    assert "'low'" not in verdict.describe() or "level 0" in verdict.describe()
    assert "priority" in verdict.describe(), verdict.describe()


def test_the_priority_field_round_trips_and_is_checked() -> None:
    out = io.StringIO()
    write_jsonl(GOOD, out)
    assert read_jsonl(io.StringIO(out.getvalue())) == GOOD
    with pytest.raises(HistoryError, match="priority"):
        record_from_json({"process": "A", "seq": 0, "op": "dequeue", "value": None,
                          "invoke": 0, "response": 1, "priority": 1})  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_simulated_priority_histories_are_certified(seed: int) -> None:
    """The recorder marks each insert with the level its position says."""
    sim = PrioritySim(AsyncConfig(4, Structure.QUEUE, 0, 0.6, seed), 4, 150)
    result = sim.run()
    records = [r for r in result.records if r.queue == "pq" and r.op != "create"]
    assert any(r.priority for r in records)
    for method in ("certificate", "patterns"):
        verdict = check(records, model="linearizable", method=method)
        assert verdict.ok, f"seed {seed}: {verdict.describe()}"
