"""Named queues in the core (issue 12): every name is its own queue or stack on the shared
tree, with its own positions, ranks and DHT keys; the anchor fixes a name's structure at
its first batch and refuses the other structure's operations (and new names past
``QUEUES_MAX``) with an error, changing nothing else.

Each case drives a small cluster in synchronous rounds and checks every queue's results
against a plain deque or list replayed in the anchor's order (``ord``), which is the
oracle of ARCHITECTURE.md; a failing case prints its seed.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

import pytest

import skueue.core.anchor as anchor_module
import skueue.core.ops as ops_module
from skueue.core.effects import Complete, Effect, Send
from skueue.core.ops import DEFAULT_QUEUE, Op, OpKind, Structure, queue_name_problem
from skueue.core.process import Process
from skueue.sim.cluster import build_cluster, process_ids


@dataclass
class Rounds:
    """Every process ticks once a round; every message sent in a round arrives in the next."""

    processes: dict[str, Process]
    ops: dict[tuple[str, int], Op] = field(default_factory=dict)
    done: dict[tuple[str, int], Complete] = field(default_factory=dict)
    flight: list[Send] = field(default_factory=list)

    def submit(
        self, pid: str, kind: OpKind, value: str | None = None, queue: str = DEFAULT_QUEUE
    ) -> None:
        process = self.processes[pid]
        op = process.new_op(kind, value, queue)
        self.ops[(pid, op.op_id)] = op
        self._take(pid, process.submit(op))

    def run(self, rounds_max: int = 400, after: int = 30) -> None:
        """Until every operation completed, then ``after`` more rounds (an insert
        completes before its Put lands; an idle tree never stops turning)."""
        for _ in range(rounds_max):
            if self.settled():
                after -= 1
                if after < 0:
                    return
            self.round()
        raise AssertionError(f"{len(self.ops) - len(self.done)} operations never completed")

    def round(self) -> None:
        """Deliver what was sent in the last round, then tick every process once."""
        arriving, self.flight = self.flight, []
        for send in arriving:
            pid = send.to.process
            self._take(pid, self.processes[pid].handle(send.to, send.message))
        for pid, process in self.processes.items():
            self._take(pid, process.tick())

    def settled(self) -> bool:
        """Every operation completed (a driver with more to wait for says so here)."""
        return len(self.done) == len(self.ops)

    def _take(self, pid: str, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, Complete):
                self.done[(pid, e.op_id)] = e
            else:
                self.flight.append(e)

    def per_queue(self) -> dict[str, list[tuple[Op, Complete]]]:
        """Each queue's completed operations in the anchor's order."""
        out: dict[str, list[tuple[Op, Complete]]] = {}
        for key, c in self.done.items():
            if c.error is None:
                out.setdefault(self.ops[key].queue, []).append((self.ops[key], c))
        return {q: sorted(pairs, key=lambda oc: oc[1].ord) for q, pairs in out.items()}


def replay(pairs: list[tuple[Op, Complete]]) -> None:
    """Results in ``ord`` order against a deque (queue) or a list (stack): the oracle."""
    fifo: deque[object] = deque()
    lifo: list[object] = []
    ranks = [c.ord for _, c in pairs]
    assert ranks == list(range(len(ranks))), f"ranks of one queue are 0..n-1: {ranks}"
    for op, c in pairs:
        if op.kind is OpKind.ENQUEUE:
            fifo.append(op.value)
        elif op.kind is OpKind.PUSH:
            lifo.append(op.value)
        elif op.kind is OpKind.DEQUEUE:
            assert c.value == (fifo.popleft() if fifo else None), op.describe()
        else:
            assert c.value == (lifo.pop() if lifo else None), op.describe()


@pytest.mark.parametrize("seed", range(6))
def test_queues_and_stacks_of_many_names_each_keep_their_own_order(seed: int) -> None:
    rng = random.Random(seed)
    pids = process_ids(4)
    sim = Rounds(build_cluster(pids, Structure.QUEUE))
    names = {"jobs": False, "mail:eu-1": False, "undo": True, DEFAULT_QUEUE: False}
    for step in range(400):
        name = rng.choice(sorted(names))
        stack = names[name]
        insert = rng.random() < 0.6
        kind = (OpKind.PUSH if insert else OpKind.POP) if stack else (
            OpKind.ENQUEUE if insert else OpKind.DEQUEUE)  # fmt: skip
        sim.submit(rng.choice(pids), kind, f"{name}-{step}" if insert else None, name)
        if rng.random() < 0.3:
            sim.run()
    sim.run()
    queues = sim.per_queue()
    assert set(queues) == set(names), f"seed {seed}"
    for pairs in queues.values():
        replay(pairs)
    # Positions are per queue: every queue's first insert landed at position 1.
    for name, pairs in queues.items():
        inserted = [c.position for op, c in pairs if op.kind.inserts and c.position is not None]
        if not names[name]:
            assert sorted(inserted)[:1] == [1], (seed, name)
    assert not [c for c in sim.done.values() if c.error], f"seed {seed}"


def test_a_name_keeps_the_structure_of_its_first_batch_and_refuses_the_other() -> None:
    pids = process_ids(3)
    sim = Rounds(build_cluster(pids, Structure.QUEUE))
    sim.submit(pids[0], OpKind.PUSH, "a", "undo")
    sim.run()
    sim.submit(pids[1], OpKind.ENQUEUE, "b", "undo")
    sim.submit(pids[1], OpKind.DEQUEUE, None, "undo")
    sim.submit(pids[2], OpKind.PUSH, "c", DEFAULT_QUEUE)  # the cluster's queue is a queue
    sim.run()
    refused = {sim.ops[k].describe(): c.error for k, c in sim.done.items() if c.error}
    assert len(refused) == 3, refused
    assert all("'undo' is a stack" in e for d, e in refused.items() if "undo" in d), refused
    assert any("'default' is a queue" in e for e in refused.values()), refused
    assert all(c.ord == -1 and c.value is None for c in sim.done.values() if c.error)
    sim.submit(pids[2], OpKind.POP, None, "undo")
    sim.run()
    popped = [c.value for k, c in sim.done.items() if sim.ops[k].kind is OpKind.POP]
    assert popped == ["a"], "the refused operations changed nothing"


def test_new_names_past_the_limit_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(anchor_module, "QUEUES_MAX", 3)  # the default queue and two more
    monkeypatch.setattr(ops_module, "QUEUES_MAX", 3)  # and the error text
    pids = process_ids(2)
    sim = Rounds(build_cluster(pids, Structure.QUEUE))
    for name in ("a", "b", "c"):
        sim.submit(pids[0], OpKind.ENQUEUE, name, name)
        sim.run()
    errors = [c.error for c in sim.done.values() if c.error]
    assert errors == ["the cluster holds 3 queues already: 'c' is not made"], errors
    sim.submit(pids[1], OpKind.DEQUEUE, None, "a")  # the ones made still work
    sim.run()
    assert [c.value for c in sim.done.values() if c.value == "a"] == ["a", "a"]


def test_the_same_position_of_two_queues_has_two_keys_and_two_entries() -> None:
    pids = process_ids(1)
    sim = Rounds(build_cluster(pids, Structure.QUEUE))
    for name in ("x", "y"):
        sim.submit(pids[0], OpKind.ENQUEUE, name, name)
    sim.run()
    process = sim.processes[pids[0]]
    stored = sorted(e for n in process.nodes.values() for e in n.store.items())
    assert stored == [("x", 1, 0, "x"), ("y", 1, 0, "y")]


def test_queue_names_are_checked() -> None:
    assert queue_name_problem("jobs:eu-1.high_2") is None
    for bad in ("", "a b", "ä", "a/b", "x" * 129, 7, None):
        assert queue_name_problem(bad), bad
