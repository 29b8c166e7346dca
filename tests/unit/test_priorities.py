"""Priority levels in the core (issue 14, Skeap-style; skueue/core/levels.py).

A queue made with ``P`` levels serves, in every remove run, the most urgent elements
first, FIFO within a level.  Each case drives a small cluster in synchronous rounds and
replays every result in the anchor's order (``ord``) against a reference priority queue
(a deque per level), the oracle of ARCHITECTURE.md; a failing case prints its seed.
"""

from __future__ import annotations

import random
from collections import deque

import pytest

from skueue.core.anchor import import_anchors
from skueue.core.batch import Batch, combine_all
from skueue.core.effects import Complete
from skueue.core.levels import LEVEL_SHIFT, fold, level_of
from skueue.core.ops import PRIORITIES_MAX, Op, OpKind, QueueSettings, Structure
from skueue.sim.cluster import build_cluster, process_ids
from tests.unit.test_queue_create import CreateRounds
from tests.unit.test_queue_delete import anchor_of, stored


class PriorityRounds(CreateRounds):
    def make(self, pid: str, queue: str, levels: int) -> None:
        process = self.processes[pid]
        op = process.new_op(OpKind.CREATE, None, queue, settings=QueueSettings(priorities=levels))
        self.ops[(pid, op.op_id)] = op
        self._take(pid, process.submit(op))

    def enqueue(self, pid: str, value: str, priority: int, queue: str = "pq") -> Op:
        process = self.processes[pid]
        op = process.new_op(OpKind.ENQUEUE, value, queue, priority=priority)
        self.ops[(pid, op.op_id)] = op
        self._take(pid, process.submit(op))
        return op


def replay(pairs: list[tuple[Op, Complete]], levels: int, seed: object) -> None:
    """Results in ``ord`` order against a deque per level: a dequeue takes the head of
    the most urgent non-empty level (PEI 0), and an insert lands at its own level."""
    queues: list[deque[object]] = [deque() for _ in range(levels)]
    ranks = [c.ord for _, c in pairs]
    assert ranks == sorted(set(ranks)), f"seed {seed}: ranks repeat: {ranks}"
    for op, c in pairs:
        if op.kind is OpKind.ENQUEUE:
            level = min(op.priority, levels - 1)
            queues[level].append(op.value)
            assert c.position is not None and level_of(c.position) == level, (seed, op, c)
        elif op.kind is OpKind.DEQUEUE:
            head = next((q.popleft() for q in queues if q), None)
            assert c.value == head, f"seed {seed}: {op.describe()} got {c.value!r}, not {head!r}"


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("levels", [2, 4, 8])
def test_every_dequeue_takes_the_most_urgent_element_fifo_within_its_level(
    levels: int, seed: int
) -> None:
    """Reference: Skeap (SPAA 2019) §3, as issue 14 restates it: within one batch the
    anchor gives each dequeue run the most urgent non-empty levels, spilling into the
    next level when one runs out; FIFO within a level."""
    rng = random.Random(seed * 31 + levels)
    pids = process_ids(4)
    sim = PriorityRounds(build_cluster(pids, Structure.QUEUE))
    sim.make(pids[0], "pq", levels)
    sim.run()
    for step in range(400):
        pid = rng.choice(pids)
        if rng.random() < 0.55:
            sim.enqueue(pid, f"v{step}", rng.randrange(levels + 2))  # some beyond the last
        else:
            sim.submit(pid, OpKind.DEQUEUE, None, "pq")
        if rng.random() < 0.25:
            sim.run()
    sim.run()
    pairs = [pc for q, pcs in sim.per_queue().items() if q == "pq" for pc in pcs]
    replay([(op, c) for op, c in pairs if op.kind is not OpKind.CREATE], levels, seed)
    assert not [c for c in sim.done.values() if c.error], f"seed {seed}"


