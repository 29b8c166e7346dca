"""The metrics' counts on the hot path: histograms, request times, batch cycles
(runtime/operations/tallies.py; issue 15, item 1)."""

from __future__ import annotations

from skueue.runtime.operations.tallies import LATENCY_BUCKETS_S, Histogram, Tallies


def test_a_histogram_counts_per_bucket_and_reports_cumulative_counts() -> None:
    h = Histogram((0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 2.0, 3.0):
        h.observe(value)
    assert h.cumulative() == [("0.1", 2), ("1.0", 3), ("+Inf", 5)]  # le: 0.1 holds 0.1
    assert h.count == 5 and h.sum == 5.65


def test_a_request_is_timed_from_its_step_to_its_reply() -> None:
    t = Tallies()
    t.request(1, 7, "insert", now=10.0)
    t.request(1, 8, "remove", now=10.0)
    t.replied(1, 7, "ok", now=10.003)
    t.replied(1, 8, "timeout", now=20.0)
    t.replied(1, None, "error", now=20.0)  # a connection's last error: no request of it
    assert t.requests == {("insert", "ok"): 1, ("remove", "timeout"): 1}
    assert t.request_seconds["insert"].count == 1
    assert t.request_seconds["insert"].cumulative()[2] == ("0.0025", 0)
    assert t.request_seconds["insert"].cumulative()[3] == ("0.005", 1)
    assert t.request_seconds["remove"].cumulative()[-2] == (repr(LATENCY_BUCKETS_S[-1]), 1)


def test_a_gone_clients_requests_are_forgotten() -> None:
    t = Tallies()
    for rid in range(100):
        t.request(1, rid, "insert", now=0.0)
    t.request(2, 1, "insert", now=0.0)
    t.client_gone(1)
    t.replied(1, 5, "ok", now=1.0)  # too late: nothing is counted
    assert list(t.started) == [2] and not t.requests


def test_a_cycle_runs_from_a_busy_batch_to_the_next_batch_of_its_node() -> None:
    t = Tallies()
    t.batch("left", 0, now=0.0)  # empty batches are not observed
    t.batch("left", 5, now=1.0)
    t.batch("left", 3, now=1.25)  # a cycle of 0.25 s
    t.batch("left", 0, now=1.5)  # and one of 0.25 s, ended by an empty batch
    t.batch("left", 0, now=5.0)  # idle: no cycle
    t.batch("left", 4, now=9.0)
    t.batch("middle", 2, now=9.5)
    assert t.batch_operations["left"].count == 3 and t.batch_operations["left"].sum == 12
    assert t.batch_cycle_seconds["left"].count == 2
    assert t.batch_cycle_seconds["left"].sum == 0.5
    assert t.batch_cycle_seconds["middle"].count == 0
