"""What counts as durable: the leader counts itself only at what its own disk holds
(thesis §10.2.1); a replica that may have forgotten acked entries neither campaigns,
votes nor counts until it has caught up (the amnesia guard, docs/replication.md §5.1,
I6); a vote or an ack never leaves before the writes it speaks for are durable (I7).

Each test builds its schedule by hand on :class:`tests.raft.harness.Group`, whose
``hold_sync`` keeps a machine's writes pending until ``sync`` and whose
``crash(forget_from=...)`` takes back a tail the machine had acked.
"""

from __future__ import annotations

from skueue.replication.config import HostId
from skueue.replication.effects import AppendLocal, Commit, Send
from skueue.replication.inputs import Received, Tick
from skueue.replication.messages import (
    AppendEntries,
    AppendReply,
    Message,
    RequestVote,
    VoteReply,
)
from tests.raft.harness import Group


def _sent(g: Group, kind: type, src: HostId | None = None,
          dst: HostId | None = None) -> list[Message]:
    return [m for s, d, m in g.sent
            if isinstance(m, kind) and src in (None, s) and dst in (None, d)]


def _led_by_a(voters: tuple[HostId, ...] = ("a", "b", "c")) -> Group:
    """a leads at term 1, and everyone applied its took_over entry (index 1)."""
    g = Group(voters)
    g.elect("a")
    g.run(1)
    assert all(g[h].commit == 1 for h in voters)
    return g


def _lose_leader(g: Group, leader: HostId) -> None:
    """``leader`` crashes, and the others go an election timeout without word of it."""
    g.crash(leader)
    g.tick([h for h, m in g.machines.items() if m.up], times=g.settings.election_ticks)
    g.in_flight.clear()


# -- the leader's own write (thesis §10.2.1) -------------------------------------------


def test_leader_counts_itself_only_once_its_write_is_durable() -> None:
    """In a group of three with one follower down, the leader's unsynced entry acked by
    the other follower does not commit (one durable copy of three); it commits when the
    leader's own write is durable.

    Reference: thesis §10.2.1
    """
    g = _led_by_a()
    g.crash("c")
    g.machines["a"].hold_sync = True
    g.propose("a", b"x")
    g.deliver()
    assert g["a"].progress["b"].match == 2 and g["a"].log.persisted == 1
    assert g["a"].commit == 1
    assert not [e for h, e in g.effects if h == "a" and isinstance(e, Commit) and e.index == 2]
    g.sync("a")
    assert g["a"].log.persisted == 2 and g["a"].commit == 2
    assert g.applied_data("a") == [b"x"]


def test_followers_alone_commit_only_when_a_majority_without_the_leader() -> None:
    """The leader sends its entries before its own write is durable, and the followers'
    acks alone commit them once they are a majority without the leader: in a group of
    five, two followers' acks do not, a third's does, the leader's disk still behind.

    Reference: thesis §10.2.1
    """
    g = _led_by_a(("a", "b", "c", "d", "e"))
    g.machines["a"].hold_sync = True
    g.propose("a", b"x")
    assert [type(e) for e in g.machines["a"].pending] == [AppendLocal]
    assert {d for s, d, m in g.in_flight if s == "a" and isinstance(m, AppendEntries)
            and m.entries} == {"b", "c", "d", "e"}, "sent before the leader's write"

    def deliver_between_a_and(host: HostId) -> None:
        g.deliver(where=lambda s, d, _m: {s, d} == {"a", host})

    deliver_between_a_and("b")
    deliver_between_a_and("c")
    assert g["a"].log.persisted == 1 and g["a"].commit == 1, "2 of 5 and an unsynced 3rd"
    deliver_between_a_and("d")
    assert g["a"].log.persisted == 1 and g["a"].commit == 2, "3 of 5 without the leader"


# -- the amnesia guard (docs/replication.md §5.1, I6) ---------------------------------


def _c_forgot_everything_after_index_1(g: Group) -> None:
    """c crashes, its disk losing the log after index 1, and restarts with the guard."""
    g.crash("c", forget_from=2)
    g.restart("c", may_have_forgotten=True)
    assert g["c"].last_index == 1 and g["c"].may_have_forgotten


