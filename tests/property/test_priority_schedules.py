"""Property: priority levels on every schedule (issue 14).  The adversarial scheduler runs
its workload on the default queue, with joins and leaves and messages in any order,
while clients also enqueue at random priorities, dequeue and peek on a queue made with
``P`` levels (P in 1, 2, 4, 8).  The hosts simulator (skueue/sim/hosts.py) runs the same
through the daemon's hosts and their clients, with crashes and restarts too.

At the end:

- that queue's results, in the anchor's order, match a reference priority queue (a deque
  per level): every dequeue took the most urgent element present at its linearization
  point, FIFO within a level (PEI 0), and every peek saw that element and left it;
- every inserted element was dequeued once or is still stored, once;
- the default queue's history stays linearizable and loses nothing.

With leases (a share of the dequeues take one, acked, nacked or expired at random
moments, and some with a delivery limit), a nacked or expired element goes back at its
own level, so the reference above no longer applies; then:

- the lease checker finds nothing: every element acked, taken by a plain dequeue, or
  left in ``pq`` or its dead letters at the end, exactly once;
- each queue's history of the inserts and every element's *first* removal (a returned
  element is a new insertion, which no client sees; so are the peeks that saw one) passes
  the priority certificate.

Hypothesis draws the cluster, the churn, the crashes, P and the seed; a failure prints
the call that replays it.
"""

from __future__ import annotations

from collections import Counter, deque

from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.check.checker import check
from skueue.check.history import INSERT_OPS, Record
from skueue.check.leases import check_leases
from skueue.core.effects import Complete
from skueue.core.ops import Op, OpKind, QueueSettings, Structure, dead_letter_queue, plain
from skueue.core.process import Process
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.host_workload import PQ
from skueue.sim.hosts import HostsConfig, HostsResult
from tests.property.host_runs import (
    before_sync,
    deliveries,
    run_hosts,
    snapshot_every,
    stored,
    timeouts,
)
from tests.property.test_delete_schedules import check_default_queue, entries_of

NAME = "pq"


class PrioritySim(AsyncSim):
    """The adversary, plus enqueues at random priorities and dequeues on ``pq``."""

    def __init__(self, config: AsyncConfig, levels: int, operations: int) -> None:
        super().__init__(config)
        self.levels = levels
        first = self.order[0]
        made = first.new_op(OpKind.CREATE, None, NAME, settings=QueueSettings(priorities=levels))
        self.recorder.invoked(first.process_id, made, self.steps)
        self._apply(first, first.submit(made))
        self.script_pq = [self._kind(self.rng.random()) for _ in range(operations)]
        self.done_pq: list[tuple[Op, Complete]] = []

    def step(self) -> None:
        super().step()
        if self.script_pq and self.rng.random() < 0.05:
            clients = [p for p in self.order if p.joined and not p.leaving and not p.departed]
            if clients:
                process, kind = self.rng.choice(clients), self.script_pq.pop()
                if kind is OpKind.ENQUEUE:
                    priority = self.rng.randrange(self.levels + 1)
                    self._submit(process, kind, queue=NAME, priority=priority)
                else:  # a dequeue may take a lease (AsyncConfig.lease_ratio); a peek never
                    self._submit(process, kind, may_lease=kind is OpKind.DEQUEUE, queue=NAME)

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
        if not (super().finished() and not self.script_pq and quiet):
            return False
        # Leases of pq taken after the default queue's drain began: nacked now, then the
        # run ends once their elements are back in.
        return not self.config.lease_ratio or self._leases_settled()


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
    check_default_queue(result.records, replay)


