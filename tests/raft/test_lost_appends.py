"""Lost appends are sent again (Raft §5.3: "the leader retries AppendEntries RPCs
indefinitely until all followers eventually store all log entries"), also when the
follower's progress is in replicate state and the leader has nothing new to send.

Each test builds its schedule by hand on :class:`tests.raft.harness.Group`.
"""

from __future__ import annotations

from tests.raft.harness import Group


def test_append_lost_in_replicate_state_is_sent_again_without_new_proposals() -> None:
    """The last proposal of a burst whose appends are all lost still commits: the
    leader's heartbeats find out that the followers lack it and the leader sends it
    again, though nothing new is proposed after it.

    Reference: Raft §5.3
    """
    g = Group()
    g.elect("a")
    g.run(1)
    assert g["a"].progress["b"].state == g["a"].progress["c"].state == "replicate"
    g.partition(["a"], ["b", "c"])
    g.propose("a", b"x")
    g.deliver()  # the appends of x went nowhere
    g.heal()
    g.run(3)
    assert [g[h].last_index for h in "abc"] == [2, 2, 2]
    assert g["a"].commit == 2
    assert g.applied_data("a") == g.applied_data("b") == g.applied_data("c") == [b"x"]


def test_lost_append_to_one_follower_is_repaired_while_the_other_acks() -> None:
    """A follower that lost one append while the other follower took it (so the entry
    commits) still gets it, with no proposal after it.

    Reference: Raft §5.3
    """
    g = Group()
    g.elect("a")
    g.run(1)
    g.propose("a", b"x")
    g.drop(lambda _s, d, _m: d == "c")
    g.deliver()
    assert g["a"].commit == 2 and g["c"].last_index == 1
    g.run(3)
    assert g["c"].last_index == 2 and g["c"].commit == 2 and g.applied_data("c") == [b"x"]
    assert g["a"].progress["c"].match == 2 and g["a"].progress["c"].state == "replicate"
