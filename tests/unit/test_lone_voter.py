"""A group of one voter (a daemon with ``--replicas 1``, docs/replication.md §6.3): it
leads as soon as it is told to campaign, and commits at its own write."""

from __future__ import annotations

import random

from skueue.replication.config import Config
from skueue.replication.effects import AppendLocal, Commit, RoleChanged, SaveHardState
from skueue.replication.inputs import Campaign, Persisted, Propose
from skueue.replication.messages import Entry
from skueue.replication.node import ReplicaNode
from skueue.replication.settings import DurableState, ReplicaSettings


def lone(term: int = 0, entries: tuple[Entry, ...] = ()) -> ReplicaNode:
    durable = DurableState(Config.of(["a"]), term=term, vote="a" if term else None,
                           entries=entries)  # fmt: skip
    return ReplicaNode("a", durable, ReplicaSettings(), random.Random(1))


def test_campaign_makes_a_lone_voter_leader_of_the_next_term_at_once() -> None:
    node = lone(term=4, entries=(Entry(4, "data", b"x"),))
    effects = node.step(Campaign())
    assert node.role == "leader" and node.term == 5
    assert SaveHardState(5, "a") in effects  # the vote is saved before it counts
    assert AppendLocal(2, (Entry(5, "took_over"),)) in effects
    assert RoleChanged("leader", 5, "a") in effects
    assert not any(isinstance(e, Commit) for e in effects)  # not yet durable


def test_a_lone_leader_commits_at_its_own_write() -> None:
    node = lone()
    node.step(Campaign())
    assert node.step(Persisted(1, 1)) == [Commit(1)]
    effects = node.step(Propose((b"a", b"b")))
    assert effects == [AppendLocal(2, (Entry(1, "data", b"a"), Entry(1, "data", b"b")))]
    assert node.step(Persisted(3, 1)) == [Commit(3)]


def test_a_leader_and_a_learner_ignore_campaign() -> None:
    node = lone()
    node.step(Campaign())
    assert node.step(Campaign()) == [] and node.term == 1
    learner = ReplicaNode("b", DurableState(Config.of(["a"], ["b"])), ReplicaSettings(),
                          random.Random(1))  # fmt: skip
    assert learner.step(Campaign()) == [] and learner.role == "follower"