@given(
    processes=st.integers(1, 8),
    levels=st.sampled_from([1, 2, 4, 8]),
    operations=st.integers(0, 40),
    pq_operations=st.integers(1, 120),
    joins=st.integers(0, 2),
    leaves=st.integers(0, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_priority_queues_give_the_most_urgent_element_on_every_schedule(
    processes: int,
    levels: int,
    operations: int,
    pq_operations: int,
    joins: int,
    leaves: int,
    seed: int,
) -> None:
    config = AsyncConfig(processes, Structure.QUEUE, operations, 0.6, seed, joins=joins,
                         leaves=leaves)  # fmt: skip
    run_and_check(config, levels, pq_operations)


def check_priority_queue(result: HostsResult, replay: str) -> None:
    """``pq``'s answers, in the anchor's order, against a deque per level: each insert
    went to the level it asked for (the last, past it), each dequeue and peek saw the
    most urgent element present; what is left is what the members store."""
    levels = result.config.pq_levels
    queues: list[deque[str | None]] = [deque() for _ in range(levels)]
    assert not result.refusals, f"{result.refusals[:3]}\n{replay}"
    for r in sorted((r for r in result.records if r.queue == PQ), key=lambda r: r.ord or 0):
        if r.op == "enqueue":
            assert r.value is not None
            level = min(result.priorities[r.value], levels - 1)
            assert (r.priority or 0) == level, f"{r.describe()}: not at {level}\n{replay}"
            queues[level].append(r.value)
        else:
            head = next((q[0] for q in queues if q), None)
            assert r.value == head, f"{r.describe()}: not {head!r}\n{replay}"
            if r.op == "dequeue" and head is not None:
                next(q for q in queues if q).popleft()
    left = Counter(v for q in queues for v in q)
    assert stored(result, PQ) == left, f"stored != left\n{replay}"
    for plan, settings in result.configured:  # a configure says the settings it made
        assert (settings.structure, settings.max_deliveries, settings.priorities) == (
            "queue", plan.limit, levels), f"{plan}: {settings}\n{replay}"


@given(
    processes=st.integers(1, 6),
    levels=st.sampled_from([1, 2, 4, 8]),
    operations=st.integers(0, 30),
    pq_operations=st.integers(1, 100),
    joins=st.integers(0, 2),
    leaves=st.integers(0, 2),
    crashes=st.integers(0, 3),
    before_sync_ratio=before_sync,
    snapshot_every=snapshot_every,
    delivery=deliveries,
    seed=st.integers(0, 2**32 - 1),
)
def test_hosts_give_the_most_urgent_element_through_crashes_and_churn(
    processes: int,
    levels: int,
    operations: int,
    pq_operations: int,
    joins: int,
    leaves: int,
    crashes: int,
    before_sync_ratio: float,
    snapshot_every: int,
    delivery: str,
    seed: int,
) -> None:
    config = HostsConfig(
        processes, Structure.QUEUE, 3, operations, 0.6, seed, delivery, crashes,
        before_sync_ratio, snapshot_every, joins=joins, leaves=leaves, pq_levels=levels,
        pq_operations=pq_operations,
    )  # fmt: skip
    result, replay = run_hosts(config)
    check_priority_queue(result, replay)
    check_default_queue(result.records, replay)


def first_removals(records: list[Record], queue: str | None) -> list[Record]:
    """``queue``'s records without any element's later removals, and without the peeks
    that saw an element already removed once (they saw a returned one)."""
    removed: set[str | None] = set()
    out = []
    mine = (r for r in records if r.queue == queue and r.op != "create")
    for r in sorted(mine, key=lambda r: (r.ord if r.ord is not None else -1, r.response)):
        if r.value in removed and not r.inserts:
            continue
        if r.op in ("dequeue", "pop") and r.value is not None:
            removed.add(r.value)
        out.append(r)
    return out


def run_and_check_leases(config: AsyncConfig, levels: int, operations: int) -> None:
    replay = f"replay with: PrioritySim({config!r}, {levels}, {operations}).run()"
    if currently_in_test_context():
        note(replay)
    sim = PrioritySim(config, levels, operations)
    result = sim.run()
    left = [*result.drained, *map(plain, entries_of(sim, NAME).elements())]
    dead = [*result.dead, *map(plain, entries_of(sim, dead_letter_queue(NAME)).elements())]
    inserted = [r.value for r in result.records if r.op in INSERT_OPS and r.value is not None]
    verdict = check_leases(result.lease_events, inserted, left=left, dead=dead, taken=result.taken)
    assert verdict.ok, "\n".join([*verdict.problems[:10], replay])
    for queue in (None, NAME):
        history = check(first_removals(result.records, queue), method="certificate")
        assert history.ok, f"{queue}: {history.describe()}\n{replay}"


@given(
    processes=st.integers(1, 6),
    levels=st.sampled_from([1, 2, 4, 8]),
    pq_operations=st.integers(1, 120),
    lease_ratio=st.sampled_from([0.3, 0.7, 1.0]),
    max_deliveries=st.sampled_from([0, 2]),
    joins=st.integers(0, 1),
    leaves=st.integers(0, 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_priority_queues_with_leases_lose_nothing_on_every_schedule(
    processes: int,
    levels: int,
    pq_operations: int,
    lease_ratio: float,
    max_deliveries: int,
    joins: int,
    leaves: int,
    seed: int,
) -> None:
    config = AsyncConfig(
        processes, Structure.QUEUE, 10, 0.6, seed, joins=joins, leaves=leaves,
        lease_ratio=lease_ratio, max_deliveries=max_deliveries,
    )  # fmt: skip
    run_and_check_leases(config, levels, pq_operations)


@given(
    processes=st.integers(1, 6),
    levels=st.sampled_from([1, 2, 4, 8]),
    pq_operations=st.integers(1, 100),
    lease_ratio=st.sampled_from([0.3, 0.7, 1.0]),
    max_deliveries=st.sampled_from([0, 2]),
    joins=st.integers(0, 1),
    leaves=st.integers(0, 1),
    crashes=st.integers(0, 3),
    timeout_steps=timeouts,
    seed=st.integers(0, 2**32 - 1),
)
def test_hosts_with_leases_lose_nothing_of_a_priority_queue(
    processes: int,
    levels: int,
    pq_operations: int,
    lease_ratio: float,
    max_deliveries: int,
    joins: int,
    leaves: int,
    crashes: int,
    timeout_steps: int,
    seed: int,
) -> None:
    """The same through the daemon's hosts, with crashes and restarts, whose leases go
    back at their own level."""
    config = HostsConfig(
        processes, Structure.QUEUE, 3, 10, 0.6, seed, crashes=crashes,
        timeout_steps=timeout_steps, lease_ratio=lease_ratio, max_deliveries=max_deliveries,
        joins=joins, leaves=leaves, pq_levels=levels, pq_operations=pq_operations,
    )  # fmt: skip
    result, replay = run_hosts(config)
    left = [*result.drained, *stored(result, PQ).elements()]
    dead = [*result.dead, *stored(result, dead_letter_queue(PQ)).elements()]
    verdict = check_leases(result.lease_events, result.inserted, left=left, dead=dead,
                           taken=result.taken)  # fmt: skip
    assert verdict.ok, "\n".join([*verdict.problems[:10], replay])
    for queue in (None, PQ):
        history = check(first_removals(result.records, queue), method="certificate")
        assert history.ok, f"{queue}: {history.describe()}\n{replay}"
