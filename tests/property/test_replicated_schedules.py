"""Property: each process a Raft group of three machines (docs/replication.md §8, stage
2b's prototype, skueue/sim/replicated_hosts.py) keeps every promise of the hosts
simulator while machines crash and restart and the replicas' channel loses, duplicates
and reorders their messages.

Along each run the simulator checks the invariants of docs/replication.md §9 (one leader
per term, I5; nothing released before a majority's disks hold its entry, I2; every
replica steps the entry released at each index, with the same frames, I3; replicas at
the same applied index have equal hosts, I1; nothing of an earlier term after
``TookOver``, I8); at the end the history is linearizable and the drain returns every
element exactly once (nothing acknowledged lost, nothing duplicated), or, with leases,
the lease checker's promises hold.

Hypothesis draws the config, seed included; a failure prints the call that replays it:
``ReplicatedHostsSim(HostsConfig(...)).run()``.  SKUEUE_PROFILE=long runs many more.
"""

from __future__ import annotations

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.core.ops import Structure
from skueue.sim.hosts import HostsConfig, HostsResult, HostsSim
from skueue.sim.replicated_hosts import ReplicatedHostsSim
from tests.property.host_runs import before_sync, check_run, deliveries, timeouts

channel = st.sampled_from([0.0, 0.1, 0.3])


@st.composite
def replicated_configs(draw: st.DrawFn, structure: Structure, leases: bool = False) -> HostsConfig:
    return HostsConfig(
        processes=draw(st.integers(1, 4)),
        structure=structure,
        clients=draw(st.integers(1, 4)),
        operations=draw(st.integers(0, 40)),
        insert_ratio=draw(st.floats(0.2, 0.9)),
        seed=draw(st.integers(0, 2**32 - 1)),
        delivery=draw(deliveries),
        before_sync_ratio=draw(before_sync),
        timeout_steps=draw(timeouts),
        blocking_ratio=draw(st.sampled_from([0.0, 0.3])),
        lease_ratio=draw(st.floats(0.2, 1.0)) if leases else 0.0,
        max_deliveries=draw(st.sampled_from([0, 1, 3])) if leases else 0,
        replicas=3,
        machine_crashes=draw(st.integers(0, 8)),
        channel_loss=draw(channel),
        channel_duplication=draw(channel),
    )


def run_replicated(config: HostsConfig) -> tuple[HostsResult, str]:
    replay = f"replay with: ReplicatedHostsSim({config!r}).run()"
    if currently_in_test_context():
        note(replay)
    return ReplicatedHostsSim(config).run(), replay


@given(replicated_configs(Structure.QUEUE))
def test_replicated_queue_survives_machine_crashes_and_a_lossy_channel(config: HostsConfig) -> None:
    check_run(*run_replicated(config))


@given(replicated_configs(Structure.STACK))
def test_replicated_stack_survives_machine_crashes_and_a_lossy_channel(config: HostsConfig) -> None:
    check_run(*run_replicated(config))


@given(replicated_configs(Structure.QUEUE, leases=True))
def test_replicated_leases_go_back_at_a_takeover_and_keep_their_promises(
    config: HostsConfig,
) -> None:
    check_run(*run_replicated(config))


# -- seeded schedules ------------------------------------------------------------------


def busy(seed: int, **more: object) -> HostsConfig:
    settings: dict[str, object] = dict(processes=3, clients=3, operations=40, seed=seed,
                                       replicas=3, timeout_steps=60)  # fmt: skip
    return HostsConfig(**(settings | more))  # type: ignore[arg-type]


def run_until_answered(sim: ReplicatedHostsSim, answered: int) -> None:
    while len(sim.clients.records) < answered:
        sim._step()


