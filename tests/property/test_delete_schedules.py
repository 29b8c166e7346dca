"""Property: deleting a queue on every schedule (issue 12, item 1).  The adversarial
scheduler runs its workload on the default queue, with joins and leaves and messages in
any order, while clients also enqueue, dequeue, push, pop and delete on a second name,
``d``, whose structure changes from one incarnation to the next.  The hosts simulator
(skueue/sim/hosts.py) runs the same through the daemon's hosts and their clients, with
crashes and restarts too.

At the end:

- ``d``'s results, in the anchor's order, match a deque and a list that a delete
  empties (each delete reports how many it removed);
- every element inserted into ``d`` was dequeued, removed by a delete, or is still in
  the queue, and the DHT holds exactly the ones still there: the Drops cleared every
  entry of the deleted incarnations, even across hand-overs and restarts;
- the default queue's history stays linearizable and loses nothing.

Hypothesis draws the cluster, the churn, the crashes and the seed; a failure prints the
call that replays it.
"""

from __future__ import annotations

from collections import Counter, deque

from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.check.checker import check
from skueue.check.history import Record
from skueue.core.effects import Complete
from skueue.core.ops import Op, OpKind, Structure
from skueue.core.process import Process
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.host_clients import Deleted
from skueue.sim.host_workload import D
from skueue.sim.hosts import HostsConfig
from tests.property.host_runs import before_sync, deliveries, run_hosts, snapshot_every, stored
from tests.unit.test_queue_delete import replay as replay_queue

NAME = "d"


class DeleteSim(AsyncSim):
    """The adversary, plus a script of operations on ``d``."""

    def __init__(self, config: AsyncConfig, d_operations: int) -> None:
        super().__init__(config)
        self.d_script: list[OpKind] = []
        stack = False
        for _ in range(d_operations):
            roll = self.rng.random()
            if roll < 0.08:
                self.d_script.append(OpKind.DELETE)
                stack = self.rng.random() < 0.5  # the next incarnation's structure
            elif roll < 0.6:
                self.d_script.append(OpKind.PUSH if stack else OpKind.ENQUEUE)
            else:
                self.d_script.append(OpKind.POP if stack else OpKind.DEQUEUE)
        self.d_script.reverse()
        self.d_done: list[tuple[Op, Complete]] = []

    def step(self) -> None:
        super().step()
        if self.d_script and self.rng.random() < 0.05:
            clients = [p for p in self.order if p.joined and not p.leaving and not p.departed]
            if clients:
                self._submit(self.rng.choice(clients), self.d_script.pop(), False, NAME)

    def _completed(self, process: Process, done: Complete) -> None:
        op, _ = self.recorder.open_ops[(process.process_id, done.op_id)]
        if op.queue == NAME:
            self.d_done.append((op, done))
        super()._completed(process, done)

    def finished(self) -> bool:
        return super().finished() and not self.d_script and self.clear()

    def clear(self) -> bool:
        """No Put, Get or Drop is on its way, and no Drop waits to be sent."""
        return all(
            n.store.quiet() and not n.store.deferred_drops
            for p in self.order
            if not p.departed
            for n in p.nodes.values()
        )


def entries_of(sim: AsyncSim, queue: str) -> Counter[object]:
    """The elements of ``queue`` stored on the live processes, with multiplicity."""
    return Counter(
        element
        for p in sim.order
        if not p.departed
        for n in p.nodes.values()
        for name, _, _, element in n.store.items()
        if name == queue
    )


def check_default_queue(records: list[Record], replay: str) -> None:
    """The workload on the default queue: linearizable, nothing lost."""
    default = [r for r in records if r.queue is None]
    verdict = check(default, model="linearizable", method="certificate")
    assert verdict.ok, f"{verdict.describe()}\n{replay}"
    inserted = Counter(r.value for r in default if r.op in ("enqueue", "push"))
    removed = Counter(r.value for r in default if r.op in ("dequeue", "pop") and r.value)
    assert removed == inserted, f"the default queue lost or repeated elements\n{replay}"


def no_queue(op: Op, c: Complete) -> bool:
    """A delete answered that no queue had the name: it keeps its rank and removed 0."""
    return op.kind is OpKind.DELETE and (c.error or "").startswith("no queue") and c.ord >= 0


