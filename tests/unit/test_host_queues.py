"""The host's part of issue 28: what a daemon does with named queues for its clients.

- a consumer's fetch waits with one remove and counts no empty results (item 8);
- an operation without a structure takes its queue's (item 9);
- a configure, and a delete of a name that holds no queue (items 5, 10);
- a dead letter counts as inserted into NAME.dlq, a look removes nothing (item 11).

One-process hosts, driven tick by tick (tests/unit/test_host.py).
"""

from __future__ import annotations

from typing import Any

from skueue.core.ops import Structure
from skueue.host.results import Configured
from skueue.runtime.operations.stats import local_stats
from tests.unit.host_driver import HostDriver as Host
from tests.unit.test_blocking_remove import WAITING, replies
from tests.unit.test_host import one_process_host

LEASE_MS = 60_000


def results(host: Host, client: int = 1) -> list[Any]:
    """The frames ``client`` got while the host settled."""
    return [frame for c, frame in host.settle() if c == client]


def test_a_waiting_fetch_tries_with_one_remove_and_counts_no_empty_results() -> None:
    """A consumer's refill on an idle queue: 100 removes used to wait, each trying again
    every cycle, and all 100 came back empty (and were counted so) when the wait ended."""
    host = one_process_host()
    host.remove(client=1, rid=1, count=100, wait_until=WAITING, fetch=True)
    assert replies(host, ticks=5) == []
    assert host.clients.pending_ops == 1, "only the first remove waits"
    (number,) = host.clients.waits
    host.end_wait(number)
    ((_, frame),) = replies(host)
    assert frame == ("done", 1, ()), "a fetch answers with the elements alone"
    assert host.clients.counters.empty == 0
    assert host.clients.queue_stats.as_dict().get("default", {}).get("empty", 0) == 0


def test_a_fetch_gets_what_the_queue_has_and_waits_for_what_comes() -> None:
    host = one_process_host()
    host.insert(client=2, rid=1, values=[b"a", b"b", b"c"])
    host.settle()
    host.remove(client=1, rid=2, count=10, wait_until=WAITING, fetch=True)
    ((_, _, got),) = results(host)
    assert [r.value for r in got] == [b"a", b"b", b"c"]
    host.remove(client=1, rid=3, count=10, wait_until=WAITING, fetch=True)
    assert replies(host, ticks=5) == []
    host.insert(client=2, rid=4, values=[b"late"])
    frames = dict(replies(host))
    assert [r.value for r in frames[1][2]] == [b"late"], "delivered in the enqueue's cycles"
    assert host.clients.counters.empty == 0 and host.clients.counters.removed == 4


def test_without_a_structure_an_operation_takes_its_queues() -> None:
    """``skueue dequeue -q undo`` on a stack used to fail: "'undo' is a stack"."""
    host = one_process_host(Structure.QUEUE)
    host.insert(client=1, rid=1, values=[b"edit-1", b"edit-2"], queue="undo", stack=True)
    host.settle()
    host.remove(client=1, rid=2, count=1, queue="undo")  # known here: a stack
    ((_, _, got),) = results(host)
    assert got[0].value == b"edit-2"
    host.clients.hints.forget("undo")  # as on another member, that has not seen it yet
    host.insert(client=1, rid=3, values=[b"edit-3", b"edit-4"], queue="undo")
    assert results(host)[0][0] == "done"
    host.remove(client=1, rid=4, count=3, queue="undo")
    ((_, _, got),) = results(host)
    assert [r.value for r in got] == [b"edit-4", b"edit-3", b"edit-1"], "popped: top first"
    assert host.clients.counters.empty == 0
    stats = local_stats(host.host)["queues"]["undo"]
    assert stats["structure"] == "stack" and stats["size"] == 0


def test_a_guess_for_the_wrong_structure_is_tried_again_once_as_the_other() -> None:
    host = one_process_host(Structure.QUEUE)
    host.insert(client=1, rid=1, values=[b"x"], queue="undo", stack=True)
    host.settle()
    host.clients.hints.forget("undo")
    host.remove(client=1, rid=2, count=1, queue="undo", wait_until=WAITING)
    ((_, _, got),) = results(host)
    assert got[0].value == b"x", "a blocking remove switches too"
    assert host.clients.hints.get("undo") is True, "learned from the refusal"
    # A client that names the structure is held to it.
    host.remove(client=1, rid=3, count=1, queue="undo", stack=False)
    ((kind, _, message, code),) = results(host)
    assert (kind, code) == ("error", "refused") and "'undo' is a stack" in message


