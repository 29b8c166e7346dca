"""bench/durable_peers.py's Redis rows: a durable redis-server (AOF, ``appendfsync always``
or ``everysec``) of its own, driven by redis-py's asyncio client, a list as the queue."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from bench_support import HOST, ensure_redis, first_line, start_redis, stop_popen
from durable_peers_rows import CpuMeter, Phase, Workload, head, make_row, progress, tally
from interrupts import no_interrupt, run_async

from skueue.cluster.loadgen import element, shares


async def redis_row(port: int, pid: int, durability: str, mode: str, w: Workload) -> dict:
    import redis.asyncio as aioredis

    key = f"durable-peers-{durability}-{mode}"
    sent: list[str] = []
    got: list[str] = []
    size, lanes = (w.window, 1) if mode == "batch" else (1, w.window)

    async def produce_lane(r: Any, name: str, count: int, phase: Phase) -> None:
        for first in range(0, count, size):
            values = [
                element(name, s, w.value_bytes) for s in range(first, min(count, first + size))
            ]
            t = time.perf_counter()
            if len(values) == 1:
                await r.rpush(key, values[0])
            else:
                pipe = r.pipeline(transaction=False)
                for v in values:
                    pipe.rpush(key, v)
                await pipe.execute()
            phase.latencies.append((time.perf_counter() - t) * 1000)
            sent.extend(head(v) for v in values)

    async def consume_lane(r: Any, name: str, count: int, phase: Phase) -> None:
        for first in range(0, count, size):
            n = min(size, count - first)
            t = time.perf_counter()
            if n == 1:
                values = [await r.lpop(key)]
            else:
                pipe = r.pipeline(transaction=False)
                for _ in range(n):
                    pipe.lpop(key)
                values = await pipe.execute()
            phase.latencies.append((time.perf_counter() - t) * 1000)
            got.extend(head(v) for v in values if v is not None)

    async def run(lane: Callable[..., Any], prefix: str) -> Phase:
        phase = Phase()
        clients = [
            aioredis.Redis(host=HOST, port=port, max_connections=lanes) for _ in range(w.clients)
        ]
        start = time.perf_counter()
        try:
            with anyio.fail_after(w.timeout_s):
                async with anyio.create_task_group() as tg:
                    for i, share in enumerate(shares(w.messages, w.clients)):
                        for k, part in enumerate(shares(share, lanes)):
                            tg.start_soon(lane, clients[i], f"{prefix}{i}.{k}", part, phase)
            phase.seconds = time.perf_counter() - start
        finally:
            for c in clients:
                await c.aclose()
        return phase

    meter = CpuMeter([pid])
    produce = await run(produce_lane, "p")
    consume = await run(consume_lane, "c")
    cpu = meter.used()
    r = aioredis.Redis(host=HOST, port=port)
    try:
        left = int(await r.llen(key))
        await r.delete(key)
    finally:
        await r.aclose()
    return make_row("redis", durability, mode, w, produce, consume, cpu, tally(sent, got, left))


def measure_redis(durability: str, modes: Sequence[str], w: Workload) -> list[dict]:
    directory = tempfile.mkdtemp(prefix="durable-peers-redis-")
    rows = []
    try:
        binary = ensure_redis()
        proc, port = start_redis(binary, durability, directory)
        try:
            for mode in modes:
                row = run_async(redis_row, port, proc.pid, durability, mode, w)
                version = first_line([binary, "--version"], "Redis server")
                rows.append({**row, "server": " ".join(version.split()[:3])})
                progress(rows[-1])
        finally:
            with no_interrupt():
                stop_popen(proc)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return rows
