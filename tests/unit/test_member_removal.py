"""Forgetting a process that will never come back (skueue/core/membership/removal.py),
on the pure core with a tiny driver that delivers every message except to the dead.

A joiner that died after its responsible node placed it stalls the whole tree (a node
waits for a batch from every child, and the joiner's left node is relayed as one); it
holds nothing, so it may be forgotten, and the tree moves again.  A member of the ring,
or a joiner whose operations went up the tree, may not: that would lose its state.
"""

from __future__ import annotations

import pytest

from skueue.core.effects import Complete, Effect, Send
from skueue.core.errors import ProtocolError
from skueue.core.membership.removal import Hold
from skueue.core.ops import OpKind, Structure
from skueue.core.process import Process
from skueue.overlay.labels import Kind, node_ref
from skueue.sim.cluster import build_cluster

ROUNDS_MAX = 200


class Net:
    """Every process ticks each round; messages go one round later, except to the dead."""

    def __init__(self, processes: dict[str, Process]) -> None:
        self.processes = processes
        self.dead: set[str] = set()
        self.sends: list[Send] = []
        self.done: list[Complete] = []

    def take(self, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, Send):
                self.sends.append(e)
            elif isinstance(e, Complete):
                self.done.append(e)

    def round(self) -> None:
        sends, self.sends = self.sends, []
        for s in sends:
            if s.to.process not in self.dead:
                self.take(self.processes[s.to.process].handle(s.to, s.message))
        for pid, p in self.processes.items():
            if pid not in self.dead:
                self.take(p.tick())

    def until(self, done: int, rounds: int = ROUNDS_MAX) -> bool:
        for _ in range(rounds):
            if len(self.done) >= done:
                return True
            self.round()
        return len(self.done) >= done

    def insert(self, pid: str, value: bytes) -> None:
        p = self.processes[pid]
        self.take(p.submit(p.new_op(OpKind.ENQUEUE, value)))

    def worst_hold(self, process: str) -> Hold:
        return max(p.hold_on(process)[0] for pid, p in self.processes.items() if pid != process)


def cluster_with_joiner() -> Net:
    """Two members and a joiner x whose join requests went out."""
    processes = build_cluster(["p0", "p1"], Structure.QUEUE)
    x = Process.create_joining("x", node_ref("p0", Kind.LEFT), Structure.QUEUE)
    net = Net({**processes, "x": x})
    net.take(x.join())
    return net


def test_a_dead_joiner_stalls_the_tree_holds_nothing_and_once_forgotten_the_tree_moves() -> None:
    net = cluster_with_joiner()
    net.dead.add("x")  # its requests are out; it never answers again
    for _ in range(10):
        net.round()
    assert net.worst_hold("x") is Hold.JOINER
    net.insert("p0", b"a")
    assert not net.until(1, rounds=60), "the tree moved without the dead joiner's batch"
    forgot = [p.forget_joiner("x") for pid, p in net.processes.items() if pid != "x"]
    assert any(forgot)
    assert net.worst_hold("x") is Hold.NONE
    assert net.until(1), "the tree did not move again once the joiner was forgotten"
    assert net.done[0].value == b"a"


def test_a_member_of_the_ring_is_held_as_ring_and_cannot_be_forgotten() -> None:
    processes = build_cluster(["p0", "p1"], Structure.QUEUE)
    hold, why = processes["p0"].hold_on("p1")
    assert hold is Hold.RING and "neighbour" in why
    with pytest.raises(ProtocolError):
        processes["p0"].forget_joiner("p1")


def test_a_joiner_whose_operations_went_up_is_part_of_the_ring() -> None:
    """Positions were given to its operations: forgetting it would leave holes."""
    net = cluster_with_joiner()
    net.insert("x", b"from-x")
    for _ in range(ROUNDS_MAX):
        if any(p.hold_on("x")[0] is Hold.RING for pid, p in net.processes.items() if pid != "x"):
            break
        net.round()
    net.dead.add("x")
    for _ in range(20):  # its batch is served, the grants go to nobody: nothing in flight
        net.round()
    hold, why = max((p.hold_on("x") for pid, p in net.processes.items() if pid != "x"),
                    key=lambda h: h[0])  # fmt: skip
    assert hold is Hold.RING and "went up the tree" in why, why
