"""Membership changes (thesis §4): one server at a time, each configuration in force as
soon as it is in a replica's log; new servers catch up as learners; a removed leader
leads until its removal is committed.

Each test builds its schedule by hand on :class:`tests.raft.harness.Group`; a new
server's machine starts with an empty log and the configuration that names it a
learner, as a daemon starts the replica it was asked to add.
"""

from __future__ import annotations

from collections.abc import Callable

from skueue.replication.config import AddLearner, Config, HostId, Promote, Remove
from skueue.replication.effects import ProposalRefused, RoleChanged
from skueue.replication.inputs import ChangeConfig, Tick
from skueue.replication.messages import AppendEntries, AppendReply, Message, RequestVote
from tests.raft.harness import Group

ABC = ("a", "b", "c")


def _between(*hosts: HostId) -> Callable[[HostId, HostId, Message], bool]:
    """Pick the messages between two of ``hosts``."""
    return lambda src, dst, _m: src in hosts and dst in hosts


def _led_by_a() -> Group:
    """a leads a, b, c at term 1, and everyone applied its took_over entry (index 1)."""
    g = Group()
    g.elect("a")
    g.run(1)
    assert g["a"].commit == g["b"].commit == g["c"].commit == 1
    return g


def _with_new_machine(g: Group, host: HostId) -> None:
    g.add_machine(host, Config.of(ABC, (host,)))


def _lose_leader(g: Group, leader: HostId) -> None:
    """``leader`` crashes, and the others go an election timeout without word of it:
    past that, they hear vote requests again (thesis §4.2.3)."""
    g.crash(leader)
    g.tick([h for h, m in g.machines.items() if m.up], times=g.settings.election_ticks)
    g.in_flight.clear()  # whatever anyone asked meanwhile went unanswered


def _vote_requests(g: Group) -> list[tuple[HostId, HostId, Message]]:
    return [(s, d, m) for s, d, m in g.sent if isinstance(m, RequestVote)]


# -- one change at a time, in force when appended (thesis §4.1) -----------------------


def test_configuration_is_in_force_once_appended_not_once_committed() -> None:
    """A configuration entry takes effect at a replica as soon as it is in its log: the
    leader sends to a new learner and a follower knows it before either has seen it
    committed.

    Reference: thesis §4.1
    """
    g = _led_by_a()
    _with_new_machine(g, "d")
    g.step("a", ChangeConfig(AddLearner("d")))
    assert g["a"].config == Config.of(ABC, ("d",)) and g["a"].commit == 1
    assert ("a", "d") in [(s, d) for s, d, m in g.in_flight if isinstance(m, AppendEntries)]
    g.deliver(where=lambda _s, d, _m: d == "b")  # b takes it; its ack stays on the way
    assert g["b"].config == Config.of(ABC, ("d",)) and g["b"].commit == 1
    assert g["c"].config == Config.of(ABC), "c has not got it"


def test_commit_counts_the_voters_of_the_configuration_just_appended() -> None:
    """The configuration in force decides commits too, committed or not: once the leader
    appended the removal of c, c's ack no longer makes a majority with the leader, and
    b's does.

    Reference: thesis §4.1
    """
    g = _led_by_a()
    g.step("a", ChangeConfig(Remove("c")))
    assert g["a"].config.voters == ("a", "b")
    g.deliver(where=_between("a", "c"))
    assert g["a"].progress == {"b": g["a"].progress["b"]}, "a no longer follows c's progress"
    assert g["a"].commit == 1, "a and c were a majority of a, b, c, not of a, b"
    g.deliver(where=_between("a", "b"))
    assert g["a"].commit == 2


