"""Property: deleting a queue on every schedule (issue 12, item 1).  The adversarial
scheduler runs its workload on the default queue, with joins, leaves and crashes and
messages in any order, while clients also enqueue, dequeue, push, pop and delete on a
second name, ``d``, whose structure changes from one incarnation to the next.

At the end:

- ``d``'s results, in the anchor's order, match a deque and a list that a delete
  empties (each delete reports how many it removed);
- every element inserted into ``d`` was dequeued, removed by a delete, or is still in
  the queue, and the DHT holds exactly the ones still there: the Drops cleared every
  entry of the deleted incarnations, even across hand-overs and restarts;
- the default queue's history stays linearizable and loses nothing.

Hypothesis draws the cluster, the churn and the seed; a failure prints the call that
replays it.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.check.checker import check
from skueue.core.effects import Complete
from skueue.core.ops import Op, OpKind, Structure
from skueue.core.process import Process
from skueue.sim.adversary import AsyncConfig, AsyncResult, AsyncSim
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


def check_default_queue(result: AsyncResult, replay: str) -> None:
    """The adversary's own workload, on the default queue: linearizable, nothing lost."""
    default = [r for r in result.records if r.queue is None]
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
    check_default_queue(result, replay)


@given(
    processes=st.integers(1, 8),
    structure=st.sampled_from(list(Structure)),
    operations=st.integers(0, 60),
    d_operations=st.integers(1, 80),
    joins=st.integers(0, 2),
    leaves=st.integers(0, 2),
    crashes=st.integers(0, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_deletes_keep_every_name_in_order_and_leave_nothing_behind(
    processes: int,
    structure: Structure,
    operations: int,
    d_operations: int,
    joins: int,
    leaves: int,
    crashes: int,
    seed: int,
) -> None:
    config = AsyncConfig(
        processes, structure, operations, 0.6, seed, joins=joins, leaves=leaves, crashes=crashes
    )
    run_and_check(config, d_operations)
