"""Who leads, and who cannot take it away: leadership transfer (thesis §3.10),
CheckQuorum (thesis §6.2), and the rules that keep a removed or partitioned server from
disrupting a working leader (thesis §4.2.3, §9.6).

Each test builds its schedule by hand on :class:`tests.raft.harness.Group`.
"""

from __future__ import annotations

import pytest

from skueue.replication.config import AddLearner, HostId, Remove
from skueue.replication.effects import ProposalRefused, Send
from skueue.replication.inputs import ChangeConfig, Propose, Received, TransferLeader
from skueue.replication.messages import (
    AppendEntries,
    AppendReply,
    Message,
    RequestVote,
    TimeoutNow,
    VoteReply,
)
from skueue.replication.settings import ReplicaSettings
from tests.raft.harness import Group


def _sent(g: Group, kind: type, src: HostId | None = None,
          dst: HostId | None = None) -> list[Message]:
    return [m for s, d, m in g.sent
            if isinstance(m, kind) and src in (None, s) and dst in (None, d)]


def _c_lagging_one_entry() -> Group:
    """a leads a, b, c at term 1; c took the took_over entry but lost the append of
    ``x`` (index 2), which a and b committed."""
    g = Group()
    g.elect("a")
    g.run(1)
    g.propose("a", b"x")
    g.deliver(where=lambda s, d, _m: "c" not in (s, d))
    g.drop(lambda _s, d, _m: d == "c")
    assert g["a"].commit == 2 and g["c"].last_index == 1
    return g


# -- leadership transfer (thesis §3.10) ------------------------------------------------


def test_transfer_refuses_proposals_and_changes_while_handing_over() -> None:
    """Once asked to hand over, the leader takes no new proposal and no membership
    change (the target could never catch up with a log that keeps growing); it says
    why and to whom it is handing over.

    Reference: thesis §3.10
    """
    g = _c_lagging_one_entry()
    g.step("a", TransferLeader("c"))
    assert g["a"].role == "leader" and g["a"].transfer_to == "c"
    refused = ProposalRefused("a", 1, "handing leadership over to c")
    assert g.step("a", Propose((b"y",))) == [refused]
    assert g.step("a", ChangeConfig(AddLearner("d"))) == [refused]
    assert g["a"].last_index == 2, "nothing was appended"


def test_transfer_catches_the_target_up_then_sends_timeout_now() -> None:
    """The leader first brings the target's log up to its own, and only then tells it
    TimeoutNow; the target campaigns at once (no pre-vote) and wins with the whole log.

    Reference: thesis §3.10
    """
    g = _c_lagging_one_entry()
    effects = g.step("a", TransferLeader("c"))
    assert [type(e.message) for e in effects if isinstance(e, Send)] == [AppendEntries]
    # Everything but TimeoutNow: the repair of c's log (a refusal, then x).
    g.deliver(where=lambda _s, _d, m: not isinstance(m, TimeoutNow))
    assert g["c"].last_index == g["a"].last_index == 2
    assert g["c"].term_at(2) == 1 and g["c"].entry(2).data == b"x"
    assert g.in_flight == [("a", "c", TimeoutNow(1))], "TimeoutNow only once c caught up"
    last_ack = max(i for i, (s, _d, m) in enumerate(g.sent)
                   if s == "c" and isinstance(m, AppendReply) and m.match_index == 2)
    first_timeout_now = min(i for i, (_s, _d, m) in enumerate(g.sent)
                            if isinstance(m, TimeoutNow))
    assert last_ack < first_timeout_now
    g.deliver()
    assert g.leaders() == ["c"] and g["c"].term == 2
    assert [m.pre_vote for m in _sent(g, RequestVote, src="c")] == [False, False]
    g.run(1)
    assert g.applied_data("c") == g.applied_data("a") == g.applied_data("b") == [b"x"]


