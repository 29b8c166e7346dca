"""Snapshots (Raft §7): a replica whose next entry the leader compacted away gets the
leader's snapshot instead, and ends with the state the log would have given it.

Each test builds its schedule by hand on :class:`tests.raft.harness.Group`: the leader
applies, snapshots and compacts; the replica that needs what went is the one whose
messages the test lost (or a new one with an empty log).
"""

from __future__ import annotations

from skueue.replication.config import AddLearner, Config
from skueue.replication.effects import InstallSnapshot
from skueue.replication.inputs import ChangeConfig, Received
from skueue.replication.messages import AppendReply, Message, Snapshot
from tests.raft.harness import Group


def _snapshots_to(g: Group, host: str) -> list[Snapshot]:
    return [m for _, dst, m in g.sent if dst == host and isinstance(m, Snapshot)]


def _installs(g: Group, host: str) -> list[InstallSnapshot]:
    return [e for h, e in g.effects if h == host and isinstance(e, InstallSnapshot)]


def _lagging_c_behind_compacted_leader() -> Group:
    """a leads a, b, c; c, cut off, misses every append of two proposals, which a and b
    commit and apply; a snapshots and compacts its log through them; c is back."""
    g = Group()
    g.elect("a")
    g.run(1)  # everyone applied the took_over entry: c is in replicate at index 1
    g.partition(["a", "b"], ["c"])
    g.propose("a", b"x1", b"x2")
    g.run(2, hosts=["a", "b"])
    assert g["a"].commit == g["b"].commit == 3 and g["c"].last_index == 1
    g.snapshot("a")
    assert g["a"].snapshot_index == 3 and g["a"].term_at(2) is None, "a compacted 2 and 3"
    g.heal()
    return g


def test_lagging_replica_gets_the_snapshot_and_the_same_state() -> None:
    """A replica whose next entry the leader no longer holds is sent the leader's
    snapshot instead of entries; it installs it and ends with exactly the state the
    others reached by applying the log, and takes the log after it as usual.

    Reference: Raft §7
    """
    g = _lagging_c_behind_compacted_leader()
    g.run(1)  # a's next heartbeat to c would start after index 1, which is gone
    assert [(s.index, s.last_term) for s in _snapshots_to(g, "c")] == [(3, 1)]
    assert [(e.index, e.last_term) for e in _installs(g, "c")] == [(3, 1)]
    assert g["c"].snapshot_index == 3 and g["c"].last_index == 3 and g["c"].commit == 3
    # b applied the log, c installed the snapshot: the same state machine.
    assert g.applied_data("c") == g.applied_data("b") == [b"x1", b"x2"]
    assert g.machines["c"].state == g.machines["b"].state == [(2, b"x1"), (3, b"x2")]
    # After it, c follows the log from the snapshot on.
    g.propose("a", b"x3")
    g.run(2)
    assert g.machines["c"].state == g.machines["a"].state == [(2, b"x1"), (3, b"x2"),
                                                             (4, b"x3")]
    assert g["c"].term_at(4) == g["a"].term_at(4) == 1
    assert g["a"].progress["c"].state == "replicate" and g["a"].progress["c"].match == 4


def test_new_replica_with_an_empty_log_gets_the_snapshot() -> None:
    """A replica with nothing (a host that replaces one whose disk was lost joins as a
    new learner) after the leader compacted its whole log: it installs the snapshot,
    with the configuration in force at it, then takes the change that added it from
    the log, and ends with the others' state and configuration.

    Reference: Raft §7
    """
    g = Group()
    g.elect("a")
    g.propose("a", b"x1", b"x2")
    g.run(1)
    g.snapshot("a")
    assert g["a"].snapshot_index == 3
    g.add_machine("d", Config.of(("a", "b", "c"), ("d",)))
    g.step("a", ChangeConfig(AddLearner("d")))
    g.run(2)
    assert [(e.index, e.config) for e in _installs(g, "d")] == [(3, Config.of(("a", "b", "c")))]
    assert g["d"].snapshot_index == 3 and g["d"].last_index == g["a"].last_index == 4
    assert g["d"].config == g["a"].config == Config.of(("a", "b", "c"), ("d",))
    assert g.machines["d"].state == g.machines["b"].state == [(2, b"x1"), (3, b"x2")]


def test_lost_snapshot_is_sent_again_after_an_election_timeout() -> None:
    """A snapshot lost on the way (or its answer) leaves the leader waiting on it; after
    an election timeout without an answer it starts over and sends it again, and the
    replica installs it then.

    Reference: Raft §7
    """
    g = _lagging_c_behind_compacted_leader()
    timeout = g.settings.election_ticks

    def is_snapshot(_s: str, _d: str, m: Message) -> bool:
        return isinstance(m, Snapshot)

    g.tick(["a"])
    g.deliver(where=lambda s, d, m: not is_snapshot(s, d, m))  # a finds that c lacks 2
    assert len(_snapshots_to(g, "c")) == 1
    g.drop(is_snapshot)  # lost
    assert g["a"].progress["c"].state == "snapshot"
    resent_at = None
    for tick in range(1, 2 * timeout):
        g.tick(["a", "b"])  # c hears nothing from a meanwhile: no need to tick it
        g.deliver()
        if len(_snapshots_to(g, "c")) == 2:
            resent_at = tick
            break
    assert resent_at == timeout, f"sent again after {resent_at} ticks, not {timeout}"
    assert [(e.index, e.last_term) for e in _installs(g, "c")] == [(3, 1)]
    assert g.machines["c"].state == g.machines["b"].state == [(2, b"x1"), (3, b"x2")]
    assert g["a"].progress["c"].state == "replicate" and g["a"].progress["c"].match == 3


def test_stale_refusals_do_not_send_the_snapshot_again() -> None:
    """While a snapshot is on its way, the refusals of appends sent before it (they
    queued up while the replica was away) change nothing: the snapshot goes once, and
    its answer moves the replica on.

    Reference: Raft §7
    """
    g = _lagging_c_behind_compacted_leader()
    g.tick(["a"])
    g.deliver(where=lambda _s, _d, m: not isinstance(m, Snapshot))  # a finds c lacks 2
    assert len(_snapshots_to(g, "c")) == 1 and g["a"].progress["c"].state == "snapshot"
    term = g["a"].term
    for _ in range(5):  # refusals of appends that were on their way before it
        g.step("a", Received("c", AppendReply(term, 1, reject=True)))
    assert len(_snapshots_to(g, "c")) == 1 and g["a"].progress["c"].state == "snapshot"
    g.deliver()
    assert [(e.index, e.last_term) for e in _installs(g, "c")] == [(3, 1)]
    assert g["a"].progress["c"].state == "replicate" and g["a"].progress["c"].match == 3
