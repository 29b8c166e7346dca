"""Property: priority levels on every schedule (issue 14).  The adversarial scheduler runs
its workload on the default queue, with joins, leaves and crashes and messages in any
order, while clients also enqueue at random priorities, dequeue and peek on a queue made with
``P`` levels (P in 1, 2, 4, 8).

At the end:

- that queue's results, in the anchor's order, match a reference priority queue (a deque
  per level): every dequeue took the most urgent element present at its linearization
  point, FIFO within a level (PEI 0), and every peek saw that element and left it;
- every inserted element was dequeued once or is still stored, once;
- the default queue's history stays linearizable and loses nothing.

Hypothesis draws the cluster, the churn, P and the seed; a failure prints the call that
replays it.
"""

from __future__ import annotations

from collections import Counter, deque

from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.core.effects import Complete
from skueue.core.ops import Op, OpKind, QueueSettings, Structure
from skueue.core.process import Process
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.crashes import Request
from tests.property.test_delete_schedules import check_default_queue, entries_of

NAME = "pq"


class PrioritySim(AsyncSim):
    """The adversary, plus enqueues at random priorities and dequeues on ``pq``."""

    def __init__(self, config: AsyncConfig, levels: int, operations: int) -> None:
        super().__init__(config)
        self.levels = levels
        first = self.order[0]
        made = Op(
            first.next_op_id, OpKind.CREATE, None, NAME, settings=QueueSettings(priorities=levels)
        )
        self.recorder.invoked(first.process_id, made, self.steps)
        self.input(first, Request(made))
        self.script_pq = [self._kind(self.rng.random()) for _ in range(operations)]
        self.done_pq: list[tuple[Op, Complete]] = []

    def step(self) -> None:
        super().step()
        if self.script_pq and self.rng.random() < 0.05:
            clients = [p for p in self.order if p.joined and not p.leaving and not p.departed]
            if clients:
                process = self.retried(self.rng.choice(clients))
                kind = self.script_pq.pop()
                insert = kind is OpKind.ENQUEUE
                value = f"{process.process_id}-{process.next_op_id}" if insert else None
                priority = self.rng.randrange(self.levels + 1) if insert else 0
                op = Op(process.next_op_id, kind, value, NAME, priority=priority)
                self.recorder.invoked(process.process_id, op, self.steps)
                self.input(process, Request(op))

    @staticmethod
    def _kind(x: float) -> OpKind:
        return OpKind.ENQUEUE if x < 0.55 else OpKind.DEQUEUE if x < 0.8 else OpKind.PEEK

    def _completed(self, process: Process, done: Complete) -> None:
        op, _ = self.recorder.open_ops[(process.process_id, done.op_id)]
        if op.queue == NAME:
            self.done_pq.append((op, done))
        super()._completed(process, done)

    def finished(self) -> bool:
        quiet = all(n.store.quiet() for p in self.order if not p.departed for n in p.nodes.values())
        return super().finished() and not self.script_pq and quiet


def run_and_check(config: AsyncConfig, levels: int, operations: int) -> None:
    replay = f"replay with: PrioritySim({config!r}, {levels}, {operations}).run()"
    if currently_in_test_context():
        note(replay)
    sim = PrioritySim(config, levels, operations)
    result = sim.run()
    queues: list[deque[object]] = [deque() for _ in range(levels)]
    for op, c in sorted(sim.done_pq, key=lambda oc: oc[1].ord):
        assert c.error is None, f"{c.error}\n{replay}"
        if op.kind is OpKind.ENQUEUE:
            queues[min(op.priority, levels - 1)].append(op.value)
        elif op.kind is OpKind.DEQUEUE:
            head = next((q.popleft() for q in queues if q), None)
            assert c.value == head, f"{op.describe()}: {c.value!r}, not {head!r}\n{replay}"
        elif op.kind is OpKind.PEEK:  # the same head, left in the queue
            head = next((q[0] for q in queues if q), None)
            assert c.value == head, f"{op.describe()}: {c.value!r}, not {head!r}\n{replay}"
    left = Counter(v for q in queues for v in q)
    assert entries_of(sim, NAME) == left, f"stored != left\n{replay}"
    check_default_queue(result, replay)


@given(
    processes=st.integers(1, 8),
    levels=st.sampled_from([1, 2, 4, 8]),
    operations=st.integers(0, 40),
    pq_operations=st.integers(1, 120),
    joins=st.integers(0, 2),
    leaves=st.integers(0, 2),
    crashes=st.integers(0, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_priority_queues_give_the_most_urgent_element_on_every_schedule(
    processes: int,
    levels: int,
    operations: int,
    pq_operations: int,
    joins: int,
    leaves: int,
    crashes: int,
    seed: int,
) -> None:
    config = AsyncConfig(
        processes, Structure.QUEUE, operations, 0.6, seed, joins=joins, leaves=leaves,
        crashes=crashes,
    )  # fmt: skip
    run_and_check(config, levels, pq_operations)