def test_transfer_target_wins_although_voters_heard_from_the_leader() -> None:
    """A voter that heard from its leader within the least election timeout ignores a
    vote request (thesis §4.2.3), unless the request says the leader asked for this
    election: the transfer's target is elected at once.

    Reference: thesis §3.10
    """
    g = Group(settings=ReplicaSettings(pre_vote=False))
    g.elect("a")
    g.run(1)  # b and c just heard from a
    assert g["b"].leader == "a"
    # An ordinary request from c at term 2, however up to date, is ignored by b ...
    plain = RequestVote(2, g["c"].last_index, g["c"].log.last_term)
    assert g.step("b", Received("c", plain)) == []
    assert g["b"].term == 1 and g["b"].vote == "a"
    # ... but the one the leader asked for is not.
    g.step("a", TransferLeader("c"))
    assert g.in_flight == [("a", "c", TimeoutNow(1))], "c is caught up: TimeoutNow at once"
    g.deliver()
    assert [m.transfer for m in _sent(g, RequestVote, src="c")] == [True, True]
    assert VoteReply(2, granted=True) in _sent(g, VoteReply, src="b", dst="c")
    assert g.leaders() == ["c"] and g["c"].term == 2
    assert g["b"].vote == "c" and g["b"].leader == "c"


@pytest.mark.parametrize("transfer_ticks", [0, 25])
def test_transfer_to_a_dead_target_is_abandoned_after_an_election_timeout(
    transfer_ticks: int,
) -> None:
    """A target that never takes over (down) does not stop the group for good: after an
    election timeout the leader gives up the transfer and takes proposals again; or
    after ``transfer_ticks``, where set (a target that must rebuild its state first).

    Reference: thesis §3.10
    """
    g = Group(settings=ReplicaSettings(transfer_ticks=transfer_ticks))
    g.elect("a")
    g.run(1)
    g.crash("c")
    g.step("a", TransferLeader("c"))
    timeout = transfer_ticks or g.settings.election_ticks
    taken_at = None
    for tick in range(1, 2 * timeout):
        g.tick(["a", "b"])
        g.deliver()
        before = g["a"].last_index
        effects = g.step("a", Propose((b"y",)))
        if g["a"].last_index > before:
            taken_at = tick
            break
        assert effects == [ProposalRefused("a", 1, "handing leadership over to c")]
    assert taken_at == timeout, f"proposals taken again after {taken_at} ticks"
    assert g["a"].role == "leader" and g["a"].term == 1 and g["a"].transfer_to is None
    g.deliver()
    assert g["a"].commit == 2 and g.applied_data("a") == [b"y"]


# -- CheckQuorum (thesis §6.2) ---------------------------------------------------------


@pytest.mark.parametrize(("voters", "minority"), [
    (("a", "b", "c"), ("a",)),
    (("a", "b", "c", "d", "e"), ("a", "b")),
], ids=["alone-of-3", "with-one-follower-of-5"])
def test_leader_cut_off_from_a_majority_steps_down(voters: tuple[HostId, ...],
                                                   minority: tuple[HostId, ...]) -> None:
    """A leader that hears from no majority (itself included) for an election timeout
    steps down, within two election timeouts of the cut at worst (one check period to
    notice, one in which nobody answered), and then refuses proposals, so that clients
    go elsewhere instead of waiting on entries that cannot commit.

    Reference: thesis §6.2
    """
    g = Group(voters)
    g.elect("a")
    timeout = g.settings.election_ticks
    g.run(3 * timeout)
    assert g.leaders() == ["a"], "connected, it keeps leading"
    majority = [h for h in voters if h not in minority]
    g.partition(minority, majority)
    stepped_down_at = None
    for tick in range(1, 3 * timeout):
        g.tick(minority)
        g.deliver()
        if g["a"].role != "leader":
            stepped_down_at = tick
            break
    assert stepped_down_at is not None and stepped_down_at <= 2 * timeout, stepped_down_at
    assert g["a"].role == "follower" and g["a"].term == 1 and g["a"].leader is None
    assert g.step("a", Propose((b"late",))) == [ProposalRefused(None, 1, "not the leader")]
    assert all(e.data != b"late" for e in g["a"].log.held)


# -- disruption (thesis §4.2.3, §9.6) --------------------------------------------------


