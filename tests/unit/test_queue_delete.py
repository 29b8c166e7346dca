"""Deleting a queue in the core (issue 12 item 1): a delete is an operation of its queue,
ordered by the anchor after the cycle's runs of that queue; it removes every element the
queue holds, clears their entries from the DHT (one Drop each), and frees the name, which
a later operation makes again, of either structure, above every position and rank the old
queue used.

Each case drives a small cluster in synchronous rounds (the named-queue tests' driver) and
replays every queue's results in the anchor's order against a deque or a list that a
delete empties: the oracle of ARCHITECTURE.md.  A failing case prints its seed.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import pytest

from skueue.core.anchor import QueueAnchors
from skueue.core.dht_runs import opened
from skueue.core.effects import Complete, Effect, Send
from skueue.core.messages.stages import AnswerRun, DhtBundle, DhtRun, Grants
from skueue.core.ops import DEFAULT_QUEUE, Op, OpKind, QueueSettings, Structure
from skueue.sim.cluster import build_cluster, process_ids
from tests.unit.test_named_queues import Rounds


class DeleteRounds(Rounds):
    sent: list[Any] | None = None  # every message, when a test wants them

    def _take(self, pid: str, effects: list[Effect]) -> None:
        if self.sent is not None:
            self.sent.extend(e.message for e in effects if isinstance(e, Send))
        super()._take(pid, effects)

    def settled(self) -> bool:
        """Done, and every delete's Drops acknowledged."""
        return super().settled() and all(
            not n.store.dropping and not n.store.deferred_drops
            for p in self.processes.values()
            for n in p.nodes.values()
        )


def replay(pairs: list[tuple[Op, Complete]], seed: object) -> list[object]:
    """One name's results in ``ord`` order against a deque and a list: a delete removes
    what they hold and frees the name (its next structure may be the other one).
    Returns what is left in it."""
    fifo: deque[object] = deque()
    lifo: list[object] = []
    ranks = [c.ord for _, c in pairs]
    assert ranks == sorted(set(ranks)), f"seed {seed}: ranks repeat or go back: {ranks}"
    for op, c in pairs:
        if op.kind is OpKind.DELETE:
            assert c.removed == len(fifo) + len(lifo), (seed, op.describe(), c.removed)
            fifo.clear()
            lifo.clear()
        elif op.kind is OpKind.ENQUEUE:
            fifo.append(op.value)
        elif op.kind is OpKind.PUSH:
            lifo.append(op.value)
        elif op.kind is OpKind.DEQUEUE:
            assert c.value == (fifo.popleft() if fifo else None), (seed, op.describe())
        else:
            assert c.value == (lifo.pop() if lifo else None), (seed, op.describe())
    return [*fifo, *lifo]


def anchor_of(sim: Rounds) -> QueueAnchors:
    seats = [n.seat.policy for p in sim.processes.values() for n in p.nodes.values()]
    (anchor,) = [s for s in seats if s is not None]
    return anchor


def stored(sim: Rounds) -> list[tuple[str, int, int, object]]:
    return sorted(
        (e for p in sim.processes.values() for n in p.nodes.values() for e in n.store.items()),
        key=repr,
    )


def test_a_delete_removes_what_the_queue_holds_and_its_entries() -> None:
    pids = process_ids(3)
    sim = DeleteRounds(build_cluster(pids, Structure.QUEUE))
    for i in range(20):
        sim.submit(pids[i % 3], OpKind.ENQUEUE, f"j{i}", "jobs")
    sim.submit(pids[0], OpKind.ENQUEUE, "kept", "other")
    sim.run()
    sim.submit(pids[1], OpKind.DEQUEUE, None, "jobs")
    sim.run()
    sim.submit(pids[2], OpKind.DELETE, None, "jobs")
    sim.run()
    (deleted,) = [c for k, c in sim.done.items() if sim.ops[k].kind is OpKind.DELETE]
    assert deleted.removed == 19 and deleted.value is None and deleted.error is None
    assert [e[0] for e in stored(sim)] == ["other"], "the 19 entries are gone, not other's"
    assert "jobs" not in anchor_of(sim).queues, "the name is free"
    sim.submit(pids[0], OpKind.DEQUEUE, None, "jobs")
    sim.run()
    last = max(sim.done.items(), key=lambda kc: kc[0][1] if kc[0][0] == pids[0] else -1)
    assert last[1].value is None, "the queue made again is empty"


def test_a_deleted_name_comes_back_above_every_position_and_rank_of_the_old_one() -> None:
    pids = process_ids(2)
    sim = DeleteRounds(build_cluster(pids, Structure.QUEUE))
    for i in range(5):
        sim.submit(pids[0], OpKind.ENQUEUE, f"q{i}", "undo")
    sim.run()
    sim.submit(pids[1], OpKind.DELETE, None, "undo")
    sim.run()
    floor = anchor_of(sim).floor
    assert floor >= 5, floor
    for i in range(3):  # the name comes back as a stack
        sim.submit(pids[1], OpKind.PUSH, f"s{i}", "undo")
    sim.submit(pids[1], OpKind.POP, None, "undo")
    sim.run()
    pushed = [c for k, c in sim.done.items() if sim.ops[k].kind is OpKind.PUSH]
    positions = [c.position for c in pushed if c.position is not None]  # s2 met the Pop
    assert len(positions) == 2 and min(positions) > floor, pushed
    assert all(c.ord >= floor for c in pushed)
    popped = [c.value for k, c in sim.done.items() if sim.ops[k].kind is OpKind.POP]
    assert popped == ["s2"]
    sim.submit(pids[0], OpKind.DELETE, None, "undo")
    sim.run()
    assert not stored(sim), "the stack's two elements are gone too"
    assert anchor_of(sim).floor >= floor + 3


