"""Peek (issue 14 item 3; skueue/core/peeks.py): the element a dequeue would return now,
left in the queue, serialized through the same batches as every operation.

Small clusters in synchronous rounds; results are replayed in the anchor's order (``ord``)
against a reference priority queue (a deque per level), the oracle of ARCHITECTURE.md.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

import pytest

from skueue.core.dht_runs import opened
from skueue.core.effects import Complete, Send
from skueue.core.messages.stages import Get
from skueue.core.ops import Op, OpKind, Structure
from skueue.sim.cluster import build_cluster, process_ids
from tests.unit.test_priorities import PriorityRounds
from tests.unit.test_queue_delete import anchor_of


def replay(pairs: list[tuple[Op, Complete]], levels: int, seed: object) -> None:
    """Results in ``ord`` order: a dequeue takes the head of the most urgent non-empty
    level; a peek sees that head and leaves it."""
    queues: list[deque[object]] = [deque() for _ in range(levels)]
    ranks = [c.ord for _, c in pairs]
    assert ranks == sorted(set(ranks)), f"seed {seed}: ranks repeat: {ranks}"
    for op, c in pairs:
        if op.kind is OpKind.ENQUEUE:
            queues[min(op.priority, levels - 1)].append(op.value)
        elif op.kind is OpKind.DEQUEUE:
            head = next((q.popleft() for q in queues if q), None)
            assert c.value == head, f"seed {seed}: {op.describe()} got {c.value!r}, not {head!r}"
        elif op.kind is OpKind.PEEK:
            head = next((q[0] for q in queues if q), None)
            assert c.value == head, f"seed {seed}: {op.describe()} saw {c.value!r}, not {head!r}"


@dataclass
class PeekRounds(PriorityRounds):
    # Messages that ``hold`` picks stay here until released (a slow network, by hand).
    held: list[Send] = field(default_factory=list)
    holding: bool = False

    def op(self, pid: str, kind: OpKind, queue: str = "pq", value: str | None = None) -> Op:
        process = self.processes[pid]
        op = process.new_op(kind, value, queue)
        self.ops[(pid, op.op_id)] = op
        self._take(pid, process.submit(op))
        return op

    def _take(self, pid: str, effects: list) -> None:  # type: ignore[type-arg]
        if self.holding:
            looks = [e for e in effects if isinstance(e, Send) and _is_look(e.message)]
            self.held.extend(looks)
            effects = [e for e in effects if not any(e is x for x in looks)]
        super()._take(pid, effects)

    def release(self) -> None:
        self.holding = False
        self.flight.extend(self.held)
        self.held.clear()

    def result(self, pid: str, op: Op) -> Complete | None:
        return self.done.get((pid, op.op_id))


def _is_look(message: object) -> bool:
    return any(isinstance(m, Get) and m.keep for m in opened(message))  # bundles, runs


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("levels", [1, 4])
def test_a_peek_sees_what_a_dequeue_would_take_and_leaves_it(levels: int, seed: int) -> None:
    rng = random.Random(seed * 7 + levels)
    pids = process_ids(4)
    sim = PeekRounds(build_cluster(pids, Structure.QUEUE))
    sim.make(pids[0], "pq", levels)
    sim.run()
    for step in range(300):
        pid, x = rng.choice(pids), rng.random()
        if x < 0.5:
            sim.enqueue(pid, f"v{step}", rng.randrange(levels))
        elif x < 0.75:
            sim.op(pid, OpKind.DEQUEUE)
        else:
            sim.op(pid, OpKind.PEEK)
        if rng.random() < 0.3:
            sim.run()
    sim.run()
    pairs = [pc for q, pcs in sim.per_queue().items() if q == "pq" for pc in pcs]
    peeks = [c for op, c in pairs if op.kind is OpKind.PEEK]
    assert any(c.value is not None for c in peeks), "no peek saw an element"
    replay([(op, c) for op, c in pairs if op.kind is not OpKind.CREATE], levels, seed)


def test_program_order_holds_around_a_peek() -> None:
    """``peek; dequeue; peek`` from one process in one buffer: the anchor puts a cycle's
    runs before its peeks, so the dequeue and the second peek wait for the next batch."""
    pids = process_ids(2)
    sim = PeekRounds(build_cluster(pids, Structure.QUEUE))
    for v in ("a", "b"):
        sim.op(pids[0], OpKind.ENQUEUE, value=v)
    sim.run()
    first = sim.op(pids[1], OpKind.PEEK)
    taken = sim.op(pids[1], OpKind.DEQUEUE)
    second = sim.op(pids[1], OpKind.PEEK)
    sim.run()
    got = [sim.result(pids[1], op) for op in (first, taken, second)]
    assert [c.value for c in got if c] == ["a", "a", "b"]
    assert [c.ord for c in got if c] == sorted(c.ord for c in got if c)


def test_a_peek_at_an_empty_or_unmade_queue_sees_nothing_and_makes_nothing() -> None:
    pids = process_ids(3)
    sim = PeekRounds(build_cluster(pids, Structure.QUEUE))
    sim.op(pids[0], OpKind.ENQUEUE, "made", "x")
    sim.op(pids[1], OpKind.DEQUEUE, "made")
    sim.run()
    empty = sim.op(pids[2], OpKind.PEEK, "made")
    unmade = sim.op(pids[2], OpKind.PEEK, "nothing-here")
    sim.run()
    assert sim.result(pids[2], empty) == Complete(empty.op_id, None, 2)
    result = sim.result(pids[2], unmade)
    assert result is not None and result.value is None and result.error is None
    assert "nothing-here" not in anchor_of(sim).describe_queues()


def test_a_peek_at_a_stack_is_refused_with_a_reason() -> None:
    pids = process_ids(2)
    sim = PeekRounds(build_cluster(pids, Structure.QUEUE))
    sim.op(pids[0], OpKind.PUSH, "s", "x")
    sim.run()
    peek = sim.op(pids[1], OpKind.PEEK, "s")
    sim.run()
    result = sim.result(pids[1], peek)
    assert result is not None
    assert result.error == "'s' is a stack: peek is not an operation of a stack"


def test_no_later_dequeue_takes_the_head_before_a_slow_peek_read_it() -> None:
    """The peeking node keeps its batch in flight until its read is answered, so the next
    cycle (and the dequeue in it) waits; then the peek and the dequeue both get ``x``.
    Without that wait the dequeue would take ``x`` first and the read would wait forever
    for a Put that already came and went."""
    held_somewhere = False
    for peeker in process_ids(3):
        pids = process_ids(3)
        sim = PeekRounds(build_cluster(pids, Structure.QUEUE))
        sim.op(pids[0], OpKind.ENQUEUE, value="x")
        sim.run()
        sim.holding = True
        peek = sim.op(peeker, OpKind.PEEK)
        for _ in range(40):
            sim.round()
        if not sim.held:  # the head is stored in the peeker's own process: no message
            continue
        held_somewhere = True
        taker = next(p for p in pids if p != peeker)
        take = sim.op(taker, OpKind.DEQUEUE)
        for _ in range(60):
            sim.round()
        assert sim.result(taker, take) is None, "a later dequeue was served while a peek read"
        sim.release()
        sim.run()
        seen, got = sim.result(peeker, peek), sim.result(taker, take)
        assert seen is not None and got is not None
        assert (seen.value, got.value) == ("x", "x") and seen.ord < got.ord
    assert held_somewhere, "no peek read crossed processes: the test tested nothing"
