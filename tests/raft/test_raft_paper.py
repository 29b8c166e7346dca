"""The claims of the Raft paper's §5 (Ongaro and Ousterhout, USENIX ATC 2014), each on
the schedule that the claim is about, driven by hand through ``tests/raft/harness.py``.

The simulator (``skueue/sim/replicas.py``, ``tests/property/test_replica_schedules.py``)
checks the same safety properties after every step of random schedules; these tests
pin the cases the paper argues from, so that a broken rule fails by name.
"""

from __future__ import annotations

import random
from collections import defaultdict

from skueue.replication.effects import AppendLocal, RoleChanged
from skueue.replication.inputs import Received, Tick
from skueue.replication.messages import (
    AppendEntries,
    AppendReply,
    Message,
    RequestVote,
    VoteReply,
)
from skueue.replication.settings import ReplicaSettings
from tests.raft.harness import Group

NO_PRE_VOTE = ReplicaSettings(pre_vote=False, check_quorum=False)


def _leaders_by_term(group: Group) -> dict[int, set[str]]:
    leaders: dict[int, set[str]] = defaultdict(set)
    for host, effect in group.effects:
        if isinstance(effect, RoleChanged) and effect.role == "leader":
            leaders[effect.term].add(host)
    return leaders


def test_election_safety_one_leader_per_term() -> None:
    """At most one leader can be elected in a given term: each voter grants one vote
    per term, durably, and a leader needs a majority.  Five voters all time out
    together, over and over, with votes delivered in a random order each time.

    Reference: Raft §5.2
    """
    for seed in range(60):
        group = Group("abcde", seed=seed, settings=NO_PRE_VOTE)
        rng = random.Random(seed)
        for _ in range(4):
            for host in "abcde":
                node = group[host]
                while node.role in ("follower", "leader"):
                    group.step(host, Tick())
            rng.shuffle(group.in_flight)
            group.deliver()
        for term, hosts in _leaders_by_term(group).items():
            assert len(hosts) == 1, f"seed {seed}: term {term} has leaders {hosts}"


def test_a_voter_votes_once_per_term_even_after_a_crash() -> None:
    """The vote is durable before it is sent: a voter that crashes after voting and
    comes back refuses a second candidate of the same term.

    Reference: Raft §5.2
    """
    group = Group(settings=NO_PRE_VOTE)
    b_asks = RequestVote(term=1, last_index=0, last_term=0)
    group.step("a", Received("b", b_asks))
    assert group["a"].vote == "b"
    group.crash("a")
    group.restart("a")
    assert group["a"].vote == "b" and group["a"].term == 1
    group.in_flight.clear()
    group.step("a", Received("c", RequestVote(term=1, last_index=0, last_term=0)))
    (reply,) = [m for src, dst, m in group.in_flight if dst == "c"]
    assert isinstance(reply, VoteReply) and not reply.granted


def test_split_votes_end() -> None:
    """Randomized election timeouts end split votes: from a cold start, with every
    message delivered within a tick, a leader is elected within a few election timeouts,
    on every seed.

    Reference: Raft §5.2
    """
    settings = ReplicaSettings()
    worst = 0
    for seed in range(100):
        group = Group("abcde", seed=seed, settings=settings)
        for ticks in range(1, 6 * settings.election_ticks):
            group.run(1)
            if group.leaders():
                worst = max(worst, ticks)
                break
        else:
            raise AssertionError(f"seed {seed}: no leader after {ticks} ticks")
    assert worst < 4 * settings.election_ticks


