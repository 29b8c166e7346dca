"""The sans-IO host over a one-process cluster: requests in, replies out (typed results).

In a one-process cluster every message stays inside the process, so the host produces
client frames only, and a few ticks complete everything; no sockets, no trio.
"""

from __future__ import annotations

import pytest

from skueue.core.messages.stages import GetReply
from skueue.core.ops import Structure
from skueue.host.effects import DropPeer
from skueue.host.inputs import PeerMessage, TimedOut
from skueue.host.replies import Done, ErrorReply
from skueue.host.results import Inserted
from skueue.overlay.labels import Kind
from skueue.runtime.operations.stats import local_stats
from skueue.wire.peer import decode_message
from tests.unit.host_driver import HostDriver
from tests.unit.host_driver import one_process_host as make_host


def one_process_host(structure: Structure = Structure.QUEUE, pid: str = "p0") -> HostDriver:
    return HostDriver(make_host(structure, pid))


def test_insert_then_remove_reply_with_ord_and_position() -> None:
    host = one_process_host()
    host.insert(client=1, rid=10, values=[b"a", b"b"])
    frames = host.settle()
    assert len(frames) == 1
    client, (kind, rid, results) = frames[0]
    assert (client, kind, rid) == (1, "done", 10)
    assert [type(r) for r in results] == [Inserted, Inserted]
    (ord_a, pos_a), (ord_b, pos_b) = ((r.ord, r.position) for r in results)
    assert ord_a < ord_b and pos_a is not None and pos_b is not None and pos_a != pos_b

    host.remove(client=1, rid=11, count=3)
    frames = host.settle()
    assert [(c, f[0], f[1]) for c, f in frames] == [(1, "done", 11)]
    results = frames[0][1][2]
    assert [r.value for r in results] == [b"a", b"b", None]  # FIFO, then empty
    assert [r.position for r in results] == [pos_a, pos_b, None]  # an empty one has none
    assert ord_b < results[0].ord < results[1].ord < results[2].ord
    assert host.clients.counters.as_dict() == {
        "inserted": 2,
        "removed": 2,
        "empty": 1,
        "dropped_results": 0,
        "retried": 0,
    }
    assert host.clients.pending_ops == 0


def test_a_stack_pops_last_in_first_out() -> None:
    host = one_process_host(Structure.STACK)
    host.insert(1, 1, [b"x", b"y", b"z"])
    host.settle()
    host.remove(1, 2, 4)
    ((_, (_, _, results)),) = host.settle()
    assert [r.value for r in results] == [b"z", b"y", b"x", None]


def test_requests_of_several_clients_get_their_own_replies() -> None:
    host = one_process_host()
    host.insert(1, 5, [b"one"])
    host.insert(2, 5, [b"two"])  # the same rid from another client
    host.remove(3, 9, 1)
    frames = sorted(host.settle(), key=lambda cf: cf[0])
    assert [(c, f[0], f[1]) for c, f in frames] == [(1, "done", 5), (2, "done", 5), (3, "done", 9)]
    assert frames[2][1][2][0].value == b"one"  # first in, first out, across clients


def test_an_empty_request_is_answered_at_once() -> None:
    host = one_process_host()
    host.insert(1, 3, [])
    assert host.take_frames()[1] == [(1, Done(3, ()))]


def test_a_gone_clients_results_are_dropped_and_counted() -> None:
    host = one_process_host()
    host.insert(1, 1, [b"a", b"b", b"c"])
    host.settle()
    host.remove(2, 7, 2)  # takes a and b ...
    host.insert(2, 8, [b"late"])
    host.client_gone(2)  # ... but its client left before the replies
    frames = host.settle()
    assert frames == [], "replies went to a client that is gone"
    assert host.clients.counters.dropped_results == 2  # two removed elements were lost with it
    assert host.clients.counters.removed == 2 and host.clients.counters.inserted == 4

    host.remove(3, 1, 3)  # others are served on: c and late remain
    ((_, (_, _, results)),) = host.settle()
    assert [r.value for r in results] == [b"c", b"late", None]


def test_a_gone_client_is_forgotten_once_nothing_of_it_is_pending() -> None:
    """A daemon serves clients for months: it must not remember every one that left."""
    host = one_process_host()
    for client in range(1, 200):
        host.insert(client, 1, [b"v"])
        if client % 2:
            host.client_gone(client)  # gone with a request pending
            host.settle()
        else:
            host.settle()
            host.client_gone(client)  # gone after its replies
    assert host.clients.gone_clients == set()


