"""Property: one Raft group (``skueue/replication/``) stays safe under any schedule of
crashes, torn and unsynced writes, partitions, pauses, lost, duplicated and reordered
messages, membership changes and snapshots, and settles once the faults stop
(docs/replication.md §8, stage 1).

The replication simulator (``skueue/sim/replicas.py``) checks Raft's safety properties
after every step and raises ``AssertionError`` naming the seed and the step; a group
that does not settle after the faults stop raises ``SimStuck`` naming the seed.
Hypothesis draws the group, the workload, the faults and the seed; a failure prints the
call that replays it:  ReplicasSim(ReplicasConfig(...)).run()

The quick profile (CI) runs the conftest's examples; SKUEUE_PROFILE=long many more.
The tests at the end break the replica on purpose (monkeypatched) and check that the
simulator notices: its checks can fail.
"""

from __future__ import annotations

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.replication import node as replica_node
from skueue.replication.effects import Send
from skueue.replication.log import RaftLog
from skueue.replication.messages import AppendReply, Message, VoteReply
from skueue.sim.replicas import ReplicasConfig, ReplicasResult, ReplicasSim
from skueue.sim.rounds import SimStuck

chances = st.one_of(st.sampled_from([0.0, 0.05, 0.3]), st.floats(0.0, 0.5))


@st.composite
def replica_configs(draw: st.DrawFn) -> ReplicasConfig:
    return ReplicasConfig(
        seed=draw(st.integers(0, 2**32 - 1)),
        voters=draw(st.sampled_from([3, 5])),
        learner=draw(st.booleans()),
        remove=draw(st.booleans()),
        clients=draw(st.integers(1, 3)),
        commands=draw(st.integers(1, 20)),
        faults=draw(st.integers(0, 20)),
        crash=draw(st.floats(0.0, 1.0)),
        partition=draw(st.floats(0.0, 1.0)),
        pause=draw(st.floats(0.0, 1.0)),
        outage_ms_max=draw(st.sampled_from([50, 400, 1500])),
        loss=draw(chances),
        duplicate=draw(chances),
        reorder=draw(chances),
        fsync_lag=draw(st.sampled_from([0.0, 0.5, 1.0])),
        crash_before_sync=draw(st.sampled_from([0.0, 0.3, 1.0])),
        torn_writes=draw(st.booleans()),
        snapshot_every=draw(st.sampled_from([0, 1, 3, 10])),
        append_bytes_max=draw(st.sampled_from([1, 1 << 20])),
        inflight_appends_max=draw(st.sampled_from([1, 4, 256])),
        pre_vote=draw(st.booleans()),
        check_quorum=draw(st.booleans()),
        read_back=draw(st.booleans()),
    )


def run_replicas(config: ReplicasConfig) -> ReplicasResult:
    replay = f"replay with: ReplicasSim({config!r}).run()"
    if currently_in_test_context():
        note(replay)
    try:
        return ReplicasSim(config).run()
    except (AssertionError, SimStuck) as e:
        raise type(e)(f"{e}\n{replay}") from e


def check_settled(result: ReplicasResult) -> None:
    """What the simulator's own end checks leave to say: every command acknowledged,
    every member with one state, each command in it once."""
    config = result.config
    expected = {f"c{c}-{n}".encode() for c in range(config.clients)
                for n in range(config.commands)}
    assert set(result.acknowledged) == expected
    states = list(result.states.values())
    assert all(state == states[0] for state in states)
    kept = {data for _, data in states[0]}
    assert kept == expected, f"seed {config.seed}: applied {sorted(kept - expected)[:5]}"


@given(replica_configs())
def test_a_group_stays_safe_and_settles_under_faults(config: ReplicasConfig) -> None:
    check_settled(run_replicas(config))


# -- seeded runs ---------------------------------------------------------------------


@pytest.mark.parametrize("voters", [3, 5])
def test_without_faults_one_election_and_every_command_committed(voters: int) -> None:
    """No fault, timeouts far above a round trip: one leader for the whole run (Raft
    §5.6), every command acknowledged once, no retry needed."""
    for seed in range(5):
        result = run_replicas(ReplicasConfig(seed=seed, voters=voters, clients=3, commands=10))
        assert len(result.leaders) == 1, f"seed {seed}: leaders {result.leaders}"
        assert result.duplicates == 0 and result.crashes == 0
        check_settled(result)
        assert set(result.states) == {f"m{i}" for i in range(1, voters + 1)}


