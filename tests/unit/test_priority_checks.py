"""The checkers on queues with priority levels (issue 14 item 4): the certificate, the
exact search and the patterns accept what a priority queue may do (a more urgent element
overtaking an older, less urgent one) and each finds an injected violation (a less urgent
element returned while a more urgent one was present; FIFO broken within a level)."""

from __future__ import annotations

import io

import attrs
import pytest

from skueue.check.certificate import peek_violations
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


WITH_PEEKS = seq(
    ("peek", None, 0),
    ("enqueue", "low", 2),
    ("peek", "low", 0),
    ("enqueue", "top", 0),
    ("peek", "top", 0),  # the more urgent one is the head now
    ("peek", "top", 0),  # and stays: a peek removes nothing
    ("dequeue", "top", 0),
    ("peek", "low", 0),
    ("dequeue", "low", 0),
    ("peek", None, 0),
)
PEEK_AT_THE_WRONG_HEAD = seq(
    ("enqueue", "low", 2),
    ("enqueue", "top", 0),
    ("peek", "low", 0),  # "top" was the head
    ("dequeue", "top", 0),
    ("dequeue", "low", 0),
)
PEEK_SAW_NOTHING = seq(
    ("enqueue", "a", 0),
    ("peek", None, 0),  # "a" was there
    ("dequeue", "a", 0),
)


@pytest.mark.parametrize("method", ["certificate", "exact", "patterns"])
def test_peeks_pass_every_method(method: str) -> None:
    verdict = check(WITH_PEEKS, model="linearizable", method=method, drained=True)
    assert verdict.ok, verdict.describe()


@pytest.mark.parametrize("method", ["certificate", "exact"])
@pytest.mark.parametrize(
    "history", [PEEK_AT_THE_WRONG_HEAD, PEEK_SAW_NOTHING], ids=["wrong-head", "saw-nothing"]
)
def test_a_peek_that_saw_the_wrong_head_is_found(history: list[Record], method: str) -> None:
    """The patterns pass over peeks (they look at what removals did), so only the
    methods that replay an order can find these."""
    verdict = check(history, model="linearizable", method=method)
    assert not verdict.ok, f"{method} missed it"
    assert "peek" in verdict.describe(), verdict.describe()


def test_a_peek_is_a_queue_operation_and_round_trips() -> None:
    out = io.StringIO()
    write_jsonl(WITH_PEEKS, out)
    assert read_jsonl(io.StringIO(out.getvalue())) == WITH_PEEKS
    with pytest.raises(ValueError, match="mixes queue and stack"):
        check([*seq(("push", "x", 0)), Record("B", 0, "peek", None, 0, 1)])


@pytest.mark.parametrize("seed", range(3))
def test_simulated_histories_with_peeks_pass_the_exact_search(seed: int) -> None:
    """Small simulated runs (peeks among them), decided by search without the ords."""
    sim = PrioritySim(AsyncConfig(3, Structure.QUEUE, 0, 0.6, seed), 2, 24)
    result = sim.run()
    records = [r for r in result.records if r.queue == "pq" and r.op != "create"]
    assert any(r.op == "peek" for r in records)
    stripped = [attrs.evolve(r, ord=None) for r in records]
    verdict = check(stripped, model="linearizable", method="exact")
    assert verdict.ok, f"seed {seed}: {verdict.describe()}"


def test_peek_violations_judge_each_peek_alone() -> None:
    """What ``skueue analyze`` runs beside its distributed certificate (analysis/peeks.py)."""
    assert peek_violations(WITH_PEEKS) == []
    (found,) = peek_violations(PEEK_AT_THE_WRONG_HEAD)
    assert "saw 'low', but 'top' was at the front" in found
    (found,) = peek_violations(PEEK_SAW_NOTHING)
    assert "saw None, but 'a' was at the front" in found
    # Another violation before it (a removal out of order) does not blur the peek's.
    broken = seq(("enqueue", "a", 0), ("enqueue", "b", 0), ("dequeue", "b", 0),
                 ("peek", "a", 0), ("peek", "b", 0))  # fmt: skip
    assert [f.split(" saw ")[1] for f in peek_violations(broken)] == [
        "'b', but 'a' was at the front"
    ]
