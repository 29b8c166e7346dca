"""Named queues on real daemons (issue 12, item 1): many queues and stacks in one cluster,
each its own linearizable object; the default queue keeps today's CLI and API; a name
keeps the structure it was made with, and the other structure's requests get one clear
error; ``skueue stats`` lists the queues.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import anyio
import pytest
import trio

import skueue.client.api
import skueue.client.blocking
from skueue.client.errors import RequestRejected, SkueueError
from skueue.cluster.loadgen import LoadConfig, run_load
from tests.e2e.daemons import HOST, Cluster
from tests.e2e.oracle import assert_history_ok

StartCluster = Callable[..., Cluster]
LOAD_TIMEOUT_S = 90.0
CLI_TIMEOUT_S = 30.0


@pytest.mark.trio
async def test_a_workload_over_three_queues_is_linearizable_queue_by_queue(
    skueued_cluster: StartCluster,
) -> None:
    """3 daemons, 4 clients, 1,500 operations each on one of three named queues, then
    every queue drained: each queue's history passes the checkers, nothing is lost."""
    cluster = skueued_cluster(3, "queue")
    config = LoadConfig(
        nodes=tuple(cluster.addresses), clients=4, ops=1500, insert_ratio=0.6, value_bytes=32,
        seed=12, drain=True, structure="queue", queues=("jobs", "mail:eu", "default"),
    )  # fmt: skip
    with anyio.fail_after(LOAD_TIMEOUT_S):
        result = await run_load(config)
    assert_history_ok(result, config)
    by_queue = {r.queue for r in result.records}
    assert by_queue == {"jobs", "mail:eu", "default"}
    async with skueue.client.api.connect(cluster.addresses[1], admin=True) as q:
        stats = await q.stats()
    assert {n: v["size"] for n, v in stats["queues"].items()} == {
        "default": 0, "jobs": 0, "mail:eu": 0,
    }  # fmt: skip
    # The members' counts add up to what the history holds, queue by queue.
    for name, q in stats["queues"].items():
        mine = [r for r in result.records if r.queue == name]
        assert q["inserted"] == sum(1 for r in mine if r.inserts), name
        assert q["removed"] == sum(1 for r in mine if not r.inserts and r.value), name


@pytest.mark.trio
async def test_a_stack_and_a_queue_share_a_cluster_and_keep_their_structure(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(2, "queue")
    a, b = cluster.addresses
    async with skueue.client.api.connect(a) as q, skueue.client.api.connect(b) as r:
        await q.enqueue_many([b"1", b"2", b"3"], queue="jobs")
        await r.enqueue_many([b"a", b"b", b"c"], queue="undo", structure="stack")
        assert await r.dequeue_many(2, queue="jobs") == [b"1", b"2"]  # FIFO
        assert await q.dequeue_many(2, queue="undo", structure="stack") == [b"c", b"b"]  # LIFO
        with pytest.raises(RequestRejected, match="'undo' is a stack"):
            await q.enqueue(b"x", queue="undo", structure="queue")  # named: held to it
        with pytest.raises(RequestRejected, match="'jobs' is a queue"):
            await q.dequeue(queue="jobs", structure="stack")
        with pytest.raises(RequestRejected, match="queue name"):
            await q.enqueue(b"x", queue="no spaces")
        # The refused requests changed nothing, and the connection serves on.
        assert await r.dequeue_many(5, queue="undo", structure="stack") == [b"a"]
        assert await q.dequeue_many(5, queue="jobs") == [b"3"]
        assert await q.dequeue() is None  # the default queue was never touched


def test_the_cli_names_queues_and_stats_lists_them(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(2, "queue")
    node = ["--node", cluster.addresses[0]]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "skueue.cli.skueue", *args, *node],
            capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False,
        )  # fmt: skip

    assert cli("enqueue", "-q", "jobs", "one", "two").returncode == 0
    assert cli("enqueue", "top").returncode == 0  # the default queue, as before
    assert cli("enqueue", "-q", "undo", "--structure", "stack", "u1", "u2").returncode == 0
    got = cli("dequeue", "-q", "jobs", "-n", "1")
    assert (got.returncode, got.stdout) == (0, "one\n")
    got = cli("dequeue", "-q", "undo", "--structure", "stack")
    assert (got.returncode, got.stdout) == (0, "u2\n")
    refused = cli("enqueue", "-q", "undo", "--structure", "queue", "x")
    assert refused.returncode == 1 and "'undo' is a stack" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1  # one line, no traceback
    bad = cli("enqueue", "-q", "a b", "x")
    assert bad.returncode == 2 and "queue name" in bad.stderr
    stats = cli("stats")
    assert stats.returncode == 0, stats.stderr
    assert "queues: 3" in stats.stdout
    assert "  jobs (queue): 1 waiting; inserted 2, removed 1;" in stats.stdout, stats.stdout
    assert "  undo (stack): 1 waiting; inserted 2, removed 1;" in stats.stdout, stats.stdout
    one = cli("stats", "jobs", "--json")
    assert one.returncode == 0, one.stderr
    jobs = json.loads(one.stdout)
    assert (jobs["queue"], jobs["structure"], jobs["size"]) == ("jobs", "queue", 1)
    assert (jobs["inserted"], jobs["removed"], jobs["empty"]) == (2, 1, 0)
    assert len(jobs["insert_rate"]) == len(jobs["remove_rate"]) == 3
    text = cli("stats", "jobs")
    assert text.stdout.startswith("queue jobs (queue)\n  waiting: 1\n"), text.stdout
    missing = cli("stats", "nosuch")
    assert missing.returncode == 1 and "no queue 'nosuch'" in missing.stderr
    got = cli("dequeue")
    assert (got.returncode, got.stdout) == (0, "top\n")