def test_crashes_between_the_write_and_the_sync_lose_nothing_acknowledged() -> None:
    """Every sync comes late and each is beaten by a crash: what a machine wrote and did
    not sync is lost (all of it, no torn prefix), and nothing acknowledged goes with it."""
    config = ReplicasConfig(seed=7, clients=2, commands=8, faults=6, crash=1.0, partition=0.0,
                            pause=0.0, fsync_lag=1.0, crash_before_sync=1.0, torn_writes=False)
    result = run_replicas(config)
    assert result.crashes >= 10, result.crashes
    check_settled(result)


def test_faults_that_all_weigh_nothing_are_no_faults() -> None:
    """Hypothesis draws the weights of crash, partition and pause; all zero is a run
    without faults, not a ValueError from the draw."""
    result = run_replicas(ReplicasConfig(seed=0, faults=3, crash=0.0, partition=0.0,
                                         pause=0.0, commands=2))
    assert result.crashes == 0 and len(result.leaders) == 1
    check_settled(result)


def test_membership_changes_and_snapshots_under_faults() -> None:
    """A learner added, caught up through snapshots, promoted; a first voter removed."""
    config = ReplicasConfig(seed=3, learner=True, remove=True, clients=2, commands=10, faults=8,
                            loss=0.1, duplicate=0.1, reorder=0.1, fsync_lag=0.5,
                            snapshot_every=1)
    result = run_replicas(config)
    assert len(result.members.voters) == 3 and "m4" in result.members.voters
    check_settled(result)


def test_a_lost_append_is_sent_again_when_the_group_is_idle() -> None:
    """Seed 1, one command, 20% loss: the leader's only append of the command to one
    follower is lost while that follower's progress is 'replicate'; the leader's
    heartbeats then go at the follower's match index, which the follower acks, and
    nothing sends the entry again: the follower stays one entry behind for good.  A
    lost append must be found out and sent again (etcd: a heartbeat's answer below the
    last index sends an append from ``next``, whose refusal starts a probe).

    Reference: Raft §5.3 (the leader retries AppendEntries indefinitely)
    """
    config = ReplicasConfig(seed=1, clients=1, commands=1, fault_ms=500, settle_ms=3_000,
                            loss=0.2)
    check_settled(run_replicas(config))


# -- the checks can fail ---------------------------------------------------------------

FAULTY = dict(clients=2, commands=8, faults=10, loss=0.1, duplicate=0.1, reorder=0.2,
              fsync_lag=0.7, crash_before_sync=0.5)


def _first_violation(seeds: int, **config: object) -> str:
    for seed in range(seeds):
        try:
            ReplicasSim(ReplicasConfig(seed=seed, **config)).run()  # type: ignore[arg-type]
        except SimStuck:
            continue
        except AssertionError as e:
            return str(e)
    raise AssertionError(f"no violation found in {seeds} seeds")


def _send_at_once(kind: type) -> object:
    send = replica_node.ReplicaNode._send

    def at_once(self: replica_node.ReplicaNode, to: str, message: Message) -> None:
        send(self, to, message)
        if isinstance(message, kind):
            self._out[-1] = Send(to, message, after_sync=False)

    return at_once


def test_the_checks_catch_acks_sent_before_the_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica_node.ReplicaNode, "_send", _send_at_once(AppendReply))
    assert "durable only on" in _first_violation(20, voters=5, **FAULTY)


def test_the_checks_catch_votes_sent_before_the_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica_node.ReplicaNode, "_send", _send_at_once(VoteReply))
    assert "voted twice" in _first_violation(200, voters=5, **FAULTY)


def test_the_checks_catch_votes_for_a_stale_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RaftLog, "is_up_to_date", lambda self, index, term: True)
    found = _first_violation(50, voters=3, **FAULTY)
    assert "leader completeness" in found or "log matching" in found, found
