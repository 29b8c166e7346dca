"""Blocking dequeue (issue 12, item 4): a remove with a wait tries again in the daemon's
own cycles until an element comes or its wait ends, and its attempts are patient: they
never make the tree hurry, so an idle cluster with waiting consumers stays idle.
"""

from __future__ import annotations

from typing import Any

from skueue.core.batch import Batch, Batches
from skueue.core.batch_checks import batches_problem
from skueue.core.ops import OpKind, Structure
from skueue.core.process import TickDue
from skueue.sim.cluster import build_cluster, process_ids
from tests.unit.host_driver import HostDriver as Host
from tests.unit.host_driver import fields
from tests.unit.test_host import one_process_host

WAITING = 100.0  # a wait's end far after anything these tests do


def replies(host: Host, ticks: int = 20) -> list[tuple[int, tuple[Any, ...]]]:
    """The replies of ``ticks`` ticks, as tests/unit/host_driver.py's ``fields``."""
    out: list[tuple[int, tuple[Any, ...]]] = []
    for _ in range(ticks):
        host.tick()
        out += [(client, fields(reply)) for client, reply in host.take_frames()[1]]
    return out


def test_patient_operations_do_not_make_a_process_hurry() -> None:
    for size in (1, 3):
        processes = build_cluster(process_ids(size), Structure.QUEUE)
        p = next(iter(processes.values()))
        p.submit(p.new_op(OpKind.DEQUEUE, patient=True))
        assert all(q.tick_due() is not TickDue.NOW for q in processes.values()), size
        p.submit(p.new_op(OpKind.DEQUEUE))
        assert p.tick_due() is TickDue.NOW


def test_the_patient_count_travels_with_the_batches_and_is_checked() -> None:
    a = Batches(((("q", False), Batch.of(0, 2)),), patient=2)
    b = Batches(((("q", False), Batch.of(1)),))
    assert not a.urgent and b.urgent and a.combine(b).patient == 2 and a.combine(b).urgent
    bad = Batches(((("q", False), Batch.of(0, 1)),), patient=2)
    assert batches_problem(bad) == "more patient operations than operations"


def test_a_waiting_remove_gets_the_next_element_and_nothing_else_answers_it() -> None:
    host = one_process_host()
    host.remove(client=1, rid=1, count=1, wait_until=WAITING)
    assert replies(host) == []  # the queue is empty: it waits, trying again
    assert host.clients.pending_ops == 1
    host.insert(client=2, rid=7, values=[b"job"])
    got = dict(replies(host))
    inserted_ord = got[2][2][0].ord
    removed = got[1][2][0]
    value, ord_, position = removed.value, removed.ord, removed.position
    assert got[1][:2] == ("done", 1) and value == b"job" and ord_ > inserted_ord
    assert position is not None and host.clients.pending_ops == 0
    stats = host.clients.queue_stats.as_dict()["default"]
    assert (stats["removed"], stats["empty"]) == (1, 0)  # the empty attempts are not results


def test_a_wait_that_ends_answers_empty() -> None:
    host = one_process_host()
    host.remove(client=1, rid=1, count=1, wait_until=5.0)
    assert replies(host) == []
    assert host.clients.seconds_to_deadline(4.0) == 1.0  # the owner wakes up for it
    assert host.clients.waits_ended(now=4.9) == []
    ended = host.clients.waits_ended(now=5.0)
    assert len(ended) == 1
    host.end_wait(ended[0])
    frames = replies(host)
    assert len(frames) == 1
    client, (kind, rid, results) = frames[0]
    assert (client, kind, rid) == (1, "done", 1)
    assert results[0].value is None and results[0].ord >= 0  # empty, with its rank


def test_a_blocking_batch_answers_once_one_element_came() -> None:
    host = one_process_host()
    host.remove(client=1, rid=2, count=3, wait_until=WAITING)
    assert replies(host) == []
    host.insert(client=2, rid=3, values=[b"only"])
    frames = [f for c, f in replies(host) if c == 1]
    assert len(frames) == 1 and frames[0][1] == 2
    values = [r.value for r in frames[0][2]]
    assert values.count(b"only") == 1 and values.count(None) == 2


def test_the_wait_of_a_client_that_went_away_ends_and_takes_nothing_later() -> None:
    """What the owner does when a blocked consumer's connection closes: end its waits
    (logged), so that its attempt answers empty and the next element stays queued."""
    host = one_process_host()
    host.remove(client=1, rid=1, count=1, wait_until=WAITING)
    host.remove(client=2, rid=1, count=1, wait_until=WAITING)
    assert replies(host) == []
    gone = host.clients.waits_of(1)
    assert len(gone) == 1 and host.clients.waits_of(3) == []
    for number in gone:
        host.end_wait(number)
    host.client_gone(1)
    assert replies(host) == []  # answered empty, to nobody
    host.insert(client=3, rid=5, values=[b"kept"])
    frames = dict(replies(host))
    assert frames[2][2][0].value == b"kept"  # the consumer that stayed got it
    assert host.clients.counters.dropped_results == 0


def test_a_served_blocking_remove_leaves_no_wait_behind() -> None:
    """Consumers that wait an hour and are served at once must not pile up in the host
    for that hour: a finished request's wait is forgotten, and the heap of wait ends is
    rebuilt once stale entries outnumber the live ones."""
    host = one_process_host()
    for rid in range(300):
        host.insert(client=2, rid=rid, values=[b"x"])
        host.remove(client=1, rid=rid, count=1, wait_until=3600.0)
        replies(host, ticks=4)
    assert host.clients.waits == {} and host.clients.pending_ops == 0
    assert len(host.clients.wait_ends) <= 64 + 1
    assert host.clients.waits_ended(now=3600.0) == []  # nothing left to log at the hour
