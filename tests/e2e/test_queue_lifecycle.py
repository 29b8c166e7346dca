"""Making and deleting queues on real daemons (issue 12, items 1 and 3).

``create_queue`` and ``skueue create`` make a queue with its settings (its structure and
a delivery limit that every consumer gets); ``delete_queue`` and ``skueue delete`` remove
what a named queue holds, clear its entries on every member, free the name for a queue of
either kind, show in ``skueue stats``, need an admin token where tokens are on, and stay
done across a kill -9 and restart of a durable member.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import skueue.client.blocking
from skueue.client.blocking import BlockingClient
from skueue.client.errors import RequestRejected
from skueue.runtime.security.peer_auth import generate_key
from tests.e2e.daemons import Cluster, stop
from tests.faults.test_crash_restart import Cluster as DurableCluster

StartCluster = Callable[..., Cluster]
CLI_TIMEOUT_S = 30.0
SETTLE_S = 20.0


def entries(q: BlockingClient) -> int:
    return int(q.stats()["totals"]["entries"])


def until_entries(q: BlockingClient, want: int) -> int:
    """The cluster's stored entries once they reach ``want`` (Drops and Puts land
    after the answers), or what they were when SETTLE_S ran out."""
    deadline = time.monotonic() + SETTLE_S
    got = entries(q)
    while got != want and time.monotonic() < deadline:
        time.sleep(0.1)
        got = entries(q)
    return got


def skueue_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skueue.cli.skueue", *args],
        capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=env, check=False,
    )  # fmt: skip


def test_a_deleted_queue_is_empty_its_entries_gone_and_its_name_free(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(3, "queue")
    node = cluster.addresses[0]
    with skueue.client.blocking.connect_blocking(cluster.addresses[1]) as q:
        q.enqueue_many([f"j{i}".encode() for i in range(300)], queue="jobs")
        q.enqueue_many([f"o{i}".encode() for i in range(50)], queue="other")
        assert len(q.dequeue_many(20, queue="jobs")) == 20
        assert until_entries(q, 330) == 330
    with skueue.client.blocking.connect_blocking(node) as q:
        assert q.delete_queue("jobs") == 280
        assert q.dequeue(queue="jobs") is None, "the name is a new, empty queue"
        assert until_entries(q, 50) == 50, "every member cleared the deleted queue's entries"
        stats = q.stats()["queues"]
        assert stats["other"]["size"] == 50
        assert stats["jobs"]["deleted"] == 280
        with pytest.raises(RequestRejected, match="no queue 'never-made' to delete"):
            q.delete_queue("never-made")
        assert q.delete_queue("jobs") == 0  # the empty queue the dequeue made
        # The name comes back as a stack, above every position the queue used.
        q.push(b"a", queue="jobs", structure="stack")
        q.push(b"b", queue="jobs", structure="stack")
        assert q.pop(queue="jobs", structure="stack") == b"b"
    shown = skueue_cli("delete", "jobs", "--json", "--node", node)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {"queue": "jobs", "removed": 1}
    bad = skueue_cli("delete", "no spaces", "--node", node)
    assert bad.returncode == 2 and "queue name" in bad.stderr
    with skueue.client.blocking.connect_blocking(node) as q:
        assert until_entries(q, 50) == 50
        assert q.stats()["queues"]["jobs"]["structure"] == "deleted"
        with pytest.raises(RequestRejected, match="only ASCII"):
            q.delete_queue("ä")


def test_deleting_a_queue_needs_an_admin_token(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    user, admin = generate_key(), generate_key()
    (tmp_path / "tokens").write_text(f"client {user}\nadmin {admin}\n")
    cluster = skueued_cluster(2, "queue", ("--client-tokens", str(tmp_path / "tokens")))
    node = cluster.addresses[0]
    with skueue.client.blocking.connect_blocking(node, token=user) as q:
        q.enqueue(b"x", queue="jobs")
        with pytest.raises(RequestRejected, match="deleting a queue need an admin token"):
            q.delete_queue("jobs")
        assert q.dequeue(queue="jobs") == b"x", "the refused delete changed nothing"
        q.enqueue(b"y", queue="jobs")
    refused = skueue_cli("delete", "jobs", "--node", node, env={**os.environ, "SKUEUE_TOKEN": user})
    assert refused.returncode == 1 and "admin token" in refused.stderr
    done = skueue_cli("delete", "jobs", "--node", node, env={**os.environ, "SKUEUE_TOKEN": admin})
    assert done.returncode == 0 and "1 elements removed" in done.stderr, done.stderr


def test_a_delete_stays_done_across_kill_9_and_restart(tmp_path: Path) -> None:
    """Durable members: the delete is in every input log it touched.  One member is
    killed with SIGKILL right after the delete's answer and started again; the queue
    stays deleted, its entries stay gone, and the name serves a new queue."""
    cluster = DurableCluster(tmp_path)
    cluster.start()
    try:
        with skueue.client.blocking.connect_blocking(cluster.addresses[0]) as q:
            q.enqueue_many([f"j{i}".encode() for i in range(200)], queue="jobs")
            q.enqueue_many([b"kept"], queue="other")
            assert q.delete_queue("jobs") == 200
        cluster.kill(2)
        cluster.restart(2)
        with skueue.client.blocking.connect_blocking(cluster.addresses[2]) as q:
            assert until_entries(q, 1) == 1
            assert q.dequeue(queue="jobs") is None
            q.enqueue(b"new", queue="jobs")
            assert q.dequeue(queue="jobs") == b"new"
            assert q.dequeue(queue="other") == b"kept"
    finally:
        problems = stop([d for d in cluster.daemons if d.alive()])
        assert not problems, problems


def test_a_queue_made_with_a_delivery_limit_sends_a_poison_message_to_its_dead_letters(
    skueued_cluster: StartCluster,
) -> None:
    """The limit is the queue's: consumers on two members that ask for none get it."""
    cluster = skueued_cluster(2, "queue")
    made = skueue_cli("create", "jobs", "--max-deliveries", "2", "--json",
                      "--node", cluster.addresses[0])  # fmt: skip
    assert made.returncode == 0 and json.loads(made.stdout) == {"queue": "jobs", "created": True}
    again = skueue_cli("create", "jobs", "--max-deliveries", "2", "--node", cluster.addresses[1])
    assert again.returncode == 0 and "found jobs" in again.stderr
    other = skueue_cli("create", "jobs", "--structure", "stack", "--node", cluster.addresses[1])
    assert other.returncode == 1
    assert "'jobs' exists already, as a queue with a delivery limit of 2" in other.stderr
    bad = skueue_cli("create", "jobs", "--max-deliveries", "-1", "--node", cluster.addresses[1])
    assert bad.returncode == 2 and "--max-deliveries" in bad.stderr
    with skueue.client.blocking.connect_blocking(cluster.addresses[0]) as q:
        q.enqueue(b"poison", queue="jobs")
        assert q.stats()["queues"]["jobs"]["max_deliveries"] == 2
    for delivery, node in enumerate(cluster.addresses, 1):
        with skueue.client.blocking.connect_blocking(node) as q:
            leased = q.dequeue(queue="jobs", lease=30)
            assert leased is not None and leased.deliveries == delivery
            assert q.nack(leased)
    with skueue.client.blocking.connect_blocking(cluster.addresses[0]) as q:
        assert q.dequeue(queue="jobs") is None
        assert q.dequeue(queue="jobs.dlq") == b"poison"
        assert q.create_queue("other", structure="stack") is True
        with pytest.raises(ValueError, match="max_deliveries"):
            q.create_queue("other", max_deliveries=1001)