def test_amnesiac_replica_does_not_campaign_until_caught_up() -> None:
    """A replica restarted with may_have_forgotten set, cut off from the leader, does
    not campaign however long it hears nothing; once a leader's append brought it up to
    the leader's commit, it may again.

    Reference: docs/replication.md §5.1
    """
    g = _led_by_a()
    g.propose("a", b"x")
    g.run(2)
    _c_forgot_everything_after_index_1(g)
    g.partition(["a", "b"], ["c"])
    timeout = g.settings.election_ticks
    g.run(5 * timeout)
    assert _sent(g, RequestVote, src="c") == []
    assert g["c"].role == "follower" and g["c"].term == 1
    g.heal()
    g.run(2)
    assert not g["c"].may_have_forgotten and g["c"].commit == 2
    g.partition(["a", "b"], ["c"])
    g.run(3 * timeout, hosts=["c"])
    assert _sent(g, RequestVote, src="c") != [], "caught up, it campaigns again"


def test_amnesiac_replica_grants_no_vote_until_caught_up() -> None:
    """A replica restarted with may_have_forgotten set refuses every vote and pre-vote,
    however up to date the candidate: with the leader down, the other voter cannot be
    elected by it.  Once caught up with a leader's commit, it votes again.

    Reference: docs/replication.md §5.1
    """
    g = _led_by_a()
    g.propose("a", b"x")
    g.run(2)
    _c_forgot_everything_after_index_1(g)
    _lose_leader(g, "a")
    asked = RequestVote(2, g["b"].last_index, g["b"].log.last_term)
    effects = g.step("c", Received("b", asked))
    assert [e for e in effects if isinstance(e, Send)] == [
        Send("b", VoteReply(2, granted=False), after_sync=True)]
    assert g["c"].vote is None
    g.run(5 * g.settings.election_ticks)
    assert g.leaders() == [] and g["c"].vote is None
    replies = _sent(g, VoteReply, src="c", dst="b")
    assert len(replies) >= 3 and not any(isinstance(m, VoteReply) and m.granted
                                         for m in replies)
    # a is back: a or b leads with the other's vote; c catches up, and votes again.
    g.restart("a")
    g.run(3 * g.settings.election_ticks)
    (leader,) = g.leaders()
    assert not g["c"].may_have_forgotten and g.applied_data("c") == [b"x"]
    other = "b" if leader == "a" else "a"
    _lose_leader(g, leader)
    g.elect(other)  # c's vote is the one it needs
    assert g["c"].vote == other and g["c"].term == g[other].term


def _stale_ack_schedule(guard: bool) -> Group:
    """a leads a, b, c; b is down; a's write of x (index 2) is unsynced; c acks x, then
    loses it in a power failure and restarts (with the guard if ``guard``); a's next
    heartbeat reaches c, c's refusal reaches a, and only then a's write is durable."""
    g = _led_by_a()
    g.crash("b")
    g.machines["a"].hold_sync = True
    g.propose("a", b"x")
    g.deliver()
    assert g["a"].progress["c"].match == 2 and g["a"].commit == 1
    g.crash("c", forget_from=2)
    g.restart("c", may_have_forgotten=guard)
    g.step("a", Tick())
    g.deliver(where=lambda _s, d, _m: d == "c")
    g.deliver(where=lambda _s, d, _m: d == "a")
    g.sync("a")
    return g


def test_amnesiac_replica_ack_does_not_count_until_caught_up() -> None:
    """The leader stops counting what a replica acked before it forgot: told by the
    restarted replica's refusal that it may have forgotten, the leader drops its match,
    and its own durable write with that stale ack does not commit x; x commits once
    the replica holds it again.

    Reference: docs/replication.md §5.1
    """
    g = _stale_ack_schedule(guard=True)
    assert g["c"].last_index == 1
    assert g["a"].progress["c"].match == 1 and not g["a"].progress["c"].counts
    assert g["a"].log.persisted == 2 and g["a"].commit == 1
    g.deliver()
    assert g["c"].last_index == 2 and g["a"].progress["c"].counts
    assert g["a"].commit == 2


def test_without_the_guard_a_stale_ack_commits_an_entry_held_once() -> None:
    """The same schedule without the guard: the refusal looks like a late answer, the
    stale ack stands, and x commits while the leader alone holds it (so the guard's
    test above is about a real hazard).

    Reference: docs/replication.md §5.1
    """
    g = _stale_ack_schedule(guard=False)
    assert g["c"].last_index == 1 and g["a"].progress["c"].match == 2
    assert g["a"].commit == 2, "committed with one copy of three"


