"""Blocking consumers across kill -9 (issue 12, item 4, with issue 11's durability).

Four durable daemons; four consumers, one per daemon, each looping on a blocking
``dequeue(wait=...)`` of a named queue; one producer enqueues 300 unique elements in small
bursts.  While the consumers wait, the daemon of one of them is killed with SIGKILL and
started again with its data directory: its log holds the waiting dequeue, the replay
ends that wait where the log says, and the consumer's retry gets the outcome of its
first attempt.  In the end every element was received exactly once: nothing lost with the
killed daemon, nothing twice.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import trio

import skueue.client.api
from tests.e2e.daemons import stop
from tests.faults.test_crash_restart import Cluster
from tests.faults.workload import DAEMONS, SEED

ELEMENTS = 300
QUEUE = "jobs:blocking"
WAIT_S = 0.3  # short: many waits end by time, and the log says where
DEADLINE_S = 120.0


@pytest.mark.trio
async def test_blocking_consumers_lose_nothing_when_a_daemon_is_killed(tmp_path: Path) -> None:
    print(f"replay with SKUEUE_FAULT_SEED={SEED}")
    rng = random.Random(SEED)
    cluster = Cluster(tmp_path)
    received: list[bytes] = []
    produced = [f"e{i}".encode() for i in range(ELEMENTS)]
    victim = rng.randrange(DAEMONS)

    async def consumer(i: int) -> None:
        async with skueue.client.api.connect(cluster.addresses[i], request_timeout_s=30) as q:
            while len(received) < ELEMENTS:
                got = await q.dequeue_many(10, queue=QUEUE, wait=WAIT_S)
                received.extend(got)

    async def producer() -> None:
        async with skueue.client.api.connect(cluster.addresses[0]) as q:
            for start in range(0, ELEMENTS, 20):
                await q.enqueue_many(produced[start : start + 20], queue=QUEUE)
                await trio.sleep(rng.uniform(0.1, 0.6))  # the consumers wait in between

    async def fault() -> None:
        await trio.sleep(rng.uniform(1.5, 3.0))  # consumers have waited and been served
        cluster.kill(victim)
        await trio.sleep(rng.uniform(0.05, 0.5))
        await trio.to_thread.run_sync(cluster.restart, victim)

    try:
        cluster.start()
        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as n:
                for i in range(DAEMONS):
                    n.start_soon(consumer, i)
                n.start_soon(fault)
                await trio.sleep(1.0)  # the consumers wait on an empty queue first
                n.start_soon(producer)
        assert sorted(received) == sorted(produced), (
            f"{len(received)} received, {len(set(received))} distinct, "
            f"{len(set(produced) - set(received))} lost"
        )
        logs = cluster.logs()
        assert "bug:" not in logs
        assert "replayed the input log" in logs  # the victim came back through its log
    finally:
        problems = stop(cluster.daemons)
        assert not problems, problems