@pytest.mark.parametrize("before_sync", [False, True], ids=["after-sync", "before-sync"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_leader_machine_killed_mid_run_loses_nothing_acknowledged(
    seed: int, before_sync: bool
) -> None:
    """p0's leader machine dies while its clients are busy (``before_sync``: in its next
    action, before its writes are durable, after its appends left): another machine
    takes over, and every acknowledged operation is still there; the dead one comes back
    from its disk as a follower and catches up.  Reference: docs/replication.md §5.3, §5.8"""
    sim = ReplicatedHostsSim(busy(seed))
    run_until_answered(sim, 12)
    group = sim.groups["p0"]
    leader = group.leader()
    assert leader is not None
    committed = len(sim.released["p0"])
    if before_sync:
        leader.doomed = True
        while leader.up:
            sim._step()
    else:
        group.crash(leader)
    assert group.leader() is None
    sim.events.append((sim.steps + 400, f"restart {leader.mid}"))
    sim.events.sort(reverse=True)
    result = sim.run()
    check_run(result, f"seed {seed}")
    assert group.stats.elections >= 2 and group.stats.restarts == 1
    assert leader.up and leader.node.role == "follower"
    assert leader.applied >= committed  # rebuilt from its log as the commit reached it


def test_a_leader_without_its_followers_acknowledges_nothing() -> None:
    """Both followers of p0 die: its leader can commit nothing, so no reply, frame or ack
    of p0 leaves (I2); CheckQuorum makes it step down.  Once they are back, the run
    finishes with nothing lost.  Reference: docs/replication.md §5.1, §5.4"""
    sim = ReplicatedHostsSim(busy(5, processes=2))
    run_until_answered(sim, 8)
    group = sim.groups["p0"]
    leader = group.leader()
    assert leader is not None
    followers = [m for m in group.machines.values() if m is not leader]
    for m in followers:
        group.crash(m)
    released = len(sim.released["p0"])
    stepped = leader.stepped
    for _ in range(3000):
        sim._step()
    assert len(sim.released["p0"]) == released
    assert leader.node.role != "leader" and group.leader() is None
    assert stepped <= leader.node.last_index  # it took inputs while it led, in vain
    for m in followers:
        group.restart(m)
    check_run(sim.run(), "seed 5")


def test_a_broken_connection_sends_its_request_once() -> None:
    """A client whose own connection broke sends its request on a new one, once: not
    again at its next move while the leader holds the answer until the commit (which
    answered it twice on one connection before the fix)."""
    config = HostsConfig(processes=1, structure=Structure.STACK, clients=4, operations=36,
                         insert_ratio=0.0148, seed=10, delivery="any", timeout_steps=60,
                         replicas=3, channel_loss=0.3, channel_duplication=0.1)  # fmt: skip
    result = ReplicatedHostsSim(config).run()
    check_run(result, "seed 10")
    assert result.counts["drops"] >= 1


def test_a_replicated_schedule_replays_from_its_seed() -> None:
    config = busy(7, machine_crashes=4, channel_loss=0.1, channel_duplication=0.1,
                  lease_ratio=0.3, delivery="any")  # fmt: skip
    first, again = ReplicatedHostsSim(config).run(), ReplicatedHostsSim(config).run()
    assert first.records == again.records and first.lease_events == again.lease_events
    assert first.steps == again.steps


def test_replicas_need_the_replicated_simulator_and_one_replica_refuses_its_faults() -> None:
    with pytest.raises(ValueError, match="replicated_hosts"):
        HostsSim(busy(1))
    with pytest.raises(ValueError, match="replicas > 1"):
        HostsConfig(machine_crashes=1)
    with pytest.raises(ValueError, match="churn"):
        HostsConfig(replicas=3, joins=1)
    with pytest.raises(ValueError, match="replicas is"):
        HostsConfig(replicas=2)


def test_an_ack_whose_reply_was_lost_with_its_leader_keeps_its_answer() -> None:
    """The schedule that found it (seed 1643): the leader dies after stepping an ack; the
    next one inherits it; the consumer's retry gets the ack's first answer (acked), so
    the lease checker finds nothing lost (tests/unit/test_took_over.py has the host's
    side)."""
    config = HostsConfig(processes=1, clients=1, operations=19, insert_ratio=0.75,
                         seed=1643, before_sync_ratio=0.0, lease_ratio=1.0, replicas=3,
                         machine_crashes=1, channel_loss=0.3,
                         channel_duplication=0.3)  # fmt: skip
    result = ReplicatedHostsSim(config).run()
    check_run(result, "seed 1643")
    assert result.counts["retried"] > 0
