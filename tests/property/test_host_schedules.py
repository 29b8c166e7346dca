"""Property: the hosts of a simulated cluster (skueue/sim/hosts.py) keep their promises on
every schedule, with client retries, deadlines, blocking removes, members joining and
leaving, and crashes and restarts (issue 29: the host layer explored by the simulator,
not only by real daemons).

- Every crash replays: each logged input gives again the effects it gave, and the
  rebuilt host equals the one lost (DeterminismError with the seed otherwise).
- A request sent again after a timeout, a broken connection or a crash gets its first
  attempt's outcome, never a second effect: no element is inserted twice (unique
  values) or lost (the drain returns each exactly once); a request sent to a member
  that is leaving is refused without effect and goes to another member.
- The history is sequentially consistent and linearizable; after churn, the ring and
  the tree are exactly right.

Leases are tests/property/test_lease_schedules.py's; crashes with churn, on queues and
stacks, test_crash_schedules.py's.  Hypothesis draws the config, seed included; a
failure prints the call that replays it: ``HostsSim(HostsConfig(...)).run()``.
SKUEUE_PROFILE=long runs many more examples.
"""

from __future__ import annotations

from hypothesis import given

from skueue.sim.hosts import HostsConfig, HostsSim
from tests.property.host_runs import check_run, host_configs, run_hosts


@given(host_configs())
def test_hosts_survive_retries_deadlines_churn_and_crashes(config: HostsConfig) -> None:
    check_run(*run_hosts(config))


def test_a_crash_schedule_replays_from_its_seed() -> None:
    """The same config gives the same run: a failure's seed is all it takes to replay."""
    config = HostsConfig(processes=3, operations=30, crashes=3, timeout_steps=30,
                         lease_ratio=0.3, joins=1, leaves=1, delivery="any",
                         seed=7)  # fmt: skip
    first, again = HostsSim(config).run(), HostsSim(config).run()
    assert first.records == again.records and first.lease_events == again.lease_events
    assert first.stats == again.stats and first.steps == again.steps
    assert first.stats.crashes + sum(first.stats.lost.values()) == 3
    assert first.stats.replayed > 0