def test_configuration_goes_with_its_entry_when_that_is_overwritten() -> None:
    """A configuration in force because it is in the log stops being in force when a new
    leader replaces that (uncommitted) entry: the replica is back to the one before.

    Reference: thesis §4.1
    """
    g = _led_by_a()
    g.step("a", ChangeConfig(AddLearner("d")))
    g.drop(lambda s, _d, _m: s == "a")  # nobody got it
    assert g["a"].config == Config.of(ABC, ("d",)) and g["a"].term_at(2) == 1
    _lose_leader(g, "a")
    g.elect("b")
    g.restart("a")
    assert g["a"].config == Config.of(ABC, ("d",)), "still in a's log after the restart"
    g.run(2)
    assert g["a"].term_at(2) == 2 and g["a"].entry(2).kind == "took_over"
    assert g["a"].config == Config.of(ABC) and g["a"].log.config_index == 0


def test_second_change_is_refused_while_one_is_uncommitted() -> None:
    """The leader takes one membership change at a time: another is refused until the
    last one is committed, then taken.

    Reference: thesis §4.1
    """
    g = _led_by_a()
    _with_new_machine(g, "d")
    g.step("a", ChangeConfig(AddLearner("d")))
    assert g.step("a", ChangeConfig(AddLearner("e"))) == [
        ProposalRefused("a", 1, "the last membership change is not committed yet")]
    assert g["a"].last_index == 2 and g["a"].config == Config.of(ABC, ("d",))
    g.deliver()
    assert g["a"].commit == 2
    _with_new_machine(g, "e")
    assert g.step("a", ChangeConfig(AddLearner("e"))) != []
    assert g["a"].config == Config.of(ABC, ("d", "e")) and g["a"].log.config_index == 3


def test_new_leader_refuses_changes_until_an_entry_of_its_term_is_committed() -> None:
    """A new leader takes no membership change before an entry of its own term (its
    took_over) is committed, even though it knows earlier entries committed: until then
    a change of the previous leader's may still be on its way to a majority.

    Reference: thesis §4.1
    """
    g = _led_by_a()
    g.propose("a", b"x")
    g.run(2)
    assert g["b"].commit == 2
    _lose_leader(g, "a")
    while g["b"].role == "follower":
        g.step("b", Tick())
    g.deliver(where=lambda _s, _d, m: not isinstance(m, AppendReply))  # c's ack waits
    assert g["b"].role == "leader" and g["b"].term == 2 and g["b"].commit == 2
    _with_new_machine(g, "d")
    assert g.step("b", ChangeConfig(AddLearner("d"))) == [
        ProposalRefused("b", 2, "no entry of this leader's term is committed yet")]
    g.deliver()
    assert g["b"].commit == 3 and g["b"].term_at(3) == 2
    g.step("b", ChangeConfig(AddLearner("d")))
    assert g["b"].config == Config.of(ABC, ("d",))


# -- learners (thesis §4.2.1) ----------------------------------------------------------


def test_new_server_catches_up_as_a_learner_and_does_not_vote() -> None:
    """A new server joins as a learner: it gets the whole log, but it never campaigns,
    and candidates do not ask it for a vote; promoted once caught up, it is asked.

    Reference: thesis §4.2.1
    """
    g = _led_by_a()
    g.propose("a", b"x")
    _with_new_machine(g, "d")
    g.step("a", ChangeConfig(AddLearner("d")))
    g.run(2)
    assert g.machines["d"].state == g.machines["b"].state == [(2, b"x")]
    g.run(5 * g.settings.election_ticks, hosts=["d"])  # d alone: no leader heard of
    assert g["d"].role == "follower" and g["d"].term == 1
    assert [s for s, _d, _m in _vote_requests(g)] == ["a", "a", "a", "a"], "only a's"
    _lose_leader(g, "a")
    g.elect("b")
    assert {d for s, d, _m in _vote_requests(g) if s == "b"} == {"a", "c"}, "not d"
    g.restart("a")
    g.run(1)
    g.step("b", ChangeConfig(Promote("d")))
    g.run(2)
    assert g["b"].config == Config.of(("a", "b", "c", "d"))
    _lose_leader(g, "b")
    g.elect("c")
    assert {d for s, d, _m in _vote_requests(g) if s == "c"} == {"a", "b", "d"}
    assert g["c"].role == "leader" and g["c"].config.voters == ("a", "b", "c", "d")


