"""Changing a queue's delivery limit while it lives (issue 28 item 5): a configure travels
like a create (a create key with no levels), the anchor applies it before the cycle's runs,
so every leased remove ordered after it, on any process, gets the new limit; one of a name
that holds no queue is an error and makes nothing; two configures of one queue in one
cycle are applied in one order, the same for everyone.

Synchronous rounds (the named-queue tests' driver), leases driven by hand.
"""

from __future__ import annotations

from skueue.core.anchor import QueueAnchors
from skueue.core.batch import Batches
from skueue.core.batch_checks import batches_problem
from skueue.core.ops import (
    CONFIGURE_LEVELS,
    CREATE_FOUND,
    CREATE_NO_QUEUE,
    Op,
    OpKind,
    QueueSettings,
    Structure,
    dead_letter_queue,
)
from skueue.sim.cluster import build_cluster, process_ids
from tests.unit.test_queue_create import CreateRounds, return_lease
from tests.unit.test_queue_delete import anchor_of


class ConfigureRounds(CreateRounds):
    def configure(self, pid: str, queue: str, limit: int) -> Op:
        process = self.processes[pid]
        settings = QueueSettings(max_deliveries=limit)
        op = process.new_op(OpKind.CONFIGURE, None, queue, settings=settings)
        self.ops[(pid, op.op_id)] = op
        self._take(pid, process.submit(op))
        return op


def test_a_configure_sets_the_limit_of_a_queue_made_by_its_first_operation() -> None:
    """The README's case: ``enqueue`` made "jobs" without a limit; a create with one then
    fails (its settings are not the queue's), a configure changes the limit, and an
    element returned past it goes to the dead letters."""
    pids = process_ids(3)
    sim = ConfigureRounds(build_cluster(pids, Structure.QUEUE))
    sim.submit(pids[0], OpKind.ENQUEUE, "build-42", "jobs")
    sim.run()
    create = sim.create(pids[1], "jobs", limit=1)
    sim.run()
    assert "without a delivery limit" in (sim.result(pids[1], create).error or "")
    changed = sim.configure(pids[1], "jobs", 1)
    sim.run()
    done = sim.result(pids[1], changed)
    assert done.error is None and done.created is False
    assert done.settings == QueueSettings(False, 1, 1)
    assert anchor_of(sim).describe_queues()["jobs"] == (1, "queue", 1, 1)
    op = sim.leased(pids[2], "jobs")
    sim.run()
    lease = sim.processes[pids[2]].leases.get(op.op_id)
    assert lease is not None and lease.max_deliveries == 1
    return_lease(sim, pids[2], op.op_id)
    sim.run()
    letter = sim.leased(pids[0], dead_letter_queue("jobs"))
    sim.run()
    assert sim.result(pids[0], letter).value is not None, "returned past the new limit"


def test_a_configure_of_a_stack_keeps_it_a_stack_and_zero_removes_the_limit() -> None:
    pids = process_ids(2)
    sim = ConfigureRounds(build_cluster(pids, Structure.QUEUE))
    sim.create(pids[0], "undo", stack=True, limit=3)
    sim.run()
    off = sim.configure(pids[1], "undo", 0)
    sim.run()
    assert sim.result(pids[1], off).settings == QueueSettings(True, 0, 1)
    assert anchor_of(sim).describe_queues()["undo"] == (0, "stack", 0, 1)
    assert "undo" not in anchor_of(sim).limits


def test_a_configure_of_a_name_without_a_queue_is_an_error_and_makes_nothing() -> None:
    pids = process_ids(2)
    sim = ConfigureRounds(build_cluster(pids, Structure.QUEUE))
    op = sim.configure(pids[0], "nothing", 5)
    sim.run()
    error = sim.result(pids[0], op).error
    assert error == "no queue 'nothing' to configure: no queue or stack has that name", error
    assert "nothing" not in anchor_of(sim).queues and "nothing" not in anchor_of(sim).limits


def test_a_configure_after_an_operation_on_its_queue_comes_after_it() -> None:
    """Program order: ``enqueue x; configure`` from one process in one cycle configures
    the queue the enqueue made, though configures go before the runs."""
    pids = process_ids(1)
    sim = ConfigureRounds(build_cluster(pids, Structure.QUEUE))
    sim.submit(pids[0], OpKind.ENQUEUE, "x", "fresh")
    op = sim.configure(pids[0], "fresh", 2)
    sim.run()
    assert sim.result(pids[0], op).error is None
    assert anchor_of(sim).limits == {"fresh": 2}


def test_configures_of_one_queue_in_one_cycle_are_applied_in_key_order() -> None:
    anchors = QueueAnchors.starting(Structure.QUEUE)
    key = ("default", False, 0, CONFIGURE_LEVELS)
    several = (((*key[:2], 2, key[3]), 1), ((*key[:2], 7, key[3]), 2))
    outcome = anchors.create(several)  # type: ignore[arg-type]
    assert [o[1] for o in outcome] == [CREATE_FOUND, CREATE_FOUND]
    assert anchors.limits == {"default": 7}, "the last in key order is the limit"
    none = anchors.create(((("gone", False, 2, CONFIGURE_LEVELS), 1),))
    assert none == ((("gone", False, 2, CONFIGURE_LEVELS), CREATE_NO_QUEUE, False, 0, 1),)


def test_a_peers_configure_key_is_checked() -> None:
    good = Batches(creates=((("jobs", False, 5, CONFIGURE_LEVELS), 1),))
    assert batches_problem(good) is None
    stack = Batches(creates=((("jobs", True, 5, CONFIGURE_LEVELS), 1),))
    assert "names no structure" in (batches_problem(stack) or "")
    too_long = Batches(creates=((("j" * 126, False, 5, CONFIGURE_LEVELS), 1),))
    assert "dead letters" in (batches_problem(too_long) or "")