def test_leader_append_only() -> None:
    """A leader never overwrites or deletes entries in its log: every write a leader
    asks for starts right after its last one, while the follower it deposed has its
    uncommitted tail replaced.

    Reference: Raft §5.3
    """
    group = Group(settings=NO_PRE_VOTE)
    group.elect("a")
    group.partition(["a"], ["b", "c"])
    group.propose("a", b"lost-1", b"lost-2")  # a keeps these, uncommitted
    group.elect("b")
    group.propose("b", b"kept")
    group.run(1, hosts="bc")
    group.heal()
    group.run(3)
    leading: dict[str, int] = {}  # host -> the term it leads, while it does
    end: dict[tuple[str, int], int] = {}
    leader_writes = 0
    for host, effect in group.effects:
        if isinstance(effect, RoleChanged):
            if effect.role == "leader":
                leading[host] = effect.term
            else:
                leading.pop(host, None)
        elif isinstance(effect, AppendLocal) and host in leading:
            key = (host, leading[host])
            assert effect.index == end.get(key, effect.index), (host, effect)
            end[key] = effect.index + len(effect.entries)
            leader_writes += 1
    assert leader_writes >= 4
    assert group.applied_data("a") == [b"kept"]  # the deposed leader's tail was replaced


def test_log_matching() -> None:
    """If two logs contain an entry with the same index and term, the logs are identical
    in all entries up through that index: after leaders of three terms wrote to
    different partitions and the group healed, any two replicas that agree on an index's
    term agree on every entry before it.

    Reference: Raft §5.3
    """
    group = Group("abcde", settings=NO_PRE_VOTE)
    group.elect("a")
    group.propose("a", b"1")
    group.run(1)
    group.partition(["a", "b"], ["c", "d", "e"])
    group.propose("a", b"2-lost", b"3-lost")
    group.deliver()
    group.elect("c")
    group.propose("c", b"2")
    group.deliver()
    group.partition(["c"], ["a", "b", "d", "e"])
    group.propose("c", b"3-lost")
    group.run(30, hosts="abde")
    assert any(group[h].term > group["c"].term for h in group.leaders())
    group.heal()
    group.run(3)
    nodes = [group[h] for h in "abcde"]
    checked = 0
    for x in nodes:
        for y in nodes:
            for index in range(1, min(x.last_index, y.last_index) + 1):
                if x.term_at(index) == y.term_at(index):
                    assert [x.entry(i) for i in range(1, index + 1)] == \
                        [y.entry(i) for i in range(1, index + 1)]
                    checked += 1
    assert checked > 0
    assert len({tuple(group.applied_data(h)) for h in "abcde"}) == 1
    assert b"2-lost" not in group.applied_data("a")


def test_the_consistency_check_refuses_and_the_leader_repairs() -> None:
    """A follower refuses an append whose ``(prev_index, prev_term)`` it does not hold;
    the leader backs off to where the logs agree and overwrites the follower's
    conflicting tail, so the follower ends with exactly the leader's log.

    Reference: Raft §5.3
    """
    group = Group(settings=NO_PRE_VOTE)
    group.elect("a")
    group.propose("a", b"1")
    group.run(1)
    group.partition(["a"], ["b", "c"])
    group.propose("a", *(b"stale-%d" % i for i in range(5)))  # a's tail, term 1
    group.elect("b")
    group.propose("b", b"2", b"3")
    group.run(1, hosts="bc")
    group.crash("b")  # c leads term 3 with b's entries: its first append to a is past
    group.heal()  # the point where their logs part
    group.elect("c")
    group.run(3, hosts="ac")
    refusals = [m for src, dst, m in group.sent
                if src == "a" and dst == "c" and isinstance(m, AppendReply) and m.reject]
    assert len(refusals) >= 2, "a's log disagreed with c's for several entries"
    a, c = group["a"], group["c"]
    assert a.last_index == c.last_index
    assert [a.entry(i) for i in range(1, a.last_index + 1)] == \
        [c.entry(i) for i in range(1, c.last_index + 1)]
    assert group.applied_data("a") == [b"1", b"2", b"3"]


