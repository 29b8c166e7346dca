"""Property: under any adversarial schedule the protocol is linearizable and loses nothing.

Hypothesis draws the cluster size (1-24 processes), the insert ratio (0 to 1), the
number of operations and the scheduler's seed; the seed alone replays the schedule:

    AsyncSim(AsyncConfig(processes=..., structure=..., operations=..., insert_ratio=...,
                         seed=...)).run()

Each history must pass sequential consistency and linearizability (certificate mode,
which verifies the ranks rather than trusting them; small histories also in exact mode,
which ignores the ranks), and the drain must return every element exactly once.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, note
from hypothesis import strategies as st

from skueue.check.checker import check
from skueue.core.ops import Structure
from skueue.sim.adversary import AsyncConfig, AsyncSim

EXACT_LIMIT = 14  # operations; the exact search is exponential in the worst case

ratios = st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(0.0, 1.0))


def run_and_check(config: AsyncConfig) -> None:
    replay = f"replay with: AsyncSim({config!r}).run()"
    note(replay)
    result = AsyncSim(config).run()
    records = result.records
    for model in ("sc", "linearizable"):
        verdict = check(records, model=model, method="certificate")
        assert verdict.ok, f"{verdict.describe()}\n{replay}"
        if len(records) <= EXACT_LIMIT:
            exact = check(records, model=model, method="exact")
            assert exact.ok, f"{exact.describe()}\n{replay}"
    inserted = Counter(r.value for r in records if r.op in ("enqueue", "push"))
    removed = Counter(
        r.value for r in records if r.op in ("dequeue", "pop") and r.value is not None
    )
    assert removed == inserted, (
        f"drain mismatch: lost {sorted((inserted - removed).elements())[:5]}, "
        f"extra {sorted((removed - inserted).elements())[:5]}\n{replay}"
    )
    assert all(count == 1 for count in removed.values()), f"element removed twice\n{replay}"


@given(
    processes=st.integers(1, 24),
    ratio=ratios,
    operations=st.integers(0, 60),
    seed=st.integers(0, 2**32 - 1),
)
def test_queue_schedules_are_linearizable_and_lossless(
    processes: int, ratio: float, operations: int, seed: int
) -> None:
    run_and_check(AsyncConfig(processes, Structure.QUEUE, operations, ratio, seed))


@given(
    processes=st.integers(1, 24),
    ratio=ratios,
    operations=st.integers(0, 60),
    seed=st.integers(0, 2**32 - 1),
)
def test_stack_schedules_are_linearizable_and_lossless(
    processes: int, ratio: float, operations: int, seed: int
) -> None:
    run_and_check(AsyncConfig(processes, Structure.STACK, operations, ratio, seed))


@given(
    processes=st.integers(1, 6),
    structure=st.sampled_from(list(Structure)),
    ratio=ratios,
    seed=st.integers(0, 2**32 - 1),
)
def test_small_histories_agree_with_the_exact_checker(
    processes: int, structure: Structure, ratio: float, seed: int
) -> None:
    """Small enough for the exact search, which does not look at the ranks at all."""
    run_and_check(AsyncConfig(processes, structure, EXACT_LIMIT - 4, ratio, seed))
