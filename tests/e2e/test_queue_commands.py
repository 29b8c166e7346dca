"""Named queues from a new user's shell, on real daemons (issue 28).

- item 5: a queue made by its first enqueue gets a delivery limit with ``skueue
  configure``, applied the same way on every member;
- item 9: a stack is used by its name alone (``dequeue``, ``pop``, ``push``,
  ``enqueue``), on any member;
- item 10: ``delete`` of a name without a queue is an error, and ``dlq`` of one makes no
  ``NAME.dlq``; neither leaves anything in ``stats``;
- item 11: a dead letter counts as inserted into ``NAME.dlq``, a look removes nothing;
- ``skueue ls`` and ``skueue info``;
- item 8: an idle ``skueue consume`` adds no empty results, and a message enqueued
  while a consumer waits reaches it at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import skueue.client.api
import skueue.client.blocking
from tests.e2e.daemons import Cluster, stop
from tests.faults.test_crash_restart import Cluster as DurableCluster

StartCluster = Callable[..., Cluster]
CLI_TIMEOUT_S = 60.0
IDLE_S = 3.0
# An idle consumer's fetch waits POLL_WAIT_S in the daemon, then asks again: a few
# requests in IDLE_S, each answered with nothing, and no empty result counted.
IDLE_EMPTIES_MAX = 2
PROMPT_S = 2.0  # an element enqueued while a consumer waits reaches it within this


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skueue.cli.skueue", *args],
        capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False,
    )  # fmt: skip


def ok(*args: str) -> str:
    done = cli(*args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def queues(node: str) -> dict[str, Any]:
    with skueue.client.blocking.connect_blocking(node, admin=True) as q:
        found: dict[str, Any] = q.stats()["queues"]
        return found


def test_configure_gives_a_queue_made_by_an_enqueue_a_delivery_limit(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(3, "queue", ("--in-memory",))
    a, b, c = cluster.addresses
    ok("enqueue", "-q", "jobs", "--node", a, "build-42")
    refused = cli("create", "jobs", "--max-deliveries", "1", "--node", b)
    assert refused.returncode == 1 and "without a delivery limit" in refused.stderr, refused
    done = cli("configure", "jobs", "--max-deliveries", "1", "--node", b)
    assert done.returncode == 0, done.stderr
    assert "configured jobs: a queue with a delivery limit of 1" in done.stderr
    # Every member's leased dequeues get it: one delivery, returned, is a dead letter.
    with skueue.client.blocking.connect_blocking(c) as q:
        leased = q.dequeue(queue="jobs", lease=30)
        assert leased is not None and q.nack(leased)
        assert q.dequeue(queue="jobs.dlq") == b"build-42"
    shown = json.loads(ok("configure", "jobs", "--max-deliveries", "0", "--json", "--node", a))
    assert shown == {"queue": "jobs", "structure": "queue", "max_deliveries": 0,
                     "priorities": 1}  # fmt: skip
    missing = cli("configure", "nothing", "--max-deliveries", "3", "--node", a)
    assert missing.returncode == 1 and "no queue 'nothing' to configure" in missing.stderr
    assert "nothing" not in queues(a)
    bad = cli("configure", "jobs", "--max-deliveries", "1001", "--node", a)
    assert bad.returncode == 2 and "over the limit of 1000 (DELIVERY_LIMIT_MAX)" in bad.stderr, bad


def test_a_stack_is_used_by_its_name_alone_on_every_member(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(3, "queue", ("--in-memory",))
    a, b, c = cluster.addresses
    ok("enqueue", "-q", "undo", "--structure", "stack", "--node", a, "edit-1", "edit-2")
    assert ok("dequeue", "-q", "undo", "--node", b) == "edit-2\n"  # was: "'undo' is a stack"
    ok("push", "-q", "undo", "--node", a, "edit-2")
    ok("enqueue", "-q", "undo", "--node", c, "edit-3")  # onto the stack
    assert ok("pop", "-q", "undo", "-n", "3", "--node", c) == "edit-3\nedit-2\nedit-1\n"
    ok("enqueue", "-q", "jobs", "--node", a, "j1", "j2")
    assert ok("pop", "-q", "jobs", "--node", b) == "j1\n", "pop on a queue dequeues"
    insisted = cli("dequeue", "-q", "undo", "--structure", "queue", "--node", a)
    assert insisted.returncode == 1 and "'undo' is a stack" in insisted.stderr, insisted
    listed = {q["name"]: q for q in json.loads(ok("ls", "--json", "--node", c))}
    assert (listed["undo"]["structure"], listed["jobs"]["structure"]) == ("stack", "queue")


def test_unknown_names_are_errors_or_nothing_and_make_nothing(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(2, "queue", ("--in-memory",))
    node = cluster.addresses[0]
    deleted = cli("delete", "never-made", "--node", node)
    assert deleted.returncode == 1, deleted
    assert deleted.stderr == (
        "skueue delete: error: no queue 'never-made' to delete: no queue or stack has that name\n"
    )
    listed = cli("dlq", "nosuchqueue", "--node", node)
    assert listed.returncode == 0 and "listed 0 in nosuchqueue.dlq" in listed.stderr, listed
    moved = cli("dlq", "nosuchqueue", "--move", "--node", node)
    assert moved.returncode == 0, moved
    names = queues(node)
    assert not {"never-made", "nosuchqueue", "nosuchqueue.dlq"} & set(names), names
    assert [q["name"] for q in json.loads(ok("ls", "--json", "--node", node))] == ["default"]


def test_dead_letter_counts_say_what_happened(skueued_cluster: StartCluster) -> None:
    """The issue's run: one element dead-lettered, listed twice, moved once."""
    cluster = skueued_cluster(2, "queue", ("--in-memory",))
    a, b = cluster.addresses
    ok("create", "work", "--max-deliveries", "1", "--node", a)
    ok("enqueue", "-q", "work", "--node", a, "poison")
    ran = cli("consume", "work", "--node", b, "-n", "1", "--exec", "exit 1")
    assert ran.returncode == 0 and "0 acked, 1 nacked" in ran.stderr, ran
    for node in (a, b):
        assert "poison\t(1 deliveries, last returned: nack)" in ok("dlq", "work", "--node", node)
    assert "moved 1 from work.dlq back to work" in ok("dlq", "work", "--move", "--node", a)
    dlq = json.loads(ok("stats", "work.dlq", "--json", "--node", b))
    counts = {k: dlq[k] for k in ("inserted", "removed", "leased", "acked", "empty", "size")}
    assert counts == {"inserted": 1, "removed": 1, "leased": 1, "acked": 1, "empty": 0,
                      "size": 0}, counts  # fmt: skip