def test_results_of_a_client_that_stays_are_never_dropped() -> None:
    host = one_process_host()
    host.insert(1, 1, [b"a"])
    host.client_gone(2)  # another client leaves
    frames = host.settle()
    assert [c for c, _ in frames] == [1]
    assert host.clients.counters.dropped_results == 0


def test_a_message_from_a_peer_that_nobody_waits_for_costs_that_peer_its_link() -> None:
    """The peer's fault: the host changes nothing and asks the driver to drop the link
    (a ``DropPeer`` effect); it must not corrupt its state or stop."""
    host = one_process_host()
    host.insert(1, 1, [b"a"])
    host.settle()
    forged = decode_message(["GetReply", 1 << 50, 1, b"forged", None])
    assert isinstance(forged, GetReply)
    effects = host.host.step(PeerMessage("p9", 1, Kind.LEFT, forged))
    assert [type(e) for e in effects] == [DropPeer] and effects[0].peer == "p9"
    host.remove(1, 2, 1)
    ((_, (_, _, results)),) = host.settle()
    assert results[0].value == b"a"


def test_stats_describe_the_process() -> None:
    host = one_process_host(pid="solo")
    host.insert(1, 1, [b"a", b"b"])
    host.settle()
    stats = local_stats(host.host)
    assert stats["process"] == "solo"
    assert stats["structure"] == "queue"
    assert stats["anchor"] is True  # one process: it holds the anchor
    assert stats["size"] == 2
    assert stats["entries"] == 2
    assert stats["pending_ops"] == 0
    assert stats["inserted"] == 2


def test_a_request_past_its_deadline_gets_one_timeout_error_and_its_late_result_counts() -> None:
    """Item 3: a request not answered by its deadline is answered with a timeout error
    (once); when its operations complete later, removed elements count as dropped."""
    host = one_process_host()
    host.insert(client=1, rid=1, values=[b"x"])
    host.settle()
    host.remove(client=1, rid=2, count=1, deadline=5.0)
    assert host.host.seconds_to_due(now=1.0) == 4.0
    assert host.due(now=4.9, why="members unreachable: p9") == []
    (made,) = host.due(now=5.0, why="members unreachable: p9")
    assert isinstance(made, TimedOut) and made.why == "members unreachable: p9"
    ((client, reply),) = host.take_frames()[1]
    assert client == 1 and reply == ErrorReply(2, reply.message, "timeout")
    assert "p9" in reply.message
    assert host.due(now=9.0, why="again") == []  # one error per request
    assert host.take_frames()[1] == []
    assert host.host.seconds_to_due(now=9.0) == float("inf")
    assert host.settle() == []  # the late result is not sent ...
    assert host.clients.counters.dropped_results == 1  # ... and the element is counted as lost


@pytest.mark.parametrize("replayed", [False, True], ids=["live", "replayed"])
def test_a_sessions_remove_that_timed_out_counts_its_element_when_it_completes(
    replayed: bool,
) -> None:
    """Issue 28, item 4: a client with a session (a retry key) that was told its remove
    timed out has its answer and never sends it again: the element the remove takes
    later is lost then, not when the retry window forgets it.  The replay of the input
    log (the ``TimedOut`` input, stepped again on a fresh host) counts it the same."""
    host = one_process_host()
    host.log = []
    host.insert(client=1, rid=1, values=[b"x"])
    host.settle()
    host.remove(client=1, rid=2, count=1, deadline=5.0, key=("session", 2))
    assert [type(i) for i in host.due(now=5.0, why="members unreachable: p9")] == [TimedOut]
    host.take_frames()
    if replayed:  # a restart: the same inputs, stepped through a new host
        logged, host = host.log, one_process_host()
        for item in logged:
            host.step(item)
        host.take_frames()
    host.client_gone(1)
    assert host.settle() == []
    assert host.clients.counters.dropped_results == 1
    # Remembered for a client that never read the timeout: a retry still gets it.
    finished = host.clients.retry_window.get(("session", 2))
    assert finished is not None and finished.results()[0].value == b"x"
    # ... and it is not counted a second time when the window forgets it.
    host.clients.retry_window.requests_max = 0
    assert host.clients.retry_window.finish(("other", 1), (), True, 0) == 0
