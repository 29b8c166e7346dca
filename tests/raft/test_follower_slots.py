"""A replica that never stands for election (``ReplicaSettings.campaigns`` False): a
daemon's follower slot until failover is built (docs/replication.md §11).  It must
never campaign, yet still vote for the home replica when that one restarts, once its
timer says the old leader is gone (thesis §4.2.3)."""

from __future__ import annotations

import random

from skueue.replication.config import Config
from skueue.replication.effects import Send
from skueue.replication.inputs import Campaign, Received, Tick
from skueue.replication.messages import AppendEntries, RequestVote, VoteReply
from skueue.replication.node import ReplicaNode
from skueue.replication.settings import DurableState, ReplicaSettings

SLOT = ReplicaSettings(campaigns=False)


def slot(host: str = "b") -> ReplicaNode:
    return ReplicaNode(host, DurableState(Config.of(["a", "b", "c"])), SLOT, random.Random(1))


def test_a_slot_never_stands_whatever_its_timer_says() -> None:
    """No tick nor ``Campaign`` makes it a candidate: only the home replica leads.

    Reference: docs/replication.md §6.2"""
    node = slot()
    sent = []
    for _ in range(20 * SLOT.election_ticks):
        sent += node.step(Tick())
    sent += node.step(Campaign())
    assert node.role == "follower" and node.term == 0
    assert not [e for e in sent if isinstance(e, Send)], sent


def test_a_slot_votes_for_its_restarted_leader_at_once_and_ignores_a_stray() -> None:
    """Within the least timeout after the leader's last append, a vote request from
    another replica is a stray and ignored; one from the leader itself is not (it
    restarted and stands again): granted at once, pre-vote then vote, instead of after
    a whole election timeout of the group standing still.

    Reference: thesis §4.2.3"""
    node = slot()
    node.step(Received("a", AppendEntries(1, 0, 0, (), 0)))  # a leads, term 1
    assert node.leader == "a"
    assert node.step(Received("c", RequestVote(2, 0, 0, pre_vote=True))) == []  # a stray
    asked = Received("a", RequestVote(2, 0, 0, pre_vote=True))  # a's next life asks
    replies = [e.message for e in node.step(asked) if isinstance(e, Send)]
    assert replies == [VoteReply(2, granted=True, pre_vote=True)], replies
    replies = [e.message for e in node.step(Received("a", RequestVote(2, 0, 0)))
               if isinstance(e, Send)]  # fmt: skip
    assert replies == [VoteReply(2, granted=True)] and node.vote == "a" and node.term == 2