def test_learner_is_not_counted_toward_a_commit() -> None:
    """A learner's acks never count: with the leader and a caught-up learner cut off from
    the other two voters, a new entry durable on both does not commit (they would be 2
    of 3 voters if the learner counted); it commits once a voter acks.

    Reference: thesis §4.2.1
    """
    g = _led_by_a()
    _with_new_machine(g, "d")
    g.step("a", ChangeConfig(AddLearner("d")))
    g.run(2)
    assert g["d"].last_index == g["a"].commit == 2
    g.partition(["a", "d"], ["b", "c"])
    g.propose("a", b"x")
    g.deliver()
    assert g["a"].progress["d"].match == 3 and g["a"].log.persisted == 3
    assert g["a"].commit == 2
    g.heal()
    g.run(1)
    assert g["a"].commit == 3


def test_promote_is_refused_until_the_learner_has_caught_up() -> None:
    """A learner becomes a voter only once it holds the leader's committed log: a
    promotion asked before is refused (it would add a voter that cannot yet ack, and
    make commits wait on it), and taken once it has caught up.

    Reference: thesis §4.2.1
    """
    g = _led_by_a()
    g.propose("a", b"x", b"y")
    g.run(1)
    _with_new_machine(g, "d")
    g.partition(ABC, ["d"])
    g.step("a", ChangeConfig(AddLearner("d")))
    g.run(1)
    assert g["a"].commit == 4 and g["a"].progress["d"].match == 0
    assert g.step("a", ChangeConfig(Promote("d"))) == [
        ProposalRefused("a", 1, "d has not caught up yet")]
    assert g["a"].config.voters == ABC
    g.heal()
    g.run(2)
    assert g["a"].progress["d"].match == 4 and g.applied_data("d") == [b"x", b"y"]
    g.step("a", ChangeConfig(Promote("d")))
    assert g["a"].config == Config.of(("a", "b", "c", "d"))


# -- a removed leader (thesis §4.2.2) --------------------------------------------------


def test_removed_leader_leads_until_its_removal_commits_then_steps_down() -> None:
    """A leader that removes itself goes on leading (and taking proposals) while the
    change is uncommitted, without counting itself toward commits; once the change is
    committed it steps down, never campaigns again, and the others elect a leader that
    keeps what it committed.

    Reference: thesis §4.2.2
    """
    g = _led_by_a()
    g.step("a", ChangeConfig(Remove("a")))
    assert g["a"].config == Config.of(("b", "c")) and g["a"].role == "leader"
    g.propose("a", b"x")
    assert g["a"].last_index == 3, "it still takes proposals"
    g.deliver(where=_between("a", "b"))
    assert g["a"].log.persisted == g["b"].last_index == 3
    assert g["a"].commit == 1, "a and b would be a majority of a, b, c: a does not count"
    assert g["a"].role == "leader"
    g.deliver()  # c takes the removal and x; its ack of the removal reaches a first
    assert g["a"].commit == 2, "the removal is committed, by b and c"
    assert g["a"].role == "follower" and g["a"].leader is None
    assert ("a", RoleChanged("follower", 1, None)) in g.effects
    requests_before = len(_vote_requests(g))
    g.run(5 * g.settings.election_ticks)
    assert [s for s, _d, _m in _vote_requests(g)[requests_before:] if s == "a"] == []
    assert len(g.leaders()) == 1 and g.leaders()[0] in ("b", "c")
    assert g["a"].role == "follower" and not g["a"].is_voter()
    # x, which a appended but never saw committed, is committed by the new leader.
    assert g.applied_data("b") == g.applied_data("c") == [b"x"]
