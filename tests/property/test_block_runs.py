"""Property: DHT keys by blocks and the run messages (docs/dht_blocks.md) keep every
history linearizable and lose nothing, with batches of consecutive positions crossing
block edges while processes join and leave (hand-overs move whole blocks' entries, and
runs are routed, forwarded and answered across the changes).

Clients send bursts (``AsyncConfig.burst``: several operations of one kind to one
process, as ``enqueue_many`` does), so a node's own positions come in runs, some longer
than a block.  A failure prints the AsyncConfig that replays it:
``AsyncSim(AsyncConfig(...)).run()``.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from skueue.core.effects import Send
from skueue.core.messages.stages import AnswerRun, DhtBundle, DhtRun
from skueue.core.ops import Structure
from skueue.dht.keys import POSITIONS_PER_BLOCK
from skueue.sim.adversary import AsyncConfig, AsyncSim
from tests.property.test_churn import run_and_check


@given(
    processes=st.integers(1, 12),
    structure=st.sampled_from(list(Structure)),
    joins=st.integers(0, 4),
    leaves=st.integers(0, 4),
    ratio=st.sampled_from([0.5, 0.6, 0.7]),
    operations=st.integers(1, 12),
    burst=st.sampled_from([2, 7, POSITIONS_PER_BLOCK - 1, POSITIONS_PER_BLOCK + 3]),
    seed=st.integers(0, 2**32 - 1),
)
def test_runs_of_positions_across_join_and_leave_stay_linearizable(
    processes: int,
    structure: Structure,
    joins: int,
    leaves: int,
    ratio: float,
    operations: int,
    burst: int,
    seed: int,
) -> None:
    config = AsyncConfig(
        processes, structure, operations, ratio, seed, joins=joins, leaves=leaves, burst=burst
    )
    run_and_check(config)


class CountingSim(AsyncSim):
    """The adversary, counting the run messages that cross processes."""

    def __init__(self, config: AsyncConfig) -> None:
        super().__init__(config)
        self.runs = 0
        self.answer_runs = 0

    def _apply(self, process, effects):  # type: ignore[no-untyped-def]
        for e in effects:
            if isinstance(e, Send):
                inner = e.message.messages if isinstance(e.message, DhtBundle) else (e.message,)
                self.runs += sum(isinstance(m, DhtRun) for m in inner)
                self.answer_runs += sum(isinstance(m, AnswerRun) for m in inner)
        super()._apply(process, effects)


def test_bursts_across_churn_travel_as_runs_and_stay_linearizable() -> None:
    """A fixed schedule whose bursts do go as runs (the property above could pass with
    every request sent alone)."""
    for structure in Structure:
        config = AsyncConfig(6, structure, 10, 0.6, seed=30, joins=2, leaves=2, burst=40)
        sim = CountingSim(config)
        run_and_check(config, sim)
        assert sim.runs > 0 and sim.answer_runs > 0, (sim.runs, sim.answer_runs, config)