def test_a_queue_with_priority_levels_serves_the_most_urgent_first(
    skueued_cluster: StartCluster,
) -> None:
    """Issue 14 on real daemons: ``skueue create --priorities``, ``enqueue -p``; every
    dequeue, on any member, takes the most urgent element, FIFO within a level, and a
    nacked element goes back at its own level."""
    cluster = skueued_cluster(3, "queue")
    made = skueue_cli("create", "pq", "--priorities", "4", "--node", cluster.addresses[0])
    assert made.returncode == 0, made.stderr
    for value, priority in (("low-1", "3"), ("mid-1", "1"), ("top-1", "0"), ("low-2", "9"),
                            ("mid-2", "1")):  # fmt: skip
        sent = skueue_cli("enqueue", "-q", "pq", "-p", priority, value,
                          "--node", cluster.addresses[1])  # fmt: skip
        assert sent.returncode == 0, sent.stderr
    bad = skueue_cli("enqueue", "-q", "pq", "-p", "16", "x", "--node", cluster.addresses[1])
    assert bad.returncode == 2 and "--priority" in bad.stderr
    with skueue.client.blocking.connect_blocking(cluster.addresses[2]) as q:
        q.enqueue(b"low-3", queue="pq", priority=15)  # past the last level: the last
        leased = q.dequeue(queue="pq", lease=30)
        assert leased is not None and leased.value == b"top-1"
        got = [q.dequeue(queue="pq") for _ in range(2)]
        assert got == [b"mid-1", b"mid-2"]
        assert q.nack(leased)
        assert q.dequeue_many(5, queue="pq") == [b"top-1", b"low-1", b"low-2", b"low-3"]
        assert q.stats()["queues"]["pq"]["priorities"] == 4
        with pytest.raises(ValueError, match="priority"):
            q.enqueue(b"x", queue="pq", priority=16)
        with pytest.raises(RequestRejected, match="a stack has no priority levels"):
            q.create_queue("st", structure="stack", priorities=2)