def test_a_queue_without_levels_ignores_priorities() -> None:
    pids = process_ids(2)
    sim = PriorityRounds(build_cluster(pids, Structure.QUEUE))
    for i, priority in enumerate((3, 0, 9)):
        sim.enqueue(pids[0], f"v{i}", priority, queue="plain")
    sim.run()
    for _ in range(3):
        sim.submit(pids[1], OpKind.DEQUEUE, None, "plain")
    sim.run()
    got = [c.value for k, c in sorted(sim.done.items()) if sim.ops[k].kind is OpKind.DEQUEUE]
    assert got == ["v0", "v1", "v2"]
    assert all(c.position is not None and c.position < 1 << LEVEL_SHIFT for c in sim.done.values())


def test_a_leased_element_goes_back_at_its_own_level() -> None:
    """Issue 14 item 2: a nacked element returns at its own priority (the tail of its
    level), not at level 0."""
    pids = process_ids(2)
    sim = PriorityRounds(build_cluster(pids, Structure.QUEUE))
    sim.make(pids[0], "pq", 3)
    sim.run()
    sim.enqueue(pids[0], "a1", 1)
    sim.enqueue(pids[0], "low", 2)
    sim.run()
    leased = sim.leased(pids[1], "pq")
    sim.run()
    assert sim.result(pids[1], leased).value == "a1"
    sim.enqueue(pids[0], "b0", 0)
    sim.enqueue(pids[0], "b1", 1)
    sim.run()
    sim._take(pids[1], sim.processes[pids[1]].release(leased.op_id, "nack") or [])
    sim.run()
    order = []
    for _ in range(4):
        op = sim.processes[pids[0]].new_op(OpKind.DEQUEUE, None, "pq")
        sim.ops[(pids[0], op.op_id)] = op
        sim._take(pids[0], sim.processes[pids[0]].submit(op))
        sim.run()
        order.append(sim.result(pids[0], op).value)
    assert [getattr(v, "value", v) for v in order] == ["b0", "b1", "a1", "low"], order


def test_deleting_a_queue_with_levels_clears_every_level() -> None:
    pids = process_ids(3)
    sim = PriorityRounds(build_cluster(pids, Structure.QUEUE))
    sim.make(pids[0], "pq", 4)
    sim.run()
    for i in range(24):
        sim.enqueue(pids[i % 3], f"v{i}", i % 4)
    sim.run()
    sim.submit(pids[1], OpKind.DELETE, None, "pq")
    sim.run()
    (deleted,) = [c for k, c in sim.done.items() if sim.ops[k].kind is OpKind.DELETE]
    assert deleted.removed == 24
    assert not stored(sim)


def test_the_anchor_hands_the_levels_over() -> None:
    pids = process_ids(2)
    sim = PriorityRounds(build_cluster(pids, Structure.QUEUE))
    sim.make(pids[0], "pq", 3)
    sim.run()
    for i in range(5):
        sim.enqueue(pids[0], f"v{i}", i % 3)
    sim.run()
    sim.submit(pids[1], OpKind.DEQUEUE, None, "pq")
    sim.run()
    anchors = anchor_of(sim)
    again = import_anchors(*anchors.export())
    assert again.describe() == anchors.describe()
    assert again.describe_queues()["pq"] == (4, "queue", 0, 3)


def test_a_batch_holds_at_most_one_count_per_level_per_insert_run() -> None:
    """The bound: a queue's batch has its runs (Theorem 18) and, per insert run, one
    count per level in use, at most ``PRIORITIES_MAX``: O(runs * P) integers."""
    batches = [
        Batch((2, 1, 3), (2, 1, 3), ((1, 1), (), (0, 0, 3))),
        Batch((1,), (1,), ((0,) * 15 + (1,),)),
        Batch((0, 2), (0, 2)),
    ]
    total = combine_all(batches)
    assert total.counts == (3, 3, 3)
    assert total.levels == ((1, 1) + (0,) * 13 + (1,), (), (0, 0, 3))
    assert all(len(v) <= PRIORITIES_MAX for v in total.levels)
    assert fold(total.levels[0], 2) == (1, 2), "levels past the last count at the last"