def test_operations_issued_after_a_delete_in_one_buffer_come_after_it() -> None:
    """Program order: ``enqueue a; delete; enqueue b`` from one process in one cycle
    leaves ``b``, although the anchor applies a cycle's deletes after its runs."""
    pids = process_ids(2)
    sim = DeleteRounds(build_cluster(pids, Structure.QUEUE))
    for kind, value in ((OpKind.ENQUEUE, "a"), (OpKind.DELETE, None), (OpKind.ENQUEUE, "b"),
                        (OpKind.DELETE, None), (OpKind.ENQUEUE, "c")):  # fmt: skip
        sim.submit(pids[0], kind, value, "q")
    sim.run()
    sim.submit(pids[1], OpKind.DEQUEUE, None, "q")
    sim.submit(pids[1], OpKind.DEQUEUE, None, "q")
    sim.run()
    for pairs in sim.per_queue().values():
        replay(pairs, "program order")
    dequeues = sorted(k for k in sim.done if sim.ops[k].kind is OpKind.DEQUEUE)
    got = [sim.done[k].value for k in dequeues]
    assert got == ["c", None], got


def test_two_deletes_of_one_queue_in_one_cycle_remove_it_once() -> None:
    pids = process_ids(4)
    sim = DeleteRounds(build_cluster(pids, Structure.QUEUE))
    for i in range(8):
        sim.submit(pids[i % 4], OpKind.ENQUEUE, f"e{i}", "q")
    sim.run()
    for pid in pids:
        sim.submit(pid, OpKind.DELETE, None, "q")
    sim.run()
    removed = sorted(c.removed for k, c in sim.done.items() if sim.ops[k].kind is OpKind.DELETE)
    assert removed == [0, 0, 0, 8], removed
    assert not stored(sim)


def test_deleting_a_name_that_holds_no_queue_is_an_error_and_makes_nothing() -> None:
    """Issue 28 item 10: it used to answer "0 elements removed" like the delete of an
    empty queue, so a typo looked like success."""
    pids = process_ids(2)
    sim = DeleteRounds(build_cluster(pids, Structure.QUEUE))
    sim.submit(pids[0], OpKind.DELETE, None, "never")
    sim.submit(pids[1], OpKind.ENQUEUE, "x", "made")
    sim.run()
    sim.submit(pids[1], OpKind.DELETE, None, "made")
    sim.run()
    answers = {sim.ops[k].queue: c for k, c in sim.done.items() if sim.ops[k].kind is OpKind.DELETE}
    never, made = answers["never"], answers["made"]
    assert never.error == "no queue 'never' to delete: no queue or stack has that name"
    assert never.removed == 0 and never.ord >= 0  # ordered like any delete of the name
    assert made.error is None and made.removed == 1
    assert "never" not in anchor_of(sim).queues and "made" not in anchor_of(sim).queues


def test_the_default_queue_can_be_deleted_and_used_again() -> None:
    pids = process_ids(2)
    sim = DeleteRounds(build_cluster(pids, Structure.QUEUE))
    sim.submit(pids[0], OpKind.ENQUEUE, "x")
    sim.run()
    sim.submit(pids[0], OpKind.DELETE, None, DEFAULT_QUEUE)
    sim.submit(pids[1], OpKind.ENQUEUE, "y")
    sim.run()
    sim.submit(pids[1], OpKind.DEQUEUE)
    sim.run()
    for pairs in sim.per_queue().values():
        replay(pairs, "default")


@pytest.mark.parametrize("seed", range(8))
def test_random_deletes_among_queues_and_stacks_keep_every_name_in_order(seed: int) -> None:
    rng = random.Random(seed)
    pids = process_ids(4)
    sim = DeleteRounds(build_cluster(pids, Structure.QUEUE))
    names = ["jobs", "mail", "undo", DEFAULT_QUEUE]
    stack = {name: False for name in names}
    for step in range(500):
        name = rng.choice(names)
        if rng.random() < 0.04:
            sim.submit(rng.choice(pids), OpKind.DELETE, None, name)
            # The next incarnation may be the other structure; until the delete is
            # applied, operations of the old one may still be refused.
            stack[name] = rng.random() < 0.5
            continue
        insert = rng.random() < 0.6
        kinds = (OpKind.PUSH, OpKind.POP) if stack[name] else (OpKind.ENQUEUE, OpKind.DEQUEUE)
        kind = kinds[0] if insert else kinds[1]
        sim.submit(rng.choice(pids), kind, f"{name}-{step}" if insert else None, name)
        if rng.random() < 0.3:
            sim.run()
    sim.run()
    for pairs in sim.per_queue().values():
        replay(pairs, seed)
    held = sum(1 for _ in stored(sim))
    sizes = sum(size for size, *_ in anchor_of(sim).describe_queues().values())
    assert held == sizes, f"seed {seed}: {held} entries for queues of {sizes} elements"