@pytest.mark.trio
async def test_a_blocking_dequeue_waits_for_an_enqueue_on_another_daemon(
    skueued_cluster: StartCluster,
) -> None:
    """Issue 12, item 4: no polling loop; the daemon answers when the element comes."""
    cluster = skueued_cluster(3, "queue")
    a, b = cluster.addresses[0], cluster.addresses[2]
    got: list[bytes | None] = []
    async with skueue.client.api.connect(a) as consumer, skueue.client.api.connect(b) as producer:

        async def consume() -> None:
            got.append(await consumer.dequeue(queue="work", wait=30))

        started = trio.current_time()
        async with trio.open_nursery() as n:
            n.start_soon(consume)
            await trio.sleep(0.5)
            assert got == []  # still waiting: nothing was there
            await producer.enqueue(b"late", queue="work")
        assert got == [b"late"]
        assert trio.current_time() - started < 15  # woken by the element, not the wait's end
        assert await consumer.dequeue(queue="work", wait=0.3) is None  # a wait that ends
        stats = await producer.stats()
    assert (stats["queues"]["work"]["removed"], stats["queues"]["work"]["empty"]) == (1, 1)


def test_the_cli_waits_with_wait_and_says_when_it_ran_empty(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(1, "queue")
    got = subprocess.run(
        [sys.executable, "-m", "skueue.cli.skueue", "dequeue", "-q", "idle", "--wait", "0.4",
         "--node", cluster.addresses[0]],
        capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert got.returncode == 3 and "empty" in got.stderr, (got.returncode, got.stderr)


@pytest.mark.trio
async def test_a_blocked_consumer_that_disconnects_takes_nothing_with_it(
    skueued_cluster: StartCluster,
) -> None:
    """Its wait ends when its connection closes: the next element goes to a consumer
    that is still there, not to an attempt nobody will read."""
    cluster = skueued_cluster(2, "queue")
    a, b = cluster.addresses
    with trio.move_on_after(1.0):
        async with skueue.client.api.connect(a, retry=False) as leaver:
            await leaver.dequeue(queue="hand-off", wait=60)  # cancelled, then disconnected
    await trio.sleep(0.3)  # the daemon notices the closed connection
    async with skueue.client.api.connect(b) as producer, skueue.client.api.connect(a) as stayer:
        await producer.enqueue(b"for-the-one-who-stayed", queue="hand-off")
        assert await stayer.dequeue(queue="hand-off", wait=10) == b"for-the-one-who-stayed"
    async with skueue.client.api.connect(a, admin=True) as admin:
        stats = await admin.stats()
    assert [m.get("dropped_results") for m in stats["members"]] == [0, 0]


def test_the_blocking_client_names_queues_and_waits(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(1, "queue")
    with skueue.client.blocking.connect_blocking(cluster.addresses[0]) as q:
        q.enqueue_many([b"1", b"2"], queue="sync", structure="stack")
        assert q.insert([b"3"], queue="sync", structure="stack")[0].position == 3
        assert q.dequeue(queue="sync", structure="stack", wait=1) == b"3"
        assert q.dequeue_many(5, queue="sync", structure="stack", wait=0.2) == [b"2", b"1"]
        assert [r.value for r in q.remove(1, queue="sync", structure="stack", wait=0.2)] == [None]


@pytest.mark.trio
async def test_a_client_with_a_seed_list_goes_on_with_another_member_after_a_leave(
    skueued_cluster: StartCluster,
) -> None:
    """Issue 12, item 6: ``connect("a,b,c")``.  The member it used leaves the cluster
    (rolling maintenance); its next requests go to the next member, with a new session."""
    cluster = skueued_cluster(3, "queue")
    a, b, c = cluster.addresses
    async with skueue.client.api.connect(f"{a},{b},{c}") as q:
        first = q.process_id
        await q.enqueue(b"before", queue="roll")
        async with skueue.client.api.connect(a, admin=True) as admin:
            await admin.leave()
        cluster.procs[0].wait(timeout=30)
        await trio.sleep(0.3)  # the client sees its connection close
        await q.enqueue(b"after", queue="roll")
        assert q.process_id != first and q.address == b
        assert await q.dequeue_many(5, queue="roll") == [b"before", b"after"]
    with pytest.raises(SkueueError, match="no member of the seed list answered"):
        async with skueue.client.api.connect(f"{HOST}:1,{HOST}:2", timeout_s=2):
            pass
