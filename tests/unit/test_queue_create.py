"""Making a queue explicitly, with its settings (issue 12 items 1 and 3): a create makes
the queue (a queue or a stack, with a delivery limit) before the cycle's runs, or finds
it made; a create with other settings than the queue has is an error; the queue's
delivery limit reaches every leased remove of it, wherever it was served, and survives
an anchor hand-over; a delete frees the name and its settings.

Synchronous rounds (the named-queue tests' driver), leases driven by hand.
"""

from __future__ import annotations

from skueue.core.anchor import QueueAnchors, import_anchors
from skueue.core.batch import Batches
from skueue.core.effects import Complete
from skueue.core.ops import (
    CREATE_FOUND,
    CREATE_FOUND_OTHER,
    CREATE_MADE,
    Op,
    OpKind,
    QueueSettings,
    Structure,
    dead_letter_queue,
    settings_problem,
)
from skueue.core.process import Process
from skueue.sim.cluster import build_cluster, process_ids
from tests.unit.test_queue_delete import DeleteRounds, anchor_of


class CreateRounds(DeleteRounds):
    def create(self, pid: str, queue: str, stack: bool = False, limit: int = 0) -> Op:
        process = self.processes[pid]
        op = process.new_op(OpKind.CREATE, None, queue, settings=QueueSettings(stack, limit))
        self.ops[(pid, op.op_id)] = op
        self._take(pid, process.submit(op))
        return op

    def leased(self, pid: str, queue: str, lease_ms: int = 1000, limit: int = 0) -> Op:
        process = self.processes[pid]
        op = process.new_op(OpKind.DEQUEUE, None, queue, lease_ms=lease_ms, max_deliveries=limit)
        self.ops[(pid, op.op_id)] = op
        self._take(pid, process.submit(op))
        return op

    def result(self, pid: str, op: Op) -> Complete:
        return self.done[(pid, op.op_id)]


def test_a_create_makes_a_queue_with_its_settings_or_finds_it() -> None:
    pids = process_ids(3)
    sim = CreateRounds(build_cluster(pids, Structure.QUEUE))
    made = sim.create(pids[0], "jobs", limit=3)
    undo = sim.create(pids[1], "undo", stack=True)
    sim.run()
    assert sim.result(pids[0], made).created is True
    assert sim.result(pids[1], undo).created is True
    again = sim.create(pids[2], "jobs", limit=3)
    other = sim.create(pids[2], "undo", stack=False)
    sim.run()
    assert sim.result(pids[2], again).created is False and sim.result(pids[2], again).error is None
    error = sim.result(pids[2], other).error
    assert error == "'undo' exists already, as a stack without a delivery limit", error
    assert anchor_of(sim).describe_queues()["jobs"] == (0, "queue", 3, 1)
    # A made stack is a stack for the operations that follow.
    sim.submit(pids[0], OpKind.ENQUEUE, "x", "undo")
    sim.run()
    assert any("'undo' is a stack" in (c.error or "") for c in sim.done.values())


def test_a_create_after_other_operations_on_its_queue_comes_after_them() -> None:
    """Program order: ``enqueue x; create(stack)`` from one process in one cycle makes a
    queue (the enqueue's) and then finds it, although creates go before the runs."""
    pids = process_ids(2)
    sim = CreateRounds(build_cluster(pids, Structure.QUEUE))
    sim.submit(pids[0], OpKind.ENQUEUE, "x", "q")
    late = sim.create(pids[0], "q", stack=True)
    sim.run()
    assert "exists already, as a queue" in (sim.result(pids[0], late).error or "")
    first = sim.create(pids[1], "r", limit=2)
    second = sim.create(pids[1], "r", limit=4)
    sim.run()
    assert sim.result(pids[1], first).created is True
    assert "delivery limit of 2" in (sim.result(pids[1], second).error or "")


def test_two_creates_of_one_queue_in_one_cycle_make_it_once() -> None:
    pids = process_ids(4)
    sim = CreateRounds(build_cluster(pids, Structure.QUEUE))
    ops = [(pid, sim.create(pid, "q", limit=5)) for pid in pids]
    sim.run()
    outcomes = sorted(sim.result(pid, op).created for pid, op in ops)
    assert outcomes == [False, False, False, True], outcomes


def return_lease(sim: CreateRounds, pid: str, lease_id: int) -> None:
    process: Process = sim.processes[pid]
    sim._take(pid, process.release(lease_id, "nack") or [])


def test_the_queues_delivery_limit_sends_a_returned_element_to_its_dead_letters() -> None:
    """The limit is the queue's: a consumer that asked for none gets it anyway, on any
    process; one that asked for a smaller one gets its own."""
    pids = process_ids(3)
    sim = CreateRounds(build_cluster(pids, Structure.QUEUE))
    sim.create(pids[0], "jobs", limit=2)
    sim.run()
    sim.submit(pids[1], OpKind.ENQUEUE, "poison", "jobs")
    sim.run()
    for delivery, pid in enumerate(pids[1:], 1):  # two deliveries, on two processes
        op = sim.leased(pid, "jobs")
        sim.run()
        lease = sim.processes[pid].leases.get(op.op_id)
        assert lease is not None and lease.max_deliveries == 2 and lease.deliveries == delivery
        return_lease(sim, pid, op.op_id)
        sim.run()
    dead = sim.leased(pids[0], "jobs")
    letter = sim.leased(pids[0], dead_letter_queue("jobs"))
    sim.run()
    assert sim.result(pids[0], dead).value is None, "the queue is empty"
    assert sim.result(pids[0], letter).value is not None, "the element is a dead letter"
    # A consumer's own smaller limit wins over the queue's.
    sim.submit(pids[1], OpKind.ENQUEUE, "other", "jobs")
    sim.run()
    op = sim.leased(pids[2], "jobs", limit=1)
    sim.run()
    lease = sim.processes[pids[2]].leases.get(op.op_id)
    assert lease is not None and lease.max_deliveries == 1


def test_a_delete_frees_the_name_and_its_settings() -> None:
    pids = process_ids(2)
    sim = CreateRounds(build_cluster(pids, Structure.QUEUE))
    sim.create(pids[0], "jobs", stack=True, limit=4)
    sim.run()
    sim.submit(pids[1], OpKind.DELETE, None, "jobs")
    sim.run()
    assert "jobs" not in anchor_of(sim).limits
    again = sim.create(pids[1], "jobs")
    sim.run()
    assert sim.result(pids[1], again).created is True
    assert anchor_of(sim).describe_queues()["jobs"] == (0, "queue", 0, 1)


def test_the_anchor_hands_the_limits_over() -> None:
    anchors = QueueAnchors.starting(Structure.QUEUE)
    outcome = anchors.create(((("a", False, 3, 1), 1), (("b", True, 0, 1), 2)))
    assert [o[1] for o in outcome] == [CREATE_MADE, CREATE_MADE]
    again = import_anchors(*anchors.export())
    assert again.limits == {"a": 3}
    assert again.create(((("a", False, 3, 1), 1), (("b", True, 5, 1), 1))) == (
        (("a", False, 3, 1), CREATE_FOUND, False, 3, 1),
        (("b", True, 5, 1), CREATE_FOUND_OTHER, True, 0, 1),
    )
    assert again.limits_of(Batches()) == ()


def test_settings_are_checked() -> None:
    assert settings_problem("jobs", QueueSettings(False, 1000)) is None
    assert settings_problem("jobs", QueueSettings(False, 1001))
    assert settings_problem("x" * 128, QueueSettings(False, 3)), "no room for .dlq"
    assert settings_problem("x" * 128, QueueSettings(True, 0)) is None
