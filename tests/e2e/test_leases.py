"""Leases on real daemons (issue 12, items 2, 3 and 5): a leased dequeue holds its element
for its connection until ack or nack; an expired lease and a closed connection each
return the element (at the tail, its delivery count one higher); a poison
message reaches the dead letters after its limit; the prefetching consumer hands every
element out once and gives back what it did not hand out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import anyio
import pytest

import skueue.client.api
import skueue.client.blocking
from skueue.client.consumer import Leased
from skueue.client.errors import RequestRejected
from tests.e2e.daemons import Cluster

StartCluster = Callable[..., Cluster]
TIMEOUT_S = 60.0


@pytest.mark.trio
async def test_ack_removes_nack_returns_at_the_tail_and_expiry_returns(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(3, "queue", ("--in-memory",))
    a, b = cluster.addresses[0], cluster.addresses[1]
    with anyio.fail_after(TIMEOUT_S):
        async with skueue.client.api.connect(a) as q, skueue.client.api.connect(b) as other:
            await q.enqueue_many([b"x", b"y", b"z"], queue="jobs")
            x = await q.dequeue(queue="jobs", lease=30)
            assert isinstance(x, Leased) and (x.value, x.deliveries, x.reason) == (b"x", 1, "")
            assert await other.ack(x) is False  # another connection's lease: not its to end
            assert await q.nack(x) is True
            assert await q.nack(x) is False  # ended once
            y = await other.dequeue(queue="jobs", lease=0.3)
            assert y is not None and y.value == b"y"
            assert await q.ack(y) is False  # other's
            z = await q.dequeue(queue="jobs", lease=30)
            assert z is not None and z.value == b"z"
            assert await q.ack(z) is True
            again = await q.dequeue(queue="jobs", lease=30)
            assert again is not None and (again.value, again.deliveries) == (b"x", 2)
            assert again.reason == "nack"
            assert await q.extend(again, 60) is True
            await q.ack(again)
            await anyio.sleep(0.6)  # y's lease ran out: y is back
            back = await q.dequeue_many(10, queue="jobs", lease=30, wait=5)
            assert [(m.value, m.deliveries, m.reason) for m in back] == [(b"y", 2, "expired")]
            assert await other.ack(y) is False  # too late: it went back
            assert await q.ack_many(back) == [True]
            assert await q.dequeue(queue="jobs") is None  # acked: gone for good
            stats = (await q.stats())["queues"]["jobs"]
            counts = [stats[k] for k in ("leased", "acked", "nacked", "expired", "dead_lettered")]
            assert counts == [5, 3, 1, 1, 0]
    shown = run_cli("stats", "jobs", "--node", a)
    assert "leased 5, acked 3, nacked 1, expired 1, dead-lettered 0" in shown.stdout, shown


@pytest.mark.trio
async def test_a_closed_connection_returns_its_leases(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(2, "queue", ("--in-memory",))
    with anyio.fail_after(TIMEOUT_S):
        async with skueue.client.api.connect(cluster.addresses[0]) as q:
            await q.enqueue_many([b"1", b"2", b"3"])
            async with skueue.client.api.connect(cluster.addresses[1]) as doomed:
                held = await doomed.dequeue_many(2, lease=600)
                assert [m.value for m in held] == [b"1", b"2"]
            got = await q.dequeue_many(3, lease=60, wait=5)
            while len(got) < 3:
                got += await q.dequeue_many(3 - len(got), lease=60, wait=5)
            assert [(m.value, m.deliveries, m.reason) for m in got] == [
                (b"3", 1, ""),
                (b"1", 2, "closed"),
                (b"2", 2, "closed"),
            ]


@pytest.mark.trio
async def test_a_poison_message_reaches_the_dead_letters_and_moves_back(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(2, "queue", ("--in-memory",))
    address = cluster.addresses[0]
    with anyio.fail_after(TIMEOUT_S):
        async with skueue.client.api.connect(address) as q:
            await q.enqueue(b"poison", queue="work")
            for delivery in (1, 2, 3):
                m = await q.dequeue(queue="work", lease=30, max_deliveries=3, wait=5)
                assert m is not None and m.deliveries == delivery
                assert await q.nack(m)
            assert await q.dequeue(queue="work", wait=0.5) is None
            with pytest.raises(ValueError, match="max_deliveries needs a lease"):
                await q.dequeue(queue="work", max_deliveries=3)  # type: ignore[call-overload]
    listed = run_cli("dlq", "work", "--node", address)
    assert listed.returncode == 0, listed.stderr
    assert "poison" in listed.stdout and "3 deliveries" in listed.stdout
    assert "nack" in listed.stdout
    moved = run_cli("dlq", "work", "--move", "--node", address)
    assert moved.returncode == 0, moved.stderr
    assert "moved 1" in moved.stdout
    with anyio.fail_after(TIMEOUT_S):
        async with skueue.client.api.connect(address) as q:
            assert await q.dequeue(queue="work.dlq") is None
            fresh = await q.dequeue(queue="work", lease=30, wait=5)
            assert fresh is not None and (fresh.value, fresh.deliveries) == (b"poison", 1)


@pytest.mark.trio
async def test_the_consumer_hands_each_element_out_once_and_gives_back_the_rest(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(3, "queue", ("--in-memory",))
    values = [b"m%03d" % i for i in range(300)]
    with anyio.fail_after(TIMEOUT_S):
        async with skueue.client.api.connect(cluster.addresses[0]) as q:
            await q.enqueue_many(values, queue="feed")
        seen: list[bytes] = []
        async with skueue.client.api.connect(cluster.addresses[1]) as q:
            async with q.consume("feed", prefetch=40, lease=30) as messages:
                async for msg in messages:
                    seen.append(msg.value)
                    assert msg.deliveries == 1
                    assert await msg.ack()
                    if len(seen) == 120:
                        break
            # Given back at the close: the rest is all there, in order, never delivered.
            rest = [m async for m in q.consume("feed", prefetch=64, lease=30, idle=1.0)]
            assert [m.deliveries for m in rest] == [1] * len(rest)
            assert await q.ack_many([m.leased for m in rest]) == [True] * len(rest)
        assert seen == values[:120]
        assert sorted(m.value for m in rest) == values[120:]
        assert len({m.value for m in rest}) == len(rest)


@pytest.mark.trio
async def test_bad_lease_arguments_get_clear_errors(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(1, "queue", ("--in-memory",))
    with anyio.fail_after(TIMEOUT_S):
        async with skueue.client.api.connect(cluster.addresses[0]) as q:
            with pytest.raises(ValueError, match="lease must be a positive"):
                await q.dequeue(lease=0)
            with pytest.raises(RequestRejected, match="over the limit"):
                await q.dequeue(lease=10**9)
            with pytest.raises(ValueError, match="max_deliveries"):
                await q.dequeue(lease=1, max_deliveries=0)
            with pytest.raises(ValueError, match="prefetch"):
                q.consume(prefetch=0)
            with pytest.raises(TypeError, match="Leased"):
                await q.ack(b"x")  # type: ignore[arg-type]
            assert await q.dequeue() is None  # the connection serves on


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skueue.cli.skueue", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_the_blocking_client_leases_and_consumes(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(2, "queue", ("--in-memory",))
    with skueue.client.blocking.connect_blocking(cluster.addresses[0]) as q:
        q.enqueue_many([b"a", b"b", b"c"], queue="plain")
        a = q.dequeue(queue="plain", lease=30)
        assert isinstance(a, Leased) and a.value == b"a"
        assert q.nack(a) is True
        with q.consume("plain", prefetch=2, lease=30, idle=1.0) as messages:
            got = []
            for msg in messages:
                got.append((msg.value, msg.deliveries))
                assert msg.ack() is True
        assert got == [(b"b", 1), (b"c", 1), (b"a", 2)]


def test_skueue_consume_acks_what_its_command_did_and_nacks_the_rest(
    skueued_cluster: StartCluster,
) -> None:
    """--exec: CMD exits 0 for "ok" messages and 1 for "bad" ones; a bad one is nacked
    until its delivery limit sends it to the dead letters; `skueue dlq` shows it."""
    cluster = skueued_cluster(1, "queue", ("--in-memory",))
    node = cluster.addresses[0]
    with skueue.client.blocking.connect_blocking(node) as q:
        q.enqueue_many([b"ok-1", b"bad", b"ok-2"], queue="cmd")
    done = run_cli(
        "consume", "cmd", "--node", node, "--prefetch", "2", "--max-deliveries", "2",
        "--idle", "1.5", "--exec", 'grep -q "^ok" && test "$SKUEUE_QUEUE" = cmd',
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 acked, 2 nacked" in done.stderr
    listed = run_cli("dlq", "cmd", "--node", node, "--json")
    assert listed.returncode == 0, listed.stderr
    records = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["text"], r["deliveries"], r["reason"]) for r in records] == [("bad", 2, "nack")]
    printed = run_cli("consume", "cmd.dlq", "--node", node, "-n", "1")
    assert printed.returncode == 0 and printed.stdout == "bad\n", printed


@pytest.mark.trio
async def test_acks_that_do_not_wait_are_sent_in_batches_and_flushed_at_the_close(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(2, "queue", ("--in-memory",))
    values = [b"n%03d" % i for i in range(200)]
    with anyio.fail_after(TIMEOUT_S):
        async with skueue.client.api.connect(cluster.addresses[0]) as q:
            await q.enqueue_many(values, queue="fast")
            async with q.consume("fast", prefetch=50, lease=30, idle=1.0) as messages:
                async for msg in messages:
                    assert await msg.ack(wait=False) is None
            assert messages.late_acks == 0
            assert await q.dequeue(queue="fast") is None  # every ack went, none late
            stats = (await q.stats())["queues"]["fast"]
            assert (stats["leased"], stats["acked"]) == (200, 200)