def run_and_check(config: AsyncConfig, d_operations: int) -> None:
    replay = f"replay with: DeleteSim({config!r}, {d_operations}).run()"
    if currently_in_test_context():
        note(replay)
    sim = DeleteSim(config, d_operations)
    result = sim.run()
    for op, c in sim.d_done:  # refused: an operation of the old structure, after the switch
        if no_queue(op, c):
            continue  # a delete of a name without a queue: ordered, it removed nothing
        assert c.error is None or ("is a" in c.error and c.ord == -1), f"{c.error}\n{replay}"
    done = sorted(
        ((op, c) for op, c in sim.d_done if c.error is None or no_queue(op, c)),
        key=lambda oc: oc[1].ord,
    )
    left = replay_queue(done, replay)
    assert entries_of(sim, NAME) == Counter(left), f"entries left behind\n{replay}"
    check_default_queue(result.records, replay)


@given(
    processes=st.integers(1, 8),
    structure=st.sampled_from(list(Structure)),
    operations=st.integers(0, 60),
    d_operations=st.integers(1, 80),
    joins=st.integers(0, 2),
    leaves=st.integers(0, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_deletes_keep_every_name_in_order_and_leave_nothing_behind(
    processes: int,
    structure: Structure,
    operations: int,
    d_operations: int,
    joins: int,
    leaves: int,
    seed: int,
) -> None:
    config = AsyncConfig(processes, structure, operations, 0.6, seed, joins=joins, leaves=leaves)
    run_and_check(config, d_operations)


def replay_name(done: list[Record | Deleted], replay: str) -> list[str | None]:
    """One name's answers in ``ord`` order against a deque and a list that a delete
    empties (it says how many it removed).  Returns what is left in it."""
    ranks = [x.ord for x in done]
    assert ranks == sorted(set(ranks)), f"ranks repeat or go back: {ranks}\n{replay}"
    fifo: deque[str | None] = deque()
    lifo: list[str | None] = []
    for x in done:
        if isinstance(x, Deleted):
            assert x.removed == len(fifo) + len(lifo), f"{x}\n{replay}"
            fifo.clear()
            lifo.clear()
        elif x.op in ("enqueue", "push"):
            (fifo.append if x.op == "enqueue" else lifo.append)(x.value)
        elif x.op == "dequeue":
            assert x.value == (fifo.popleft() if fifo else None), f"{x.describe()}\n{replay}"
        else:
            assert x.value == (lifo.pop() if lifo else None), f"{x.describe()}\n{replay}"
    return [*fifo, *lifo]


@given(
    processes=st.integers(1, 6),
    structure=st.sampled_from(list(Structure)),
    operations=st.integers(0, 40),
    d_operations=st.integers(1, 80),
    joins=st.integers(0, 2),
    leaves=st.integers(0, 2),
    crashes=st.integers(0, 3),
    before_sync_ratio=before_sync,
    snapshot_every=snapshot_every,
    delivery=deliveries,
    seed=st.integers(0, 2**32 - 1),
)
def test_hosts_delete_names_in_order_through_crashes_and_churn(
    processes: int,
    structure: Structure,
    operations: int,
    d_operations: int,
    joins: int,
    leaves: int,
    crashes: int,
    before_sync_ratio: float,
    snapshot_every: int,
    delivery: str,
    seed: int,
) -> None:
    """The same through the daemon's hosts, as clients see it: the refusals are of an
    operation of the other structure (after a switch) or of a delete of a name that
    holds no queue, and nothing of a deleted incarnation stays in the DHT across
    hand-overs and restarts."""
    config = HostsConfig(
        processes, structure, 3, operations, 0.6, seed, delivery, crashes, before_sync_ratio,
        snapshot_every, joins=joins, leaves=leaves, d_operations=d_operations,
    )  # fmt: skip
    result, replay = run_hosts(config)
    for plan, why in result.refusals:
        other = "is a" in why and plan.kind != "delete"
        assert plan.queue == D and (other or why.startswith("no queue")), f"{why}\n{replay}"
    named: list[Record | Deleted] = [r for r in result.records if r.queue == D]
    named += [d for d in result.deletes if d.queue == D]
    left = replay_name(sorted(named, key=lambda x: x.ord or 0), replay)
    assert stored(result, D) == Counter(left), f"entries left behind\n{replay}"
    check_default_queue(result.records, replay)
