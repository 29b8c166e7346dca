"""Property: processes that crash and restart from their durable record (issue 11) keep
every history linearizable and lose nothing, with and without churn.

The adversarial scheduler crashes random processes at random moments
(skueue/sim/crashes.py): after their last sync (the process is rebuilt from its snapshot
and the inputs logged after it) or in the middle of a step, before its sync (the step's
input is lost: a message stays in flight, a tick is gone, a client retries its request).
Every restart checks that the replay gives the effects of the first run and the state
that was thrown away; a difference raises DeterminismError with the seed.

Hypothesis draws the cluster, the workload, the churn, how many crashes, how many of them
come before the sync and how often a process takes a snapshot; a failure prints the
config that replays it:  AsyncSim(AsyncConfig(...)).run()

The quick profile (CI) keeps the clusters and workloads small; SKUEUE_PROFILE=long runs
many more examples of the same properties.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from skueue.core.ops import Structure
from skueue.sim.adversary import AsyncConfig
from tests.property.test_churn import run_and_check as run_and_check_ring
from tests.property.test_protocol_schedules import run_and_check

ratios = st.one_of(st.sampled_from([0.0, 1.0, 0.6]), st.floats(0.0, 1.0))
before_sync = st.one_of(st.sampled_from([0.0, 0.3, 1.0]), st.floats(0.0, 1.0))
# 0: never (every restart replays from the process's creation); 1: after every input.
snapshot_every = st.sampled_from([0, 1, 5, 40])


@st.composite
def crash_configs(draw: st.DrawFn, structure: Structure, churn: bool) -> AsyncConfig:
    return AsyncConfig(
        processes=draw(st.integers(1, 10)),
        structure=structure,
        operations=draw(st.integers(0, 50)),
        insert_ratio=draw(ratios),
        seed=draw(st.integers(0, 2**32 - 1)),
        joins=draw(st.integers(0, 4)) if churn else 0,
        leaves=draw(st.integers(0, 4)) if churn else 0,
        crashes=draw(st.integers(1, 10)),
        crash_before_sync_ratio=draw(before_sync),
        snapshot_every=draw(snapshot_every),
    )


@given(crash_configs(Structure.QUEUE, churn=False))
def test_queue_survives_crashes(config: AsyncConfig) -> None:
    run_and_check(config)


@given(crash_configs(Structure.STACK, churn=False))
def test_stack_survives_crashes(config: AsyncConfig) -> None:
    run_and_check(config)


# With churn, test_churn's check: the same histories and drain, and the ring and tree
# exactly right after quiescence (a restarted joiner or leaver must still fit in).


@given(crash_configs(Structure.QUEUE, churn=True))
def test_queue_survives_crashes_with_churn(config: AsyncConfig) -> None:
    run_and_check_ring(config)


@given(crash_configs(Structure.STACK, churn=True))
def test_stack_survives_crashes_with_churn(config: AsyncConfig) -> None:
    run_and_check_ring(config)
