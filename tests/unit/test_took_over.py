"""The host's ``TookOver`` input (docs/replication.md §2, §5.3, I8): the first input of a
new leader's term ends what the last leader's clients left (also after a restart's
replay, where the daemon's one-voter group takes over again), and steps the lease clock
to the new leader's first reading.

Each test drives a one-process host through what the old leader stepped, then the
``TookOver`` a new leader's replica steps with the same log, and reads the host.
"""

from __future__ import annotations

import math

import msgpack

from skueue.host.inputs import TookOver
from skueue.host.results import Inserted, LeaseAnswer, Removed
from skueue.runtime.durability.records import input_of, record_of
from skueue.sim.host_members import compared
from tests.unit.host_driver import HostDriver, fields, one_process_host

LEASE_MS = 1000


def leader() -> HostDriver:
    return HostDriver(one_process_host())


def test_leases_held_before_go_back_and_their_elements_are_delivered_again() -> None:
    host = leader()
    host.insert(client=1, rid=1, values=[b"x"])
    host.settle()
    host.clock(100)
    host.remove(client=2, rid=1, count=1, lease_ms=LEASE_MS)
    ((_, granted),) = host.settle()
    removed = granted[2][0]
    assert isinstance(removed, Removed) and removed.value == b"x" and removed.lease is not None
    assert host.process.leases.table.leases  # held by connection 2 of the last term

    host.step(TookOver(term=2, lease_clock_ms=150))
    assert not host.process.leases.table.leases
    host.settle()  # the element travels back into the queue
    # The old lease is gone: its holder's ack finds nothing (and it is a client of the
    # last term anyway); the element is out again for a new client.
    host.lease(client=2, rid=2, how="ack", leases=[removed.lease.lease_id])
    host.remove(client=3, rid=1, count=1)
    replies = host.settle()
    assert replies[0] == (2, ("done", 2, (LeaseAnswer(False),)))
    again = replies[1][1][2][0]
    assert isinstance(again, Removed) and again.value == b"x"


def test_a_request_running_finishes_into_the_retry_window_and_a_retry_gets_its_outcome() -> None:
    host = leader()
    key = ("s1", 7)
    host.insert(client=1, rid=7, values=[b"v"], key=key)  # stepped, not finished yet
    assert host.clients.pending_ops
    host.step(TookOver(term=3, lease_clock_ms=0))
    assert host.settle() == []  # its connection belonged to the last leader: nobody reads it
    assert host.clients.counters.dropped_results == 0  # an insert's result drops nothing
    finished = host.clients.retry_window.get(key)
    assert finished is not None
    # The client reconnects to the new leader and sends the same request again: it gets
    # the first attempt's outcome, and the value is in the queue once.
    host.insert(client=2, rid=7, values=[b"v"], key=key)
    ((client, reply),) = host.settle()
    first = finished.results()[0]
    assert client == 2 and isinstance(first, Inserted)
    assert reply == ("done", 7, (first,))
    assert host.process.stats().held_elements == 1


def test_waits_end_and_deadlines_of_the_last_term_are_forgotten() -> None:
    host = leader()
    host.remove(client=1, rid=1, count=1, deadline=5.0, wait_until=2.0)
    for _ in range(5):
        host.tick()  # it found the queue empty: it waits
    assert host.clients.waits and host.clients.deadlines
    host.step(TookOver(term=2, lease_clock_ms=0))
    assert not host.clients.waits
    assert host.settle() == []  # its empty answer went to a connection of the last term
    assert host.clients.deadlines == [] and host.clients.wait_ends == []
    assert host.host.seconds_to_due(now=100.0) == math.inf
    assert host.due(now=100.0) == []  # no time out of the old clock comes back


def test_the_lease_clock_goes_to_the_new_leaders_reading_and_never_back() -> None:
    host = leader()
    host.clock(5_000)
    host.step(TookOver(term=2, lease_clock_ms=9_000))
    assert host.process.leases.now_ms == 9_000
    # A lease granted now runs on the new clock: it ends LEASE_MS after 9 000.
    host.insert(client=1, rid=1, values=[b"x"])
    host.settle()
    host.remove(client=1, rid=2, count=1, lease_ms=LEASE_MS)
    host.settle()
    (lease,) = host.process.leases.table.leases.values()
    host.clock(9_000 + LEASE_MS - 1)
    assert host.process.leases.table.leases
    host.clock(9_000 + LEASE_MS)
    assert not host.process.leases.table.leases
    # A reading below the log's last one does not move the clock back.
    host.step(TookOver(term=3, lease_clock_ms=10))
    assert host.process.leases.now_ms == 9_000 + LEASE_MS
    assert lease.value == b"x"


def test_it_is_logged_and_reads_back_the_same() -> None:
    item = TookOver(term=4, lease_clock_ms=123_456)
    assert TookOver.logged and record_of(item) == ["took-over", 4, 123_456]
    assert input_of(msgpack.unpackb(msgpack.packb(record_of(item)), raw=False)) == item


def test_replicas_that_step_the_same_log_with_it_are_equal() -> None:
    """Every replica steps ``TookOver`` from the log: the result is a function of the log."""
    hosts = [leader(), leader()]
    for host in hosts:
        host.insert(client=1, rid=1, values=[b"a", b"b"], key=("s", 1))
        host.clock(10)
        host.remove(client=1, rid=2, count=1, lease_ms=LEASE_MS, key=("s", 2))
        host.step(TookOver(term=2, lease_clock_ms=20))
        host.settle()
    assert compared(hosts[0].host) == compared(hosts[1].host)
    assert hosts[0].process.stats().leases_held == 0
    assert [fields(r) for _, r in hosts[0].replies] == [fields(r) for _, r in hosts[1].replies]


def test_an_ack_the_last_leader_stepped_gets_its_first_answer_when_sent_again() -> None:
    """An ack stepped by the last leader (in the log: the new leader inherits it) whose
    reply never came is sent again, with its key, after ``TookOver``: it gets its first
    answer (the lease was live, the element is gone for good), not a second evaluation
    that finds no lease and tells the consumer its element went back.  Found by
    tests/property/test_replicated_schedules.py (seed 1643)."""
    host = leader()
    host.insert(client=1, rid=1, values=[b"x"])
    host.settle()
    host.remove(client=1, rid=2, count=1, lease_ms=LEASE_MS, key=("s", 2))
    ((_, granted),) = host.settle()
    lease = granted[2][0].lease
    host.lease(client=1, rid=3, how="ack", leases=[lease.lease_id], key=("s", 3))
    host.take_frames()  # its reply went to a connection of the last term, and was lost
    host.step(TookOver(term=2, lease_clock_ms=0))
    host.lease(client=2, rid=3, how="ack", leases=[lease.lease_id], key=("s", 3))
    assert host.settle() == [(2, ("done", 3, (LeaseAnswer(True),)))]
    assert host.process.stats().held_elements == 0
    # Without a key (no session), an ack is answered from the leases as they are now.
    host.lease(client=2, rid=4, how="ack", leases=[lease.lease_id])
    assert host.settle() == [(2, ("done", 4, (LeaseAnswer(False),)))]
