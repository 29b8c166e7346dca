"""Property: the hosts of a simulated cluster (skueue/sim/hosts.py) keep their promises on
every schedule, with crashes and restarts, client retries, deadlines, blocking removes
and leases (issue 29: the host layer explored by the simulator, not only by real
daemons).

- Every crash replays: each logged input gives again the effects it gave, and the
  rebuilt host equals the one lost (DeterminismError with the seed otherwise).
- A request sent again after a timeout or a crash gets its first attempt's outcome,
  never a second effect: no element is enqueued twice (unique values) or lost.
- The history is linearizable; without leases, drained, nothing is lost.
- With leases, the lease checker finds nothing (every element acked, taken or drained
  exactly once; never leased twice at once; delivery counts rise), and each element's
  first removal keeps the queue's order.

Hypothesis draws the cluster, the workload, the crashes, the snapshots, the deadlines
and the seed; a failure prints the config that replays it:
``HostsSim(HostsConfig(...)).run()``.  SKUEUE_PROFILE=long runs many more examples.
"""

from __future__ import annotations

from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.check.checker import check
from skueue.check.leases import check_leases
from skueue.core.ops import Structure
from skueue.sim.hosts import HostsConfig, HostsSim
from tests.property.test_lease_schedules import first_removals

ratios = st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 1.0))


@st.composite
def host_configs(draw: st.DrawFn, leases: bool = False) -> HostsConfig:
    return HostsConfig(
        processes=draw(st.integers(1, 6)),
        structure=draw(st.sampled_from(list(Structure))),
        clients=draw(st.integers(1, 4)),
        operations=draw(st.integers(0, 50)),
        insert_ratio=draw(st.floats(0.2, 0.9)),
        seed=draw(st.integers(0, 2**32 - 1)),
        crashes=draw(st.integers(0, 5)),
        before_sync_ratio=draw(ratios),
        snapshot_every=draw(st.sampled_from([0, 1, 5, 40])),
        timeout_steps=draw(st.sampled_from([0, 15, 60, 400])),
        blocking_ratio=draw(st.sampled_from([0.0, 0.3])),
        lease_ratio=draw(st.floats(0.2, 1.0)) if leases else 0.0,
    )


def run_and_check(config: HostsConfig) -> None:
    replay = f"replay with: HostsSim({config!r}).run()"
    if currently_in_test_context():
        note(replay)
    result = HostsSim(config).run()
    assert len(set(result.inserted)) == len(result.inserted), replay
    if config.lease_ratio:
        verdict = check_leases(result.lease_events, result.inserted, taken=result.taken)
        assert verdict.ok, "\n".join([*verdict.problems[:10], replay])
        history = check(first_removals(result.records), method="certificate")
    else:
        taken = sorted(result.taken)
        assert taken == sorted(result.inserted), f"lost or duplicated\n{replay}"
        history = check(result.records, drained=True)
    assert history.ok, f"{history.describe()}\n{replay}"


@given(host_configs())
def test_hosts_survive_crashes_retries_and_deadlines(config: HostsConfig) -> None:
    run_and_check(config)


@given(host_configs(leases=True))
def test_hosts_keep_lease_promises_through_crashes(config: HostsConfig) -> None:
    run_and_check(config)


def test_a_crash_schedule_replays_from_its_seed() -> None:
    """The same config gives the same run: a failure's seed is all it takes to replay."""
    config = HostsConfig(processes=3, operations=30, crashes=3, timeout_steps=30,
                         lease_ratio=0.3, seed=7)  # fmt: skip
    first, again = HostsSim(config).run(), HostsSim(config).run()
    assert first.records == again.records and first.lease_events == again.lease_events
    assert (first.crashes + first.lost_inputs, first.replayed) == (3, again.replayed)
    assert first.replayed > 0
