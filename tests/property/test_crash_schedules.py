"""Property: daemons that crash and restart from their durable record (issue 11) keep
every history linearizable and lose nothing, with and without churn.

The hosts simulator (skueue/sim/hosts.py) crashes random members at random moments:
after their last sync (the host is rebuilt from its snapshot and the inputs logged after
it) or in the middle of a step, before its sync (the step's input is lost: a frame stays
in flight, a tick is gone, a client sends its request again).  Every restart checks that
the replay gives the effects of the first run and the host that was thrown away; a
difference raises DeterminismError with the seed.  Frames go in FIFO order (the
daemon's links) or in any order (the paper's model).

Hypothesis draws the cluster, the workload, the churn, how many crashes, how many of
them come before the sync, how often a member takes a snapshot, and the seed; a failure
prints the call that replays it:  HostsSim(HostsConfig(...)).run()

The quick profile (CI) keeps the clusters and workloads small; SKUEUE_PROFILE=long runs
many more examples of the same properties.
"""

from __future__ import annotations

from hypothesis import given

from skueue.core.ops import Structure
from skueue.sim.hosts import HostsConfig
from tests.property.host_runs import check_run, host_configs, run_hosts

crashes = (1, 10)


@given(host_configs(Structure.QUEUE, churn=False, crashes=crashes, processes=10))
def test_queue_survives_crashes(config: HostsConfig) -> None:
    check_run(*run_hosts(config))


@given(host_configs(Structure.STACK, churn=False, crashes=crashes, processes=10))
def test_stack_survives_crashes(config: HostsConfig) -> None:
    check_run(*run_hosts(config))


# With churn, the same histories and drain, and the ring and tree exactly right after
# quiescence (a restarted joiner or leaver must still fit in).


@given(host_configs(Structure.QUEUE, churn=True, crashes=crashes, processes=10))
def test_queue_survives_crashes_with_churn(config: HostsConfig) -> None:
    check_run(*run_hosts(config))


@given(host_configs(Structure.STACK, churn=True, crashes=crashes, processes=10))
def test_stack_survives_crashes_with_churn(config: HostsConfig) -> None:
    check_run(*run_hosts(config))