def test_ls_and_info_show_every_queue_and_one(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(2, "queue", ("--in-memory",))
    node = cluster.addresses[1]
    ok("create", "urgent", "--priorities", "4", "--max-deliveries", "3", "--node", node)
    ok("enqueue", "-q", "urgent", "--node", node, "a", "b")
    ok("push", "-q", "undo", "--node", node, "x")
    table = ok("ls", "--node", node).splitlines()
    assert table[0].split() == ["NAME", "STRUCTURE", "WAITING", "PRIORITIES", "DELIVERY",
                                "LIMIT"]  # fmt: skip
    assert [line.split() for line in table[1:]] == [
        ["default", "queue", "0", "-", "-"],
        ["undo", "stack", "1", "-", "-"],
        ["urgent", "queue", "2", "4", "3"],
    ]
    info = ok("info", "urgent", "--node", node)
    assert info.splitlines() == [
        "urgent: a queue with a delivery limit of 3 and 4 priority levels",
        "  waiting: 2",
        "  dead letters waiting in urgent.dlq: 0",
    ]
    shown = json.loads(ok("info", "undo", "--json", "--node", node))
    assert shown == {"name": "undo", "structure": "stack", "size": 1, "priorities": 1,
                     "max_deliveries": 0, "dead_letters": 0}  # fmt: skip
    missing = cli("info", "nope", "--node", node)
    assert missing.returncode == 1 and "no queue 'nope'" in missing.stderr


def empty_results(node: str) -> int:
    with skueue.client.blocking.connect_blocking(node, admin=True) as q:
        return int(q.stats()["totals"]["empty"])


def test_an_idle_consume_waits_in_the_daemon_and_counts_no_empty_results(
    skueued_cluster: StartCluster,
) -> None:
    """A 5 s --idle consume on an empty queue used to add 100 empty results."""
    cluster = skueued_cluster(2, "queue", ("--in-memory",))
    node = cluster.addresses[0]
    before = empty_results(node)
    started = time.monotonic()
    ran = cli("consume", "idle", "--node", node, "--idle", str(IDLE_S))
    assert ran.returncode == 0 and "0 acked, 0 nacked" in ran.stderr, ran
    assert time.monotonic() - started >= IDLE_S
    added = empty_results(node) - before
    assert added <= IDLE_EMPTIES_MAX, f"an idle consume added {added} empty results"


@pytest.mark.trio
async def test_a_waiting_consumer_gets_an_element_enqueued_meanwhile_at_once(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(2, "queue", ("--in-memory",))
    got: list[tuple[bytes, float]] = []
    async with skueue.client.api.connect(cluster.addresses[0]) as q:
        consumer = q.consume("later", prefetch=50, lease=30)
        async with consumer, anyio.create_task_group() as tg:

            async def take() -> None:
                async for msg in consumer:
                    got.append((msg.value, anyio.current_time()))
                    await msg.ack()
                    return

            tg.start_soon(take)
            await anyio.sleep(1.0)  # the consumer waits on the empty queue
            async with skueue.client.api.connect(cluster.addresses[1]) as other:
                sent = anyio.current_time()
                await other.enqueue(b"job", queue="later")
            with anyio.fail_after(PROMPT_S):
                while not got:
                    await anyio.sleep(0.01)
    assert got[0][0] == b"job" and got[0][1] - sent < PROMPT_S
    async with skueue.client.api.connect(cluster.addresses[0], admin=True) as q:
        assert (await q.stats())["queues"]["later"]["empty"] == 0


def test_a_configure_and_a_guessed_structure_replay_after_kill_9(tmp_path: Path) -> None:
    """Durable members log a configure, and the flags and guesses of the operations
    (the input log's records), so a member killed with SIGKILL comes back with the same
    queues: each member is killed and restarted in turn, the anchor's among them."""
    cluster = DurableCluster(tmp_path)
    cluster.start()
    try:
        a = cluster.addresses[0]
        ok("enqueue", "-q", "jobs", "--node", a, "build-42")
        ok("configure", "jobs", "--max-deliveries", "2", "--node", a)
        ok("push", "-q", "undo", "--node", a, "edit-1", "edit-2")
        for member in range(len(cluster.addresses)):
            cluster.kill(member)
            cluster.restart(member)
        listed = {q["name"]: q for q in json.loads(ok("ls", "--json", "--node", a))}
        assert (listed["jobs"]["max_deliveries"], listed["undo"]["structure"]) == (2, "stack")
        assert ok("dequeue", "-q", "undo", "--node", a) == "edit-2\n"
    finally:
        problems = stop([d for d in cluster.daemons if d.alive()])
        assert not problems, problems
