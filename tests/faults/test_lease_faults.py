"""Leases across crashes, Jepsen-style (issue 12): consumer processes killed with SIGKILL
mid-work, and a daemon that holds leases killed and restarted with its data directory.

- **Consumers die.**  4 durable daemons, 1,200 unique elements, 8 consumer processes
  (``tests/faults/lease_consumer.py``: prefetch 20, a lease far longer than the test);
  half of them are killed with SIGKILL mid-work, then 4 new ones finish the queue.  The
  consumers' own records, and the kills, go to the lease checker
  (:mod:`skueue.check.leases`): every element acked exactly once (an ack whose answer a
  killed consumer never saw is indeterminate) or left in the queue, none held by two
  live leases at once, delivery counts that rise; and the queue is empty at the end.
- **The daemon holding leases dies.**  Its leased elements come back when it restarts
  (reason "restart"); the acked ones stay gone; nothing else changes.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

import skueue.client.api
from skueue.check.history import HistoryError
from skueue.check.leases import LeaseEvent, check_leases, event_from_json
from skueue.client.consumer import Leased
from tests.e2e.daemons import stop
from tests.faults.test_crash_restart import Cluster
from tests.faults.workload import DAEMONS, SEED

ELEMENTS = 1200
CONSUMERS = 8
QUEUE = "jobs:leased"
DEADLINE_S = 150.0
REPO = Path(__file__).resolve().parents[2]


def start_consumer(address: str, name: str, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.faults.lease_consumer", address, QUEUE, name, str(out)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def events_of(paths: list[Path]) -> list[LeaseEvent]:
    """The consumers' records; an ack written twice (before, and with its answer) keeps
    the answer, and a torn last line (the kill came mid-write) is no event."""
    out: dict[tuple[str, str, int, str], LeaseEvent] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            try:
                event = event_from_json(json.loads(line))
            except (json.JSONDecodeError, HistoryError):
                continue
            key = (event.consumer, event.event, event.lease or 0, str(event.invoke))
            out[key] = event
    return list(out.values())


async def until_leased(out: Path, count: int) -> None:
    """Wait until the consumer writing ``out`` has recorded ``count`` leases."""
    while not out.exists() or out.read_text().count('"event": "lease"') < count:
        await trio.sleep(0.05)


@pytest.mark.trio
async def test_consumers_killed_mid_work_lose_nothing_and_ack_nothing_twice(
    tmp_path: Path,
) -> None:
    print(f"replay with SKUEUE_FAULT_SEED={SEED}")
    rng = random.Random(SEED)
    cluster = Cluster(tmp_path)
    produced = [f"e{i:05d}" for i in range(ELEMENTS)]
    outs = [tmp_path / f"consumer{i}.jsonl" for i in range(2 * CONSUMERS)]
    kills: list[LeaseEvent] = []
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
                procs.append(start_consumer(cluster.addresses[i % DAEMONS], f"c{i}", outs[i]))
            victims = rng.sample(range(CONSUMERS), CONSUMERS // 2)
            for i in victims:
                # Mid-work for sure, however loaded the machine: the victim has begun
                # handling messages, so it holds leases (the one in hand, the prefetched).
                await until_leased(outs[i], rng.randint(1, 5))
                kills.append(LeaseEvent(f"c{i}", "close", time.monotonic(), time.monotonic()))
                procs[i].send_signal(signal.SIGKILL)
            for i in range(CONSUMERS, CONSUMERS + len(victims)):
                procs.append(start_consumer(cluster.addresses[i % DAEMONS], f"c{i}", outs[i]))
            for proc in procs:
                await trio.to_thread.run_sync(proc.wait)
        survivors = [p for i, p in enumerate(procs) if i not in victims]
        assert all(p.returncode == 0 for p in survivors), [
            p.stderr.read() for p in survivors if p.stderr and p.returncode
        ]
        async with skueue.client.api.connect(cluster.addresses[1]) as q:
            left = [v.decode() for v in await q.dequeue_many(ELEMENTS, queue=QUEUE)]
        events = [*events_of([o for o in outs if o.exists()]), *kills]
        verdict = check_leases(events, produced, left=left)
        again = sum(1 for e in events if e.event == "lease" and (e.deliveries or 0) > 1)
        print(
            f"{verdict.elements} elements: {verdict.acked} acked, {again} delivered again "
            f"after the kills, {verdict.indeterminate} acked unknown"
        )
        assert verdict.ok, "\n".join(verdict.problems[:20])
        assert not left  # the new consumers finished the queue
        assert again > 0  # the kills cut work off (prefetched, unacked)
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