def test_partitioned_replica_coming_back_does_not_disrupt() -> None:
    """With pre-vote, a replica cut off for many election timeouts keeps asking whether
    it could win, and never raises its term, since nobody answers; once back, its
    requests are ignored by voters that hear from the leader, so no term moves, the
    leader stays, and the replica follows it again.

    Reference: thesis §9.6
    """
    g = Group()
    g.elect("a")
    g.run(1)
    timeout = g.settings.election_ticks
    g.partition(["a", "b"], ["c"])
    g.run(10 * timeout)
    asked = _sent(g, RequestVote, src="c")
    assert len(asked) >= 5 and all(m.pre_vote and m.term == 2 for m in asked)
    assert g["c"].term == 1
    g.heal()
    # c asks once more, now reaching a and b, before anything from a reaches it.
    before = len(asked)
    while len(_sent(g, RequestVote, src="c")) == before:
        g.tick(["c"])
    g.deliver(where=lambda s, _d, _m: s == "c")
    assert _sent(g, VoteReply, dst="c") == [], "a and b ignore it"
    g.run(3 * timeout)
    assert [g[h].term for h in "abc"] == [1, 1, 1]
    assert g.leaders() == ["a"] and g["c"].leader == "a" and g["c"].role == "follower"
    assert all(m.pre_vote for m in _sent(g, RequestVote, src="c")), "c never raised a term"


@pytest.mark.parametrize("pre_vote", [False, True], ids=["vote", "pre-vote"])
def test_removed_server_cannot_disrupt(pre_vote: bool) -> None:
    """A server removed from the group by an entry it never received times out and
    campaigns (with real votes at rising terms, without pre-vote); the remaining voters,
    which keep hearing from their leader, ignore it: no term moves, the leader stays and
    keeps committing.

    Reference: thesis §4.2.3
    """
    g = Group(("a", "b", "c", "d"), settings=ReplicaSettings(pre_vote=pre_vote))
    g.elect("a")
    g.run(1)
    g.partition(["a", "b", "c"], ["d"])
    g.step("a", ChangeConfig(Remove("d")))
    g.deliver()
    g.run(1)
    assert g["a"].commit == g["a"].log.config_index == 2 and "d" not in g["a"].config.voters
    assert "d" in g["d"].config.voters, "d never heard of its removal"
    g.heal()  # a sends nothing to d any more; d times out and asks a, b and c
    timeout = g.settings.election_ticks
    g.run(6 * timeout)
    asked = _sent(g, RequestVote, src="d")
    assert {dst for src, dst, m in g.sent if src == "d" and isinstance(m, RequestVote)} == {
        "a", "b", "c"}
    assert len(asked) >= 9 and all(m.pre_vote == pre_vote for m in asked)
    # Without pre-vote d raised its own term at each try; with it, not even that.
    assert g["d"].term == (max(m.term for m in asked) if not pre_vote else 1)
    assert pre_vote or g["d"].term >= 4
    assert _sent(g, VoteReply, dst="d") == []
    assert [g[h].term for h in "abc"] == [1, 1, 1] and g.leaders() == ["a"]
    g.propose("a", b"x")
    g.run(2)
    assert g["a"].commit == 3 and g.applied_data("c") == [b"x"]


def test_vote_request_ignored_only_within_the_least_election_timeout() -> None:
    """A follower ignores a vote request while it heard from a leader within the least
    election timeout, and answers the same request once that long has passed without
    word from the leader (the leader may be gone: the group must be able to elect).

    Reference: thesis §4.2.3
    """
    g = Group(settings=ReplicaSettings(pre_vote=False))
    g.elect("a")
    g.run(1)  # b just heard from a
    g.crash("a")
    timeout = g.settings.election_ticks

    def ask() -> list[object]:
        c = g["c"]
        return list(g.step("b", Received("c", RequestVote(g["b"].term + 1, c.last_index,
                                                          c.log.last_term))))

    g.tick(["b"], times=timeout - 1)
    assert ask() == [] and g["b"].term == 1, "within the timeout: ignored"
    g.tick(["b"])
    answer = ask()
    assert [type(e) for e in answer if isinstance(e, Send)] == [Send]
    (reply,) = [e.message for e in answer if isinstance(e, Send)]
    assert isinstance(reply, VoteReply) and reply.granted and g["b"].vote == "c"
