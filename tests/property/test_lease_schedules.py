"""Property: leases on every schedule (issue 12, item 8).  The adversarial scheduler
delivers messages in any order, with joins and leaves, while a share of the
removes take leases that consumers ack or nack at random moments and that expire on the
scheduler's clock; a delivery limit sends some elements to the dead letters.

After the drain (the queue, then its dead letters):

- the lease checker (skueue/check/leases.py) finds nothing: every element acked, taken
  by a plain remove, or drained exactly once; never leased twice at once; delivery
  counts that rise;
- the queue's order holds between redeliveries: the history of the inserts and each
  element's *first* removal (a returned element is a new insertion, which the clients
  never see, so its later removals are left out) is linearizable.

The adversarial scheduler drives the core alone, its messages in any order; the hosts
simulator (skueue/sim/hosts.py) drives the daemon's hosts, with their clients, the
leases they hold, their connections that close, and crashes and restarts (a restart
returns the leases of the last life).  Both must keep the same promises.

Hypothesis draws the cluster, the churn, the lease share, the limit, the crashes and the
seed; a failure prints the call that replays it:  AsyncSim(AsyncConfig(...)).run() or
HostsSim(HostsConfig(...)).run()
"""

from __future__ import annotations

from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.check.checker import check
from skueue.check.history import INSERT_OPS
from skueue.check.leases import check_leases
from skueue.core.ops import Structure
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.hosts import HostsConfig
from tests.property.host_runs import check_run, first_removals, host_configs, run_hosts


def run_and_check(config: AsyncConfig) -> None:
    replay = f"replay with: AsyncSim({config!r}).run()"
    if currently_in_test_context():
        note(replay)
    result = AsyncSim(config).run()
    inserted = [r.value for r in result.records if r.op in INSERT_OPS and r.value is not None]
    verdict = check_leases(
        result.lease_events, inserted, left=result.drained, dead=result.dead, taken=result.taken
    )
    assert verdict.ok, "\n".join([*verdict.problems[:10], replay])
    if not config.max_deliveries:
        assert not result.dead, replay
    history = check(first_removals(result.records), model="linearizable", method="certificate")
    assert history.ok, f"{history.describe()}\n{replay}"


@given(
    processes=st.integers(1, 10),
    structure=st.sampled_from(list(Structure)),
    operations=st.integers(0, 120),
    ratio=st.floats(0.2, 0.9),
    lease_ratio=st.floats(0.2, 1.0),
    max_deliveries=st.sampled_from([0, 1, 3]),
    joins=st.integers(0, 3),
    leaves=st.integers(0, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_leases_keep_their_promises_on_every_schedule(
    processes: int,
    structure: Structure,
    operations: int,
    ratio: float,
    lease_ratio: float,
    max_deliveries: int,
    joins: int,
    leaves: int,
    seed: int,
) -> None:
    run_and_check(
        AsyncConfig(
            processes, structure, operations, ratio, seed, joins=joins, leaves=leaves,
            lease_ratio=lease_ratio, max_deliveries=max_deliveries,
        )  # fmt: skip
    )


@given(host_configs(leases=True, crashes=(1, 4)))
def test_hosts_keep_lease_promises_through_crashes_and_churn(config: HostsConfig) -> None:
    """The same promises from the daemon's hosts: leases held by connections (a closed
    one returns its leases), expired on the lease clock, returned at a restart and at a
    leave, acked or nacked by requests that may be sent again."""
    check_run(*run_hosts(config))


def test_a_schedule_with_every_lease_event_happens() -> None:
    """The drawn schedules are only worth something if leases expire, come back and reach
    the dead letters: one fixed seed shows each."""
    config = AsyncConfig(
        5, Structure.QUEUE, 150, 0.6, seed=6, lease_ratio=0.8, max_deliveries=2, leaves=1
    )
    result = AsyncSim(config).run()
    kinds = {e.event for e in result.lease_events}
    assert kinds == {"lease", "ack", "nack", "close"}
    assert any(e.event == "ack" and e.ok is False for e in result.lease_events)  # expired
    assert max(e.deliveries or 0 for e in result.lease_events) >= 2
    assert result.dead
    run_and_check(config)
