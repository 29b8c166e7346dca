"""Property: with processes joining and leaving in the middle of the workload, every
history is linearizable, nothing is lost, and the ring and tree end up exactly right.

Hypothesis draws the cluster size (1-24), churn (joins and leaves, never below one
process), the insert ratio, the workload and the scheduler's seed; a failure prints the
AsyncConfig that replays it:  AsyncSim(AsyncConfig(...)).run()

After quiescence every live node's pred/succ must match the sorted order of the live
nodes and its tree edges the ones SPEC §3 defines (``ring_problems``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.check.checker import check
from skueue.core.effects import Effect, Send
from skueue.core.ops import Structure
from skueue.core.process import Process
from skueue.overlay.labels import left_label, middle_label
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.cluster import ring_problems

# Ids whose left labels lie below 0.0012: a joiner with one of them lands left of the
# anchor of almost any ring, which makes the anchor hand its counters over.
LOW_IDS = ("low1326", "low467", "low312", "low1571", "low397")

ratios = st.one_of(st.sampled_from([0.0, 1.0, 0.6]), st.floats(0.0, 1.0))


def run_and_check(config: AsyncConfig, sim: AsyncSim | None = None) -> AsyncSim:
    replay = f"replay with: AsyncSim({config!r}).run()"
    if currently_in_test_context():
        note(replay)
    sim = sim or AsyncSim(config)
    result = sim.run()
    records = result.records
    for model in ("sc", "linearizable"):
        verdict = check(records, model=model, method="certificate")
        assert verdict.ok, f"{verdict.describe()}\n{replay}"
    inserted = Counter(r.value for r in records if r.op in ("enqueue", "push"))
    removed = Counter(r.value for r in records if r.op in ("dequeue", "pop") and r.value)
    assert removed == inserted, (
        f"lost {sorted((inserted - removed).elements())[:5]}, "
        f"extra {sorted((removed - inserted).elements())[:5]}\n{replay}"
    )
    problems = ring_problems(sim.order)
    assert not problems, "\n".join([*problems[:10], replay])
    return sim


@given(
    processes=st.integers(1, 24),
    structure=st.sampled_from(list(Structure)),
    joins=st.integers(0, 6),
    leaves=st.integers(0, 6),
    ratio=ratios,
    operations=st.integers(0, 60),
    seed=st.integers(0, 2**32 - 1),
)
def test_churn_keeps_histories_linearizable_and_the_ring_exact(
    processes: int,
    structure: Structure,
    joins: int,
    leaves: int,
    ratio: float,
    operations: int,
    seed: int,
) -> None:
    run_and_check(
        AsyncConfig(processes, structure, operations, ratio, seed, joins=joins, leaves=leaves)
    )


@given(
    processes=st.integers(2, 12),
    structure=st.sampled_from(list(Structure)),
    leaves=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_anchors_process_leaving(
    processes: int, structure: Structure, leaves: int, seed: int
) -> None:
    """Every leave takes the process holding the anchor's counters, which must move to
    the new minimum node (SPEC §8, anchor change)."""
    run_and_check(
        AsyncConfig(processes, structure, 40, 0.6, seed, leaves=leaves, leave_anchor=True)
    )


@given(
    processes=st.integers(1, 12),
    structure=st.sampled_from(list(Structure)),
    joins=st.integers(1, len(LOW_IDS)),
    seed=st.integers(0, 2**32 - 1),
)
def test_joiners_left_of_the_anchor(
    processes: int, structure: Structure, joins: int, seed: int
) -> None:
    run_and_check(AsyncConfig(processes, structure, 40, 0.6, seed, joins=joins, join_ids=LOW_IDS))


def test_low_ids_really_land_left_of_the_anchor() -> None:
    """The targeted test above is only worth something if its joiners become the minimum."""
    sim = run_and_check(
        AsyncConfig(6, Structure.QUEUE, 20, 0.6, seed=5, joins=1, join_ids=LOW_IDS[:1])
    )
    ring_minimum = min(
        (left_label(middle_label(p.process_id)), p.process_id) for p in sim.order if not p.departed
    )
    assert ring_minimum[1] == LOW_IDS[0]
    assert sim.anchor_process().process_id == LOW_IDS[0]


@pytest.mark.parametrize("structure", list(Structure))
def test_everyone_but_one_leaves(structure: Structure) -> None:
    """Leaving down to a single process: neighbouring leavers go one after the other."""
    sim = run_and_check(AsyncConfig(6, structure, 60, 0.6, seed=11, leaves=5))
    assert sum(1 for p in sim.order if not p.departed) == 1


def spy_messages(sim: AsyncSim) -> list[Any]:
    """Every message the simulation's processes send, in order."""
    sent: list[Any] = []
    apply = sim._apply

    def spy(process: Process, effects: list[Effect]) -> None:
        sent.extend(e.message for e in effects if isinstance(e, Send))
        apply(process, effects)

    sim._apply = spy  # type: ignore[method-assign]
    return sent


# Elements of 400 characters and handovers of at most 2 KiB (the least the core takes):
# a handover of more than a couple of entries goes in several pieces.
BIG_VALUE = 400
SMALL_HANDOVER = 2048


@given(
    processes=st.integers(2, 10),
    structure=st.sampled_from(list(Structure)),
    joins=st.integers(0, 3),
    leaves=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_large_handovers_go_in_bounded_pieces(
    processes: int, structure: Structure, joins: int, leaves: int, seed: int
) -> None:
    """Leaves (and joins) that move many large elements split their handover into
    pieces, which arrive in any order; every element still comes out exactly once."""
    leaves = min(leaves, processes - 1)
    config = AsyncConfig(
        processes,
        structure,
        80,
        0.85,
        seed,
        joins=joins,
        leaves=leaves,
        value_bytes=BIG_VALUE,
        handover_bytes_max=SMALL_HANDOVER,
    )
    run_and_check(config)


@pytest.mark.parametrize("structure", list(Structure))
def test_split_handovers_really_happen(structure: Structure) -> None:
    """The property above is only worth something if leaves and joins really went in
    pieces, some of them overtaken by their final message."""
    parts = Counter[str]()
    early_finals = 0  # steps at which a final message waited for its pieces
    for seed in range(4):
        # 400 operations: with keys by blocks of 64 positions (docs/dht_blocks.md) a
        # joiner takes entries only if a block's key falls in its interval, and 120
        # operations filled about two blocks, which joiners seldom split.
        config = AsyncConfig(
            5,
            structure,
            400,
            0.9,
            seed,
            joins=2,
            leaves=3,
            value_bytes=BIG_VALUE,
            handover_bytes_max=SMALL_HANDOVER,
        )
        sim = AsyncSim(config)
        sent = spy_messages(sim)
        while not sim.finished() and sim.steps < config.max_steps:
            sim.step()
            nodes = [n for p in sim.order for n in p.nodes.values()]
            early_finals += sum(len(n.member.incoming.finals) for n in nodes)
        run_and_check(config, sim)
        parts.update(type(m).__name__ for m in sent if getattr(m, "parts", 0))
        nodes = [n for p in sim.order for n in p.nodes.values()]
        unfinished = [n.describe() for n in nodes if n.member.incoming.parts]
        assert not unfinished, unfinished
    assert parts["Departing"] > 0 and parts["Integrate"] > 0, parts
    assert early_finals > 0, "no final message ever overtook its pieces"
