"""Failover under load (issue 31; ``skueued --replicas 3 --failover``): a host lost for
good, its process taken over by a member that keeps a copy of it (runtime/stand_in.py).

Five real durable daemons, 8 clients with the fault tests' mixed workload, each with
the whole seed list (its own member first).  A few seconds in, one daemon is killed with
SIGKILL and its data directory deleted: it never comes back.  A member that keeps a copy
of its process is elected after the failure timeout and serves it; the clients whose
member died follow their session's process there (a member tells them where it is
served now) and send their waiting requests again with their keys, so that the new
leader's retry window answers those that took effect.  The load finishes, a drain
empties the queue, and the history must pass the checkers with every element removed
exactly once.  The test reports how long after the kill the cluster answered again.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import pytest
import trio

from skueue.cluster.loadgen import LoadConfig, LoadResult
from tests.e2e.daemons import stop
from tests.e2e.oracle import assert_history_ok
from tests.e2e.test_failover import stand_in_for
from tests.e2e.test_re_replication import remove_when_served, wait_replaced
from tests.faults.test_crash_restart import Cluster
from tests.faults.test_pause import paused_for
from tests.faults.workload import LONG, SEED, fault_load, under_faults

DAEMONS = 5
# The long profile's count fits its bound with room: two hosts lost leave three daemons
# serving five processes, each with three replicas, on the test machine's cores.
OPS = 20_000 if LONG else 3_000
KILL_AFTER_S = (2.0, 4.0)
TIMEOUT_S = 1_200.0 if LONG else 240.0
PAUSE_S = 12.0  # past the failure timeout (3 to 6 s) and the links' ack timeout (10 s)
SERVING_AGAIN_S = 10.0
"""The issue's bound on the time from the kill to the cluster answering again."""


def seed_lists(addresses: list[str], clients: int) -> tuple[str, ...]:
    """Client ``i``'s seed list: every member, member ``i mod n`` first."""
    n = len(addresses)
    return tuple(",".join(addresses[(i + k) % n] for k in range(n)) for i in range(clients))


def failover_cluster(tmp_path: Path) -> tuple[random.Random, Cluster, int]:
    """The fault's draws, the cluster (not started) and the daemon the fault is for."""
    print(f"replay with SKUEUE_FAULT_SEED={SEED}")
    rng = random.Random(SEED)
    return rng, Cluster(tmp_path, 3, DAEMONS, "--failover"), rng.randrange(DAEMONS)


async def started_under_faults(
    cluster: Cluster, faults: Callable[[], Awaitable[None]]
) -> tuple[LoadResult, LoadConfig]:
    """Start the cluster and run the load, each client with every member as its seed
    list, while ``faults`` runs; then the drain."""
    cluster.start()
    base = fault_load(cluster.addresses, OPS)
    load = attrs.evolve(base, nodes=seed_lists(cluster.addresses, base.clients))
    return await under_faults(load, faults, TIMEOUT_S), load


@pytest.mark.trio
async def test_a_host_lost_under_load_is_taken_over(tmp_path: Path) -> None:
    rng, cluster, victim = failover_cluster(tmp_path)
    killed_at: list[float] = []

    async def faults() -> None:
        await trio.sleep(rng.uniform(*KILL_AFTER_S))
        cluster.kill(victim)
        killed_at.append(time.perf_counter())
        cluster.lose_disk(victim)

    try:
        result, load = await started_under_faults(cluster, faults)
        assert killed_at, "the workload ended before the kill"
        kill = killed_at[0] - result.started
        after = sorted(r.response for r in result.records if r.invoke > kill)
        assert after, "nothing was invoked after the kill"
        again = after[0] - kill
        print(f"daemon {victim} lost with its disk; {len(result.records)} operations; "
              f"the first operation invoked after the kill answered {again:.2f} s after it")
        assert_history_ok(result, load)
        logs = cluster.logs()
        assert "bug:" not in logs
        assert "the stand-in serves" in logs, logs[-3000:]
        assert again < SERVING_AGAIN_S, f"the cluster answered again {again:.1f} s after the kill"
    finally:
        problems = stop(cluster.daemons)
        assert not problems, problems


@pytest.mark.trio
async def test_two_hosts_lost_one_after_the_other_under_load(tmp_path: Path) -> None:
    """A host lost, ``skueue remove-member`` once its process is served by a copy, each
    of its groups given a new replica (runtime/re_replication.py); then the host that
    took its process over is lost too: both processes are served by copies again."""
    rng, cluster, victim = failover_cluster(tmp_path)
    addresses = cluster.addresses
    lost: set[str] = set()

    async def faults() -> None:
        await trio.sleep(rng.uniform(*KILL_AFTER_S))
        nonlocal victim
        for _ in range(2):
            cluster.kill(victim)
            cluster.lose_disk(victim)
            process = addresses[victim]
            lost.add(process)
            survivor = next(a for a in addresses if a not in lost)
            await trio.to_thread.run_sync(remove_when_served, survivor, process)
            await trio.to_thread.run_sync(wait_replaced, survivor, lost, addresses)
            print(f"{process} lost; every group has three replicas again")
            if len(lost) < 2:
                victim = addresses.index(
                    await trio.to_thread.run_sync(stand_in_for, survivor, process))

    try:
        result, load = await started_under_faults(cluster, faults)
        print(f"lost {sorted(lost)}; {len(result.records)} operations")
        assert len(lost) == 2, "the workload ended before the second host was lost"
        assert_history_ok(result, load)
        assert "bug:" not in cluster.logs()
    finally:
        problems = stop(cluster.daemons)
        assert not problems, problems


@pytest.mark.trio
async def test_a_leader_paused_past_the_failure_timeout_is_fenced(tmp_path: Path) -> None:
    """SIGSTOP one daemon for longer than the failure timeout under load: a member that
    keeps a copy of its process takes it over.  Continued, the old leader still thinks
    it leads, with the inputs that waited in its sockets: it steps them, but cannot
    commit them (a majority has a higher term), so it releases nothing of them; it
    learns the new term, is deposed for good, and ends its clients' connections, which
    follow the process to the new leader and send their requests again there."""
    rng, cluster, victim = failover_cluster(tmp_path)
    paused: list[float] = []

    async def faults() -> None:
        await trio.sleep(rng.uniform(*KILL_AFTER_S))
        await paused_for(cluster.daemons[victim].proc, PAUSE_S)
        paused.append(PAUSE_S)

    try:
        result, load = await started_under_faults(cluster, faults)
        print(f"daemon {victim} paused {paused} s; {len(result.records)} operations")
        assert paused, "the workload ended before the pause did"
        assert_history_ok(result, load)
        assert cluster.daemons[victim].alive(), cluster.daemons[victim].stderr()[-3000:]
        resumed = cluster.daemons[victim].stderr()
        assert "led by another replica now" in resumed, resumed[-3000:]
        assert "bug:" not in cluster.logs()
    finally:
        for d in cluster.daemons:  # a stopped process would never see the SIGTERM
            if d.alive():
                d.proc.send_signal(signal.SIGCONT)
        problems = stop(cluster.daemons)
        assert not problems, problems