def _forgotten_commit_schedule(guard: bool) -> Group:
    """x (index 2) is committed by a and c while b is cut off; then a crashes and c
    loses x in a power failure and restarts (with the guard if ``guard``); b and c are
    left alone for five election timeouts; then a comes back."""
    g = _led_by_a()
    g.partition(["a", "c"], ["b"])
    g.propose("a", b"x")
    g.deliver()
    assert g["a"].commit == 2 and g.applied_data("a") == [b"x"]
    g.crash("a")
    g.crash("c", forget_from=2)
    g.restart("c", may_have_forgotten=guard)
    g.heal()
    g.run(5 * g.settings.election_ticks)
    g.restart("a")
    g.run(3 * g.settings.election_ticks)
    return g


def test_amnesia_guard_keeps_a_committed_entry() -> None:
    """An entry committed by the leader and a replica that then forgot it survives the
    leader's crash: the forgetful replica votes for nobody, so the replica that never
    had the entry cannot be elected; once the leader is back it is elected, and every
    replica applies the entry at its index.

    Reference: docs/replication.md §5.1
    """
    g = _forgotten_commit_schedule(guard=True)
    assert g.leaders() == ["a"]
    for host in "abc":
        assert g[host].entry(2).data == b"x" and g[host].commit >= 2
        assert g.machines[host].state == [(2, b"x")]


def test_without_the_guard_the_same_schedule_loses_a_committed_entry() -> None:
    """The same schedule without the guard: b is elected with the forgetful replica's
    vote, its took_over takes index 2, and the committed x is gone everywhere (so the
    guard's test above is about a real hazard).

    Reference: docs/replication.md §5.1
    """
    g = _forgotten_commit_schedule(guard=False)
    assert len(g.leaders()) == 1 and g.leaders()[0] != "a"
    for host in "abc":
        assert g[host].entry(2).kind == "took_over" and g[host].commit >= 2
        assert b"x" not in g.applied_data(host)


# -- no message ahead of its writes (docs/replication.md I7) --------------------------


def test_vote_does_not_leave_before_the_voters_write_is_durable() -> None:
    """A voter whose disk has not yet made its vote durable does not let the vote out
    (I7: a Send with after_sync leaves only once the writes before it are durable):
    the candidate stays a candidate until the voter syncs, and a crash before that
    takes the vote back without anyone having seen it.

    Reference: docs/replication.md §9
    """
    g = _led_by_a()
    _lose_leader(g, "a")
    g.machines["b"].hold_sync = True
    before = len(g.sent)
    while g["c"].role == "follower":
        g.step("c", Tick())
    g.deliver()
    assert g["c"].role == "candidate" and g["c"].term == 2
    # The pre-vote grant saved nothing, so it left at once; the vote waits on the disk.
    assert [m for s, _d, m in g.sent[before:] if s == "b"] == [
        VoteReply(2, granted=True, pre_vote=True)]
    assert g["b"].vote == "c"
    assert (g.machines["b"].disk.term, g.machines["b"].disk.vote) == (1, "a")
    assert [(h.to, h.message) for h in g.machines["b"].held_sends] == [
        ("c", VoteReply(2, granted=True))]
    g.crash("b")  # the vote was never durable, and never seen
    g.restart("b")
    assert (g["b"].term, g["b"].vote) == (1, "a"), "back to its durable hard state"
    assert g["c"].role == "candidate"
    # Asked again, it votes, and the vote leaves only with the sync.
    g.machines["b"].hold_sync = True
    g.tick(["c"], times=2 * g.settings.election_ticks)
    g.deliver()
    assert g["c"].role == "candidate" and g.machines["b"].held_sends
    g.sync("b")
    g.deliver()
    assert g["c"].role == "leader" and g["c"].term == 3
    assert (g.machines["b"].disk.term, g.machines["b"].disk.vote) == (3, "c")


def test_ack_does_not_leave_before_the_entries_are_durable() -> None:
    """A follower acks an append only once the entries are durable, and a later append
    (a heartbeat) is not acked before the earlier step's entries are durable either
    (I7).

    Reference: docs/replication.md §9
    """
    g = _led_by_a()
    g.crash("c")
    g.machines["b"].hold_sync = True
    g.propose("a", b"x")
    g.deliver()
    assert g["b"].last_index == 2 and g.machines["b"].disk.log[-1].term == 1
    assert len(g.machines["b"].disk.log) == 1, "x is not durable on b"
    g.run(1, hosts=["a"])  # a heartbeat at x, which b holds but not durably
    assert [m for m in _sent(g, AppendReply, src="b") if isinstance(m, AppendReply)
            and m.match_index == 2] == []
    assert g["a"].commit == 1
    g.sync("b")
    g.deliver()
    assert g["a"].commit == 2