def test_a_voter_refuses_a_candidate_with_a_less_up_to_date_log() -> None:
    """A voter denies its vote if its own log is more up to date than the candidate's:
    a later last term wins; with equal last terms, the longer log.

    Reference: Raft §5.4.1
    """
    group = Group(settings=NO_PRE_VOTE)
    group.elect("a")
    group.propose("a", b"1", b"2")
    group.run(1)  # every log: took_over(1), 1, 2 at term 1 (last index 3)

    def ask(voter: str, term: int, last_index: int, last_term: int) -> bool:
        group.step(voter, Received("z", RequestVote(term, last_index, last_term)))
        src, dst, reply = group.sent[-1]
        assert (src, dst) == (voter, "z") and isinstance(reply, VoteReply)
        return reply.granted

    assert not ask("b", term=5, last_index=2, last_term=1)  # shorter, same last term
    assert not ask("b", term=6, last_index=9, last_term=0)  # longer, older last term
    assert ask("c", term=7, last_index=3, last_term=1)  # as up to date
    assert ask("b", term=8, last_index=1, last_term=2)  # a later last term


def test_figure_8_an_earlier_terms_entry_is_not_committed_by_counting_replicas() -> None:
    """Figure 8: S1, leader of term 1, gets its entry (2) to S2 only; S5 is elected in
    term 2 and writes its own index 2 alone; S1 is elected in term 3 and copies (2) to
    S3: (2) is now on a majority, but S1 must not commit it, for S5 can still be
    elected (its last term, 2, beats 1) and overwrite it; which it then does.  Nothing
    of (2) was ever applied: S1 never committed it.

    Reference: Raft §5.4.2
    """
    group = Group(["s1", "s2", "s3", "s4", "s5"], settings=NO_PRE_VOTE)
    group.elect("s1")
    group.run(1)  # index 1: s1's took_over, committed everywhere
    # (a) S1 replicates index 2 (term 1) to S2 only, then crashes.
    group.propose("s1", b"doomed")
    group.deliver(lambda src, dst, m: {src, dst} == {"s1", "s2"})
    group.in_flight.clear()
    group.crash("s1")
    assert group["s2"].term_at(2) == 1
    # (b) S5 is elected in term 2 by S3, S4; its entries stay with it; it crashes.
    _force_leader(group, "s5", voters=["s3", "s4", "s5"])
    group.propose("s5", b"from-term-2")
    group.in_flight.clear()
    group.crash("s5")
    # (c) S1 comes back, is elected in term 3 by S2, S3, and copies (2) to S3 alone,
    #     without its own took_over (an append it could have sent).
    group.restart("s1")
    _force_leader(group, "s1", voters=["s1", "s2", "s3"], term=3)
    group.in_flight.clear()
    s1 = group["s1"]
    assert s1.term == 3
    for follower in ["s2", "s3"]:
        group.step(follower, Received("s1", AppendEntries(3, 1, 1, (s1.entry(2),), 1)))
    group.deliver(lambda src, dst, m: dst == "s1" and isinstance(m, AppendReply))
    assert [h for h in ["s1", "s2", "s3"] if group[h].term_at(2) == 1] == ["s1", "s2", "s3"]
    assert s1.commit < 2, "an entry of an earlier term was committed by counting"
    assert group.applied_data("s1") == []
    # (d) S1 crashes; S5 comes back and is elected by S2, S3, S4: it overwrites (2).
    group.in_flight.clear()
    group.crash("s1")
    group.restart("s5")
    _force_leader(group, "s5", voters=["s2", "s3", "s4", "s5"], term=4)
    group.run(2, hosts=["s2", "s3", "s4", "s5"])
    for host in ["s2", "s3", "s4", "s5"]:
        assert group.applied_data(host) == [b"from-term-2"], host


def _force_leader(group: Group, host: str, voters: list[str], term: int = 0) -> None:
    """Make ``host`` campaign now (for ``term`` at least) and deliver only the vote
    traffic among ``voters``."""
    node = group[host]
    while node.role != "candidate" or node.term < term:
        group.step(host, Tick())

    def votes(src: str, dst: str, m: Message) -> bool:
        return isinstance(m, RequestVote | VoteReply) and src in voters and dst in voters

    group.deliver(votes)
    group.drop(lambda src, dst, m: isinstance(m, RequestVote | VoteReply))
    assert node.role == "leader", f"{host} is {node.role}"