def test_a_push_to_a_new_name_makes_a_stack_and_an_enqueue_a_queue() -> None:
    host = one_process_host(Structure.QUEUE)
    host.insert(client=1, rid=1, values=[b"a"], queue="pushed", prefer_stack=True)
    host.insert(client=1, rid=2, values=[b"a"], queue="enqueued")
    host.settle()
    host.remove(client=1, rid=3, count=1, queue="enqueued", prefer_stack=True)  # a pop
    assert results(host)[0][2][0].value == b"a", "a pop on a queue dequeues"
    queues = local_stats(host.host)["queues"]
    assert (queues["pushed"]["structure"], queues["enqueued"]["structure"]) == ("stack", "queue")


def test_a_configure_changes_the_limit_and_a_missing_name_is_an_error() -> None:
    host = one_process_host()
    host.insert(client=1, rid=1, values=[b"build-42"], queue="jobs")
    host.settle()
    host.configure(client=1, rid=2, queue="jobs", max_deliveries=5)
    assert results(host) == [("done", 2, (Configured("queue", 5, 1),))]
    assert local_stats(host.host)["queues"]["jobs"]["max_deliveries"] == 5
    host.configure(client=1, rid=3, queue="nothing", max_deliveries=5)
    ((kind, _, message, code),) = results(host)
    assert (kind, code) == ("error", "refused") and "no queue 'nothing'" in message


def test_deleting_a_name_without_a_queue_is_an_error_and_counts_nothing() -> None:
    """It used to answer "0 elements removed" and leave a "(deleted)" entry in stats."""
    host = one_process_host()
    host.delete(client=1, rid=1, queue="never-made")
    ((kind, _, message, code),) = results(host)
    assert (kind, code) == ("error", "refused") and "no queue 'never-made'" in message
    assert "never-made" not in host.clients.queue_stats.as_dict()
    assert "never-made" not in (local_stats(host.host)["queues"] or {})


def test_dead_letters_count_as_inserted_and_a_look_removes_nothing() -> None:
    """The issue's run: one element dead-lettered, listed twice (a look), moved once:
    ``stats work.dlq`` said ``inserted 0, removed 3, leased 3``."""
    host = one_process_host()
    host.clock(0)
    host.create(client=1, rid=1, queue="work", stack=False, max_deliveries=1)
    host.insert(client=1, rid=2, values=[b"poison"], queue="work")
    host.settle()
    host.remove(client=1, rid=3, count=1, queue="work", lease_ms=LEASE_MS)
    ((_, _, (leased,)),) = results(host)
    lease = leased.lease.lease_id
    host.lease(1, 90, "nack", [lease])  # past the limit: to work.dlq
    host.settle()
    for rid in (4, 5):  # skueue dlq work: a look
        host.remove(client=1, rid=rid, count=100, queue="work.dlq", lease_ms=LEASE_MS,
                    fetch=True, look=True)  # fmt: skip
        ((_, _, got),) = results(host)
        assert [r.value for r in got] == [b"poison"]
        host.lease(1, 90, "keep", [got[0].lease.lease_id])
        host.settle()
    host.remove(client=1, rid=6, count=100, queue="work.dlq", lease_ms=LEASE_MS, fetch=True)
    ((_, _, got),) = results(host)  # skueue dlq work --move
    host.lease(1, 90, "ack", [got[0].lease.lease_id])
    dlq = host.clients.queue_stats.as_dict()["work.dlq"]
    counts = {k: dlq[k] for k in ("inserted", "removed", "leased", "acked", "empty")}
    assert counts == {"inserted": 1, "removed": 1, "leased": 1, "acked": 1, "empty": 0}
    work = host.clients.queue_stats.as_dict()["work"]
    assert (work["leased"], work["nacked"], work["dead_lettered"]) == (1, 1, 1)


def test_a_look_that_is_acked_after_all_counts_as_a_delivery() -> None:
    host = one_process_host()
    host.clock(0)
    host.insert(client=1, rid=1, values=[b"x"], queue="q")
    host.settle()
    host.remove(client=1, rid=2, count=1, queue="q", lease_ms=LEASE_MS, look=True)
    ((_, _, got),) = results(host)
    assert host.clients.queue_stats.as_dict()["q"]["removed"] == 0
    host.lease(1, 90, "ack", [got[0].lease.lease_id])
    q = host.clients.queue_stats.as_dict()["q"]
    assert (q["removed"], q["leased"], q["acked"]) == (1, 1, 1)
    assert host.clients.looks == set()
