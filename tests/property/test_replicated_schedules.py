"""Property: each process a Raft group of three machines (docs/replication.md §8, stage
2b's prototype, skueue/sim/replicated_hosts.py) keeps every promise of the hosts
simulator while machines crash and restart, are cut off from their group and healed,
pause and resume, and the replicas' channel loses, duplicates and reorders their
messages.

Along each run the simulator checks the invariants of docs/replication.md §9 (one leader
per term, I5; nothing released before a majority's disks hold its entry, I2; every
replica steps the entry released at each index, with the same frames, I3; replicas at
the same applied index have equal hosts, I1; nothing of an earlier term after
``TookOver``, I8; a leader releases only under a commit of its own term, never while
paused or cut off, §5.4; a leader cut off steps down within two election timeouts,
CheckQuorum); once the clients are done every group converges (a machine back from a
partition or a pause caught up); the history is linearizable and the drain returns every
element exactly once (nothing acknowledged lost, nothing duplicated), or, with leases,
the lease checker's promises hold.

Hypothesis draws the config, seed included; a failure prints the call that replays it:
``ReplicatedHostsSim(HostsConfig(...)).run()``.  SKUEUE_PROFILE=long runs many more.
The tests at the end break the replica on purpose (monkeypatched) and check that the
simulator notices: its checks can fail.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.core.ops import Structure
from skueue.replication import node as replica_node
from skueue.replication.effects import Send
from skueue.replication.messages import AppendEntries, AppendReply, Message
from skueue.sim.hosts import HostsConfig, HostsResult, HostsSim
from skueue.sim.replicated_hosts import ReplicatedHostsSim
from skueue.sim.rounds import SimStuck
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
        machine_partitions=draw(st.integers(0, 4)),
        machine_pauses=draw(st.integers(0, 4)),
        machine_losses=draw(st.integers(0, 2)),
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


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_host_lost_for_good_loses_nothing_and_its_groups_carry_on(seed: int) -> None:
    """p0's leader machine is lost with its disk mid-run and never comes back; a
    follower of another group too: each group goes on with its two others, every
    acknowledged operation is still there, and the survivors end with one log and
    commit.  Reference: docs/replication.md §5.8"""
    sim = ReplicatedHostsSim(busy(seed, machine_crashes=2))
    run_until_answered(sim, 12)
    p0, p1 = sim.groups["p0"], sim.groups["p1"]
    leader = p0.leader()
    assert leader is not None
    follower = next(m for m in p1.machines.values() if m is not p1.leader())
    released = len(sim.released["p0"])
    p0.lose(leader)
    p1.lose(follower)
    result = sim.run()
    check_run(result, f"seed {seed}")
    assert not leader.up and leader.gone and not follower.up
    assert len(sim.released["p0"]) > released  # p0 went on, led by a survivor
    assert p0.leader() not in (None, leader) and p0.stats.elections >= 2
    survivors = [m for m in p0.machines.values() if not m.gone]
    assert all(m.node.commit == survivors[0].node.commit for m in survivors)


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
                  lease_ratio=0.3, delivery="any", machine_partitions=3,
                  machine_pauses=3, machine_losses=2)  # fmt: skip
    first, again = ReplicatedHostsSim(config), ReplicatedHostsSim(config)
    ran, reran = first.run(), again.run()
    assert ran.records == reran.records and ran.lease_events == reran.lease_events
    assert ran.steps == reran.steps
    assert (first.machine_partitions, first.machine_pauses, first.machine_losses) == (3, 3, 2)
    assert sum(m.gone for _, m in first.machines.values()) == 2
    assert first.channel.stats == again.channel.stats and first.channel.stats.cut > 0


def test_replicas_need_the_replicated_simulator_and_one_replica_refuses_its_faults() -> None:
    with pytest.raises(ValueError, match="replicated_hosts"):
        HostsSim(busy(1))
    with pytest.raises(ValueError, match="replicas > 1"):
        HostsConfig(machine_crashes=1)
    with pytest.raises(ValueError, match="churn"):
        HostsConfig(replicas=3, joins=1)
    with pytest.raises(ValueError, match="replicas is"):
        HostsConfig(replicas=2)
    for fault in ("machine_partitions", "machine_pauses", "machine_losses"):
        with pytest.raises(ValueError, match="replicas > 1"):
            HostsConfig(**{fault: 1})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="negative"):
            HostsConfig(replicas=3, **{fault: -1})  # type: ignore[arg-type]


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


# -- partitions and pauses -------------------------------------------------------------


def step_until(sim: ReplicatedHostsSim, done: Callable[[], bool], what: str) -> None:
    for _ in range(5_000):
        if done():
            return
        sim._step()
    raise AssertionError(f"seed {sim.config.seed}: {what} not within 5000 steps")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_leader_cut_off_releases_nothing_steps_down_and_catches_up(seed: int) -> None:
    """p0's leader machine is cut off from its group while its clients are busy: it takes
    inputs it can never commit, releases nothing, steps down (CheckQuorum); the others
    elect a leader, and the clients connected to p0 reconnect and send again to it, as
    after a crash.  After the heal its log is repaired: the group ends converged, with
    nothing lost.  Reference: docs/replication.md §5.2, §5.4, §5.5"""
    sim = ReplicatedHostsSim(busy(seed))
    run_until_answered(sim, 12)
    group = sim.groups["p0"]
    old = group.leader()
    assert old is not None
    term, commit = old.node.term, old.node.commit
    conns = {c.name: c.conn for c in sim.clients.clients if c.member == "p0" and c.conn}
    sim.cut(old)
    step_until(sim, lambda: old.lead_term is None, "the cut leader's step down")
    step_until(sim, lambda: group.serving() is not None, "a new leader")
    new = group.leader()
    assert new is not None and new is not old and new.node.term > term
    assert old.node.commit == commit and old.node.term == term  # it committed nothing
    assert all(c.conn != conns[c.name] for c in sim.clients.clients if c.name in conns)
    sim.heal(old)
    check_run(sim.run(), f"seed {seed}")
    leader = group.leader()
    assert leader is not None and old.node.log.held == leader.node.log.held
    assert old.applied == old.node.commit == leader.node.commit


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_paused_leader_is_fenced_when_it_resumes(seed: int) -> None:
    """p0's leader machine pauses long enough for the others to elect a leader; when it
    resumes with its stale view it releases nothing under its old term (the others'
    higher term deposes it), rebuilds from its committed prefix and follows.
    Reference: docs/replication.md §5.4, §5.5"""
    sim = ReplicatedHostsSim(busy(seed))
    run_until_answered(sim, 12)
    group = sim.groups["p0"]
    old = group.leader()
    assert old is not None
    term = old.node.term
    sim.pause(old)
    step_until(sim, lambda: group.serving() is not None, "a new leader")
    releases: list[tuple[str, int | None]] = []
    release = sim.release

    def recorded(group: Any, m: Any, *rest: Any) -> None:
        releases.append((m.mid, m.lead_term))
        release(group, m, *rest)

    sim.release = recorded  # type: ignore[method-assign]
    sim.resume(old)
    step_until(sim, lambda: old.lead_term is None, "the old leader's step down")
    assert old.node.term > term and old.node.role == "follower"
    check_run(sim.run(), f"seed {seed}")
    assert (old.mid, term) not in releases
    assert old.applied == old.node.commit == group.leader().node.commit  # type: ignore[union-attr]


def test_a_leader_deposed_late_leaves_the_frames_of_the_new_leaders_log_alone() -> None:
    """The schedule that found it (seed 1837): an old leader of p1, back from a pause,
    learns of the new term and steps down after the new leader logged a frame of p0; the
    step down cleared the frames held in the leader's log, so the frame was delivered
    and logged again, and taken twice at its commit."""
    config = HostsConfig(processes=2, clients=2, operations=17, seed=1837,
                         before_sync_ratio=0.0, replicas=3, machine_crashes=1,
                         machine_partitions=3, machine_pauses=2,
                         channel_duplication=0.3)  # fmt: skip
    check_run(*run_replicated(config))


def test_a_resumed_leader_gives_back_the_leases_of_connections_closed_meanwhile() -> None:
    """The schedule that found it: p0's leader pauses, a consumer's requests to it fail
    and the consumer closes its connection, a follower resumes before the leader.  The
    leader that resumes and still leads steps ``ClientGone`` for each connection that
    closed meanwhile (a daemon's sockets tell it), so no lease outlives its connection;
    without it, the lease check failed (a follower's resume had also taken the list)."""
    config = HostsConfig(processes=1, clients=2, operations=22, insert_ratio=0.689,
                         seed=2661976061, delivery="any", timeout_steps=60, lease_ratio=0.504,
                         max_deliveries=3, replicas=3, machine_partitions=1,
                         machine_pauses=3, channel_duplication=0.1)  # fmt: skip
    check_run(*run_replicated(config))


def test_a_leader_of_an_older_term_never_leads_the_group_again() -> None:
    """The schedule that found it (seed 0): p0's leader of term 1 pauses, term 2's leader
    is elected, then pauses and, resumed, steps down (CheckQuorum: both others paused);
    the group then took the still paused leader of term 1 for its leader again, and when
    it resumed, its host held the lease of a connection that had closed at the change to
    term 2.  A leader older than the newest term is never the group's leader again (the
    others will depose it): the group waits for an election."""
    config = HostsConfig(processes=1, clients=1, operations=32, insert_ratio=0.75, seed=0,
                         before_sync_ratio=0.0, lease_ratio=1.0, replicas=3,
                         machine_pauses=4, channel_duplication=0.1)  # fmt: skip
    check_run(*run_replicated(config))


def test_a_doomed_machine_is_not_paused_past_its_restart() -> None:
    """Seed 0 draws every fault at step 0: a machine doomed to die before its sync was
    paused, restarted while still up, and died once it resumed, never to return: its
    group did not converge."""
    config = HostsConfig(processes=1, clients=1, operations=0, seed=0, before_sync_ratio=1.0,
                         replicas=3, machine_crashes=1, machine_partitions=1,
                         machine_pauses=1)  # fmt: skip
    check_run(*run_replicated(config))


def test_a_doomed_machine_that_never_acts_before_its_restart_dies_then() -> None:
    """The schedule that found it (seed 519531880): a machine doomed to die in its next
    action, cut off, had not ticked when its restart came; it restarted still doomed,
    died in its next action, and no restart followed: its group never converged."""
    config = HostsConfig(processes=1, structure=Structure.STACK, clients=1, operations=19,
                         insert_ratio=0.588, seed=519531880, delivery="any",
                         before_sync_ratio=1.0, replicas=3, machine_crashes=6,
                         machine_partitions=4, machine_pauses=2,
                         channel_duplication=0.1)  # fmt: skip
    check_run(*run_replicated(config))


# -- the checks can fail ---------------------------------------------------------------

# A run of this size takes about 2,000 steps: a group stuck for good is found at 20,000.
FAULTY = dict(processes=2, clients=4, operations=40, replicas=3, timeout_steps=60,
              max_steps=20_000)  # fmt: skip


def _first_violation(seeds: int, **faults: int) -> str:
    for seed in range(seeds):
        config = HostsConfig(seed=seed, **FAULTY, **faults)  # type: ignore[arg-type]
        try:
            ReplicatedHostsSim(config).run()
        except (AssertionError, SimStuck) as e:
            return f"{type(e).__name__}: {e}"
    raise AssertionError(f"no violation found in {seeds} seeds")


def test_the_checks_catch_a_cut_off_leader_that_keeps_leading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(replica_node.ReplicaNode, "_heard_from_quorum", lambda self: True)
    found = _first_violation(20, machine_partitions=4, machine_pauses=4)
    assert found.startswith("AssertionError: seed ") and "(CheckQuorum)" in found, found


def test_the_checks_catch_followers_that_answer_an_old_leader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fencing broken: a replica takes an append of an older term as its own and answers
    in the old leader's term, so an old leader back from a partition commits its tail
    over what the new leader released (or the replicas keep obeying it, and the group
    never elects again: stuck)."""
    received = replica_node.ReplicaNode._received

    def unfenced(self: replica_node.ReplicaNode, sender: str, m: Message) -> None:
        if not (isinstance(m, AppendEntries) and m.term < self.term):
            received(self, sender, m)
            return
        start = len(self._out)
        received(self, sender, dataclasses.replace(m, term=self.term))
        for at in range(start, len(self._out)):
            out = self._out[at]
            if isinstance(out, Send) and isinstance(out.message, AppendReply):
                message = dataclasses.replace(out.message, term=m.term)
                self._out[at] = dataclasses.replace(out, message=message)

    monkeypatch.setattr(replica_node.ReplicaNode, "_received", unfenced)
    found = _first_violation(60, machine_partitions=8)
    assert found.split(": ", 1)[1].startswith("seed "), found
