"""The synchronous-rounds simulator with priority levels (issue 14): a queue made with P
levels, enqueues at random levels, a prefill before the first round."""

from __future__ import annotations

import collections

import pytest

from skueue.check.pei import pei_by_order
from skueue.core.ops import Structure
from skueue.sim.rounds import PRIORITY_QUEUE, SETUP_PHASE, SyncConfig, SyncSim


def test_a_priority_queue_in_rounds_pops_the_most_urgent_element_every_time() -> None:
    """Every dequeue's popped element index (seed 000) is 0 on the anchor's order."""
    config = SyncConfig(processes=12, rounds=80, priorities=4, prefill=60, seed=5)
    records = SyncSim(config).run().records
    assert {r.queue for r in records} == {PRIORITY_QUEUE}
    levels = collections.Counter(r.priority or 0 for r in records if r.op == "enqueue")
    assert sorted(levels) == [0, 1, 2, 3], levels
    pei = pei_by_order(records)
    assert len(pei) > 300  # dequeues that took an element, prefilled ones among them
    assert set(pei) == {0}


def test_setup_records_are_marked_and_come_before_the_requests() -> None:
    config = SyncConfig(processes=5, rounds=10, priorities=2, prefill=25, seed=1)
    records = SyncSim(config).run().records
    setup = [r for r in records if r.phase == SETUP_PHASE]
    rest = [r for r in records if r.phase is None]
    assert collections.Counter(r.op for r in setup) == {"create": 1, "enqueue": 25}
    assert len(rest) == 10 * config.rate
    assert max(r.response for r in setup) < min(r.invoke for r in rest)


def test_a_prefill_alone_stays_on_the_default_queue() -> None:
    records = SyncSim(SyncConfig(processes=3, rounds=5, prefill=7, seed=2)).run().records
    assert {r.queue for r in records} == {None}
    assert sum(r.phase == SETUP_PHASE for r in records) == 7


@pytest.mark.parametrize(
    "changes",
    [{"priorities": 0}, {"priorities": 17}, {"prefill": -1},
     {"priorities": 2, "structure": Structure.STACK}],
)  # fmt: skip
def test_bad_priority_settings_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SyncConfig(**changes)  # type: ignore[arg-type]
