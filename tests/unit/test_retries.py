"""Requests sent again (host/retries.py, through host/host.py): a retry gets the
first attempt's outcome and never a second effect."""

from __future__ import annotations

from skueue.host.results import Inserted, Removed
from skueue.host.retries import RetryWindow
from tests.unit.host_driver import HostDriver as Host
from tests.unit.host_driver import fields
from tests.unit.test_host import one_process_host


def elements_held(host: Host) -> int:
    return host.process.entries()


def test_a_finished_enqueue_sent_again_is_answered_from_memory_not_enqueued_twice() -> None:
    host = one_process_host()
    host.insert(1, 7, [b"a"], key=("s", 7))
    [(_, first)] = host.settle()
    host.client_gone(1)
    host.insert(2, 7, [b"a"], key=("s", 7))  # the same request on a new connection
    [(client, again)] = host.settle()
    assert client == 2 and again == first
    assert elements_held(host) == 1
    assert host.clients.counters.inserted == 1 and host.clients.counters.retried == 1


def test_the_host_knows_the_requests_it_runs_and_remembers() -> None:
    """What lets a daemon under its disk reserve still answer a retry of an enqueue it
    took (runtime/owner.py): refusing it would tell the client nothing was done."""
    host = one_process_host()
    host.insert(1, 7, [b"a"], key=("s", 7))
    assert host.clients.knows(("s", 7))  # running
    host.settle()
    assert host.clients.knows(("s", 7))  # finished, in the retry window
    assert not host.clients.knows(("s", 8)) and not host.clients.knows(("t", 7))


def test_a_dequeue_whose_reply_was_lost_gives_its_element_to_the_retry() -> None:
    host = one_process_host()
    host.insert(1, 1, [b"x"], key=("s", 1))
    host.settle()
    host.remove(1, 2, 1, key=("s", 2))
    host.client_gone(1)  # gone before the reply: the element would be lost
    assert host.settle() == []
    assert host.clients.counters.dropped_results == 0
    host.remove(3, 2, 1, key=("s", 2))
    [(client, (kind, rid, results))] = host.settle()
    assert (client, kind, rid) == (3, "done", 2) and results[0].value == b"x"
    assert host.clients.counters.removed == 1


def test_a_retry_of_a_running_request_takes_it_over() -> None:
    host = one_process_host()
    host.insert(1, 6, [b"y"], key=("s", 6))
    host.remove(1, 8, 1, key=("s", 8))
    host.client_gone(1)
    host.remove(2, 8, 1, key=("s", 8))  # before a tick ran it: still running
    assert host.clients.counters.retried == 1
    frames = host.settle()
    assert [(c, f[0], f[1]) for c, f in frames] == [(2, "done", 8)]
    assert frames[0][1][2][0].value == b"y"


def test_requests_of_other_sessions_or_without_one_are_never_confused() -> None:
    host = one_process_host()
    host.insert(1, 1, [b"a"], key=("s", 1))
    host.insert(1, 1, [b"b"], key=("t", 1))
    host.insert(1, 1, [b"c"])  # no session: never de-duplicated
    host.insert(1, 1, [b"c"])
    host.settle()
    assert host.clients.counters.inserted == 4 and host.clients.counters.retried == 0


def test_the_window_forgets_the_oldest_and_counts_undelivered_elements_lost() -> None:
    window = RetryWindow(requests_max=2, bytes_max=1 << 20)
    assert window.finish(("s", 1), (Removed(b"e", 1, 1),), delivered=False, removed=1) == 0
    assert window.finish(("s", 2), (Inserted(1, 2),), delivered=True, removed=0) == 0
    assert window.finish(("s", 3), (Inserted(1, 3),), delivered=True, removed=0) == 1  # s/1 gone
    assert window.get(("s", 1)) is None and window.get(("s", 3)) is not None
    small = RetryWindow(requests_max=100, bytes_max=500)
    small.finish(("s", 1), (Removed(b"x" * 100, 1, 1),), delivered=True, removed=1)
    small.finish(("s", 2), (Removed(b"x" * 100, 2, 2),), delivered=True, removed=1)
    assert list(small.finished) == [("s", 2)] and small.bytes <= 500


def test_a_request_that_timed_out_gets_its_real_outcome_when_sent_again() -> None:
    host = one_process_host()
    host.insert(1, 3, [b"z"], deadline=1.0, key=("s", 3))
    host.due(2.0, "slow")
    [(_, (kind, rid, _message, *_))] = [(c, fields(r)) for c, r in host.take_frames()[1]]
    assert (kind, rid) == ("error", 3)
    host.insert(1, 3, [b"z"], key=("s", 3))
    [(client, (kind, rid, results))] = host.settle()
    assert (client, kind, rid) == (1, "done", 3) and len(results) == 1
    assert host.clients.counters.inserted == 1


def test_the_window_counts_what_its_results_really_take_in_memory() -> None:
    """Its byte limit must bound its memory: results are counted at their real size (an
    undercount once let a window of enqueue results take three times its limit)."""
    import tracemalloc

    window = RetryWindow(requests_max=10**9, bytes_max=10**12)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for rid in range(200):
            inserts = tuple(Inserted(10**9 + rid * 100 + i, 10**12 + i) for i in range(100))
            removes = tuple(Removed(bytes(100), 10**9 + i, 10**12 + i) for i in range(100))
            window.finish(("s", 2 * rid), inserts, True, 0)
            window.finish(("s", 2 * rid + 1), removes, True, 100)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0.8 * used <= window.bytes <= 1.3 * used, (window.bytes, used)
