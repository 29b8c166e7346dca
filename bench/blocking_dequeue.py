"""Blocking dequeue on real daemons: what waiting consumers cost, and how soon they wake.

    .venv/bin/python bench/blocking_dequeue.py [--daemons 4] [--consumers 8] [--seconds 8]
        [--trials 30]

1. **Cost.** The daemons' CPU (summed, % of one core) over ``--seconds`` of an idle
   cluster, then over the same time with ``--consumers`` clients blocked in
   ``dequeue(wait=...)`` on an empty queue.  Their attempts are patient (they ride the
   tree's cycles and never hurry it), so the two should be close.
2. **Wake-up.** One consumer blocks on the first daemon; ``0.3 s`` later a producer on the
   last daemon enqueues.  Latency from the start of the enqueue to the consumer's answer,
   over ``--trials`` trials (p50, p90, max).

In-memory daemons on free loopback ports, stopped at the end.  A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from redis_compare import cpu_seconds  # noqa: E402

import skueue.client.api as api  # noqa: E402
from skueue.cluster.launch import LaunchedCluster  # noqa: E402

SETTLE_S = 2.0


def cpu_percent(pids: list[int], seconds: float) -> float:
    before = cpu_seconds(pids)
    time.sleep(seconds)
    return 100.0 * (cpu_seconds(pids) - before) / seconds


async def blocked_cpu(
    addresses: list[str], pids: list[int], consumers: int, seconds: float
) -> float:
    async def consumer(i: int) -> None:
        async with api.connect(addresses[i % len(addresses)]) as q:
            await q.dequeue(queue="bench:empty", wait=seconds + 2 * SETTLE_S)

    async with trio.open_nursery() as n:
        for i in range(consumers):
            n.start_soon(consumer, i)
        await trio.sleep(SETTLE_S)
        before = cpu_seconds(pids)
        await trio.sleep(seconds)
        used = 100.0 * (cpu_seconds(pids) - before) / seconds
        n.cancel_scope.cancel()
    return used


async def wake_latencies(addresses: list[str], trials: int) -> list[float]:
    out = []
    async with api.connect(addresses[0]) as c, api.connect(addresses[-1]) as p:
        for i in range(trials):
            value = b"wake-%d" % i
            answered: list[float] = []

            async def consume(value: bytes = value, answered: list[float] = answered) -> None:
                got = await c.dequeue(queue="bench:wake", wait=30)
                assert got == value, (got, value)
                answered.append(trio.current_time())

            async with trio.open_nursery() as n:
                n.start_soon(consume)
                await trio.sleep(0.3)
                start = trio.current_time()
                await p.enqueue(value, queue="bench:wake")
            out.append((answered[0] - start) * 1000)
    return sorted(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--daemons", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args()
    print(
        f"$ .venv/bin/python bench/blocking_dequeue.py --daemons {args.daemons} "
        f"--consumers {args.consumers} --seconds {args.seconds:g} --trials {args.trials}"
    )
    # One replica, as the README's figures were taken (3 is skueued's default).
    with LaunchedCluster(args.daemons, replicas=1) as cluster:
        time.sleep(SETTLE_S)
        idle = cpu_percent(cluster.pids, args.seconds)
        waiting = trio.run(blocked_cpu, cluster.addresses, cluster.pids, args.consumers,
                           args.seconds)  # fmt: skip
        lat = trio.run(wake_latencies, cluster.addresses, args.trials)
    print(
        f"daemons' CPU, summed, % of one core over {args.seconds:g} s: idle {idle:.1f}; "
        f"{args.consumers} consumers blocked on an empty queue {waiting:.1f}"
    )
    print(
        f"enqueue on the last daemon -> blocked dequeue on the first answered: p50 "
        f"{statistics.median(lat):.1f} ms, p90 {lat[int(0.9 * (len(lat) - 1))]:.1f} ms, "
        f"max {lat[-1]:.1f} ms ({len(lat)} trials)"
    )


if __name__ == "__main__":
    main()