def test_peek_shows_the_head_on_any_member_and_leaves_it(
    skueued_cluster: StartCluster,
) -> None:
    """Issue 14 item 3 on real daemons: ``skueue peek`` and ``peek()`` see what the next
    dequeue takes (the most urgent level first), on any member, and leave it there;
    an empty or unmade queue prints nothing and exits 3; a stack has no peek."""
    cluster = skueued_cluster(3, "queue")
    with skueue.client.blocking.connect_blocking(cluster.addresses[0]) as q:
        q.create_queue("pq", priorities=4)
        q.enqueue(b"low", queue="pq", priority=3)
        q.enqueue(b"top", queue="pq", priority=0)
        q.enqueue(b"top-2", queue="pq", priority=0)
        q.enqueue(b"s", queue="st", structure="stack")
    for node in cluster.addresses:
        seen = skueue_cli("peek", "-q", "pq", "--node", node)
        assert (seen.returncode, seen.stdout) == (0, "top\n"), seen.stderr
    as_json = skueue_cli("peek", "-q", "pq", "--json", "--node", cluster.addresses[1])
    assert json.loads(as_json.stdout)["text"] == "top"
    with skueue.client.blocking.connect_blocking(cluster.addresses[2]) as q:
        assert [q.peek(queue="pq") for _ in range(3)] == [b"top"] * 3
        assert q.dequeue(queue="pq") == b"top"
        assert q.peek(queue="pq") == b"top-2"
        assert q.dequeue_many(5, queue="pq") == [b"top-2", b"low"]
        assert q.peek(queue="pq") is None
        assert q.peek(queue="never-made") is None
        assert "never-made" not in q.stats()["queues"]
        with pytest.raises(RequestRejected, match="'st' is a stack: peek is not an operation"):
            q.peek(queue="st")
    empty = skueue_cli("peek", "-q", "pq", "--node", cluster.addresses[0])
    assert (empty.returncode, empty.stdout) == (3, "") and "pq is empty" in empty.stderr
    stack = skueue_cli("peek", "-q", "st", "--node", cluster.addresses[0])
    assert stack.returncode == 1 and "is a stack" in stack.stderr, stack.stderr
    bad = skueue_cli("peek", "-q", "no spaces", "--node", cluster.addresses[0])
    assert bad.returncode == 2 and "only ASCII letters" in bad.stderr, bad.stderr


def test_peeks_replay_after_kill_9_and_restart(tmp_path: Path) -> None:
    """Durable members log a peek like any request (the input log's "v" record): a
    member killed with SIGKILL after peeks restarts from its log and serves on."""
    cluster = DurableCluster(tmp_path)
    cluster.start()
    try:
        with skueue.client.blocking.connect_blocking(cluster.addresses[1]) as q:
            q.enqueue_many([b"a", b"b"], queue="jobs")
            assert [q.peek(queue="jobs") for _ in range(4)] == [b"a"] * 4
        cluster.kill(1)
        cluster.restart(1)
        with skueue.client.blocking.connect_blocking(cluster.addresses[1]) as q:
            assert q.peek(queue="jobs") == b"a"
            assert q.dequeue_many(3, queue="jobs") == [b"a", b"b"]
            assert q.peek(queue="jobs") is None
    finally:
        problems = stop([d for d in cluster.daemons if d.alive()])
        assert not problems, problems
