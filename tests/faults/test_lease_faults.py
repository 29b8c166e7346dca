"""Leases across crashes, Jepsen-style (issue 12): consumer processes killed with SIGKILL
mid-work, and a daemon that holds leases killed and restarted with its data directory.

- **Consumers die.**  4 durable daemons, 1,200 unique elements, 8 consumer processes
  (``tests/faults/lease_consumer.py``: prefetch 20, a lease far longer than the test);
  half of them are killed with SIGKILL mid-work, then 4 new ones finish the queue.  From
  the consumers' own records: every element was acked (an ack whose answer a killed
  consumer never saw is indeterminate: then a later ack of it, or none, is fine); none
  was acked twice; an element delivered again carries a higher delivery count (never
  the same one twice; one that went into a killed consumer's buffer was delivered there
  unseen), with the reason "closed" (its consumer's connection closed); and the queue
  is empty.
- **The daemon holding leases dies.**  Its leased elements come back when it restarts
  (reason "restart"); the acked ones stay gone; nothing else changes.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import trio

import skueue.client.api
from skueue.client.consumer import Leased
from tests.e2e.daemons import stop
from tests.faults.test_crash_restart import Cluster
from tests.faults.workload import DAEMONS, SEED

ELEMENTS = 1200
CONSUMERS = 8
QUEUE = "jobs:leased"
DEADLINE_S = 150.0
REPO = Path(__file__).resolve().parents[2]


def start_consumer(address: str, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.faults.lease_consumer", address, QUEUE, str(out)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def records(paths: list[Path]) -> tuple[dict[str, list[tuple[int, str]]], dict[str, list[str]]]:
    """Per value: its deliveries (count, reason) in each consumer's order, and the
    outcomes of its acks ("True", "False", or "unknown" for one a kill cut off)."""
    deliveries: dict[str, list[tuple[int, str]]] = defaultdict(list)
    acks: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        pending: set[str] = set()
        for line in path.read_text().splitlines():
            kind, value, *rest = line.split(" ")
            if kind == "got":
                deliveries[value].append((int(rest[0]), rest[1]))
            elif kind == "acking":
                pending.add(value)
            elif kind == "acked" and value in pending:  # a torn last line is no answer
                pending.discard(value)
                acks[value].append(rest[0] if rest else "unknown")
        for value in pending:
            acks[value].append("unknown")
    return deliveries, acks


@pytest.mark.trio
async def test_consumers_killed_mid_work_lose_nothing_and_ack_nothing_twice(
    tmp_path: Path,
) -> None:
    print(f"replay with SKUEUE_FAULT_SEED={SEED}")
    rng = random.Random(SEED)
    cluster = Cluster(tmp_path)
    produced = [f"e{i:05d}" for i in range(ELEMENTS)]
    outs = [tmp_path / f"consumer{i}.log" for i in range(2 * CONSUMERS)]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        cluster.start()
        async with skueue.client.api.connect(cluster.addresses[0]) as q:
            for start in range(0, ELEMENTS, 200):
                await q.enqueue_many(
                    [v.encode() for v in produced[start : start + 200]], queue=QUEUE
                )
        with trio.fail_after(DEADLINE_S):
            for i in range(CONSUMERS):
                procs.append(start_consumer(cluster.addresses[i % DAEMONS], outs[i]))
            await trio.sleep(rng.uniform(1.5, 2.5))  # mid-work
            victims = rng.sample(range(CONSUMERS), CONSUMERS // 2)
            for i in victims:
                procs[i].send_signal(signal.SIGKILL)
            for i in range(CONSUMERS, CONSUMERS + len(victims)):
                procs.append(start_consumer(cluster.addresses[i % DAEMONS], outs[i]))
            for proc in procs:
                await trio.to_thread.run_sync(proc.wait)
        survivors = [p for i, p in enumerate(procs) if i not in victims]
        assert all(p.returncode == 0 for p in survivors), [
            p.stderr.read() for p in survivors if p.stderr and p.returncode
        ]
        deliveries, acks = records([o for o in outs if o.exists()])
        assert sorted(deliveries) == produced, "delivered: not exactly the produced elements"
        for value in produced:
            # Deliveries into a killed consumer's buffer were never handed out, so never
            # written: the counts seen may skip some, but never repeat one.
            counts = [d for d, _ in deliveries[value]]
            assert len(set(counts)) == len(counts), (value, deliveries[value])
            assert max(counts) <= 1 + len(victims), (value, deliveries[value])
            assert all(reason == "closed" for d, reason in deliveries[value] if d > 1), value
            answers = acks[value]
            assert answers.count("True") <= 1, f"{value} acked twice: {answers}"
            assert "True" in answers or "unknown" in answers, f"{value} never acked: {answers}"
        redelivered = sum(1 for v in produced if max(d for d, _ in deliveries[v]) > 1)
        print(f"{redelivered} of {ELEMENTS} elements were delivered again after the kills")
        assert redelivered > 0  # the kills cut work off (prefetched and unacked elements)
        async with skueue.client.api.connect(cluster.addresses[1]) as q:
            assert await q.dequeue(queue=QUEUE) is None  # nothing left behind
        assert "bug:" not in cluster.logs()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        problems = stop(cluster.daemons)
        assert not problems, problems


@pytest.mark.trio
async def test_a_restarted_daemon_returns_the_leases_it_held(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    try:
        cluster.start()
        with trio.fail_after(DEADLINE_S):
            async with skueue.client.api.connect(cluster.addresses[0]) as q:
                await q.enqueue_many([b"%d" % i for i in range(6)])
            async with skueue.client.api.connect(cluster.addresses[1], retry=False) as c:
                held = await c.dequeue_many(4, lease=600)
                assert [m.value for m in held] == [b"0", b"1", b"2", b"3"]
                assert await c.ack_many(held[:2]) == [True, True]
                cluster.kill(1)
            await trio.to_thread.run_sync(cluster.restart, 1)
            async with skueue.client.api.connect(cluster.addresses[2]) as q:
                got: list[Leased] = []
                while len(got) < 4:
                    more = await q.dequeue_many(4, lease=60, wait=5)
                    assert more, f"only {[m.value for m in got]} came back"
                    got += more
                assert sorted((m.value, m.reason) for m in got) == [
                    (b"2", "restart"), (b"3", "restart"), (b"4", ""), (b"5", ""),
                ]  # fmt: skip
                assert await q.ack_many(got) == [True] * 4
                assert await q.dequeue(wait=0.5) is None
        assert "bug:" not in cluster.logs()
    finally:
        problems = stop(cluster.daemons)
        assert not problems, problems