def test_leader_completeness_and_state_machine_safety() -> None:
    """Every committed entry is in the log of every later leader, and no two replicas
    ever apply different entries at one index.  Three times over, a leader's entry
    reaches a bare majority and is committed, the leader crashes, a replica outside
    that majority fails to be elected, and one inside it is.

    Reference: Raft §5.4.3
    """
    group = Group("abcde", settings=NO_PRE_VOTE, seed=3)
    group.elect("a")
    group.run(1)
    rounds = [("a", ["b", "c"], "d", "b"), ("b", ["c", "e"], "d", "c"),
              ("c", ["d", "e"], "a", "e")]
    for number, (leader, majority, outsider, heir) in enumerate(rounds):
        group.propose(leader, b"round-%d" % number)
        group.deliver(lambda src, dst, m, inside=[leader, *majority]:
                      src in inside and dst in inside)
        node = group[leader]
        assert node.term_at(node.commit) == node.term and node.entry(node.commit).data
        committed = [node.entry(i) for i in range(1, node.commit + 1)]
        group.in_flight.clear()
        group.crash(leader)
        loser = group[outsider]
        while loser.role != "candidate":
            group.step(outsider, Tick())
        group.deliver(lambda src, dst, m: isinstance(m, RequestVote | VoteReply))
        assert loser.role != "leader", f"{outsider} lacks a committed entry yet won"
        group.elect(heir)
        new = group[heir]
        assert [new.entry(i) for i in range(1, len(committed) + 1)] == committed
        group.restart(leader)
        group.run(2)
    applied = {h: group.machines[h].state for h in "abcde"}
    longest = max(applied.values(), key=len)
    for host, state in applied.items():
        assert state == longest[: len(state)], host
    assert [d for _, d in longest] == [b"round-0", b"round-1", b"round-2"]


def test_appends_and_votes_are_idempotent() -> None:
    """Raft's messages are idempotent: taking an append or a vote request twice, or late,
    changes nothing and answers the same.

    Reference: Raft §5.5
    """
    group = Group(settings=NO_PRE_VOTE)
    group.elect("a")
    group.propose("a", b"1", b"2")
    appends = [(s, d, m) for s, d, m in group.in_flight if isinstance(m, AppendEntries)]
    group.deliver()
    group.run(1)
    before = (group["b"].last_index, group["b"].commit, group.applied_data("b"))
    for src, dst, message in appends:  # the same appends again, late
        if dst == "b":
            group.in_flight.clear()
            group.step("b", Received(src, message))
            (reply,) = [m for _, d, m in group.in_flight if d == "a"]
            assert isinstance(reply, AppendReply) and not reply.reject
    assert (group["b"].last_index, group["b"].commit, group.applied_data("b")) == before
    vote = RequestVote(term=9, last_index=9, last_term=9)
    replies = []
    for _ in range(2):
        group.in_flight.clear()
        group.step("c", Received("b", vote))
        replies += [m for _, d, m in group.in_flight if d == "b"]
    assert replies[0] == replies[1] and isinstance(replies[0], VoteReply)
    assert replies[0].granted and group["c"].vote == "b"


def test_no_election_after_the_first_without_faults() -> None:
    """broadcastTime ≪ electionTimeout ≪ MTBF: with messages delivered within a tick and
    heartbeats every tick, once a leader is elected no follower ever times out.

    Reference: Raft §5.6
    """
    group = Group("abcde", seed=11)
    group.run(40)
    assert len(group.leaders()) == 1
    terms = {group[h].term for h in "abcde"}
    group.run(500)
    assert {group[h].term for h in "abcde"} == terms
    assert len(_leaders_by_term(group)) == 1