def test_the_floor_travels_with_the_anchor() -> None:
    anchors = QueueAnchors.starting(Structure.QUEUE)
    from skueue.core.anchor import import_anchors
    from skueue.core.batch import Batch, Batches

    anchors.assign(Batches(((("s", True), Batch((0, 0, 4), (0, 0, 4))),)))
    anchors.delete((("s", 1),))
    anchors.assign(Batches(((("s", True), Batch((0, 0, 2), (0, 0, 2))),)))
    again = import_anchors(*anchors.export())
    assert again.floor == anchors.floor >= 4
    assert again.describe() == anchors.describe()


def queue_change_messages() -> list[Any]:
    """Messages that creates and deletes of a queue and of a stack make (Drops,
    DropAcks, batches and Grants that create, delete and carry delivery limits), for
    the wire tests; bundles are opened too."""
    pids = process_ids(3)
    sim = DeleteRounds(build_cluster(pids, Structure.QUEUE))
    sim.sent = []
    for pid, (queue, stack) in zip(
        pids, (("lim", False), ("s2", True), ("lim", False)), strict=True
    ):
        op = sim.processes[pid].new_op(
            OpKind.CREATE, None, queue, settings=QueueSettings(stack, 2 if queue == "lim" else 0)
        )
        sim.ops[(pid, op.op_id)] = op
        sim._take(pid, sim.processes[pid].submit(op))
    sim.submit(pids[0], OpKind.ENQUEUE, "x", "lim")
    made = sim.processes[pids[1]].new_op(
        OpKind.CREATE, None, "pq", settings=QueueSettings(priorities=3)
    )
    sim.ops[(pids[1], made.op_id)] = made
    sim._take(pids[1], sim.processes[pids[1]].submit(made))
    sim.run()
    for i, pid in enumerate(pids * 2):  # priority levels: batches and grants carry them
        op = sim.processes[pid].new_op(OpKind.ENQUEUE, f"p{i}", "pq", priority=i % 4)
        sim.ops[(pid, op.op_id)] = op
        sim._take(pid, sim.processes[pid].submit(op))
        sim.submit(pid, OpKind.DEQUEUE, None, "pq")
    sim.run()
    leased = sim.processes[pids[2]].new_op(OpKind.DEQUEUE, None, "lim", lease_ms=100)
    sim.ops[(pids[2], leased.op_id)] = leased
    sim._take(pids[2], sim.processes[pids[2]].submit(leased))
    for i in range(6):
        sim.submit(pids[i % 3], OpKind.ENQUEUE, f"q{i}", "q")
        sim.submit(pids[i % 3], OpKind.PUSH, f"s{i}", "s")
    sim.run()
    sim.submit(pids[1], OpKind.DELETE, None, "q")
    sim.submit(pids[2], OpKind.DELETE, None, "s")
    sim.run()
    inner = [m for b in sim.sent if isinstance(b, DhtBundle) for m in b.messages]
    singles = [
        m for b in sim.sent if isinstance(b, DhtBundle | DhtRun | AnswerRun) for m in opened(b)
    ]
    return [*sim.sent, *inner, *singles]


def test_a_delete_travels_as_drops_and_acknowledgements() -> None:
    messages = queue_change_messages()
    kinds = {type(m).__name__ for m in messages}
    assert {"Drop", "DropAck"} <= kinds, kinds
    grants = [m for m in messages if isinstance(m, Grants)]
    assert any(g.created for g in grants) and any(g.limits for g in grants)
    assert any(g.deleted for g in grants)
    assert any(r.levels for g in grants for _, runs in g.grants for r in runs)


def test_a_process_that_leaves_right_after_a_delete_completes_what_it_deferred() -> None:
    """Found by the long property profile (seed 6391): an operation deferred behind a
    delete waited for a batch that never came once the leave was counted.  The leave is
    reported only in a batch that leaves nothing of the own buffer behind."""
    pids = process_ids(3)
    sim = DeleteRounds(build_cluster(pids, Structure.QUEUE))
    sim.submit(pids[1], OpKind.ENQUEUE, "x", "q")
    sim.submit(pids[1], OpKind.DELETE, None, "q")
    sim.submit(pids[1], OpKind.ENQUEUE, "y", "q")  # deferred to the next batch
    for pid in pids[1:]:  # two of three: the update phase starts with the leave's grants
        sim._take(pid, sim.processes[pid].leave())
    sim.run(rounds_max=2000, after=100)
    assert sim.processes[pids[1]].departed
    sim.submit(pids[0], OpKind.DEQUEUE, None, "q")
    sim.run()
    got = [c.value for k, c in sim.done.items() if sim.ops[k].kind is OpKind.DEQUEUE]
    assert got == ["y"], got
