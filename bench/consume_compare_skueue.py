"""bench/consume_compare.py's Skueue side: 4 durable ``skueued`` (``--fsync batch``), drained
by leased consumers (each ack awaited, then acks batched), and the paced latency run."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from bench_support import first_line, package_version
from consume_compare_report import progress
from consume_compare_workload import (
    BATCH,
    DAEMONS,
    IDLE_S,
    LATENCY_QUEUE,
    LEASE_S,
    PHASE_TIMEOUT_S,
    THROUGHPUT_QUEUE,
    VALUE_BYTES,
    Arrivals,
    Config,
    counts,
    latency_row,
    paced,
    timed_out,
)
from durable_peers_rows import head
from interrupts import no_interrupt, run_async

import skueue
from skueue.cluster.launch import launch, skueued_command
from skueue.cluster.loadgen import element

ROOT = Path(__file__).resolve().parent.parent


async def skueue_left(address: str, queue: str) -> int:
    """Drain what is left in ``queue`` (nothing, unless something is wrong); its count."""
    left = 0
    async with skueue.connect(address) as q:
        while values := await q.dequeue_many(1000, queue=queue):
            left += len(values)
    return left


async def skueue_throughput(
    addresses: Sequence[str], c: Config, *, wait_acks: bool = True
) -> dict[str, Any]:
    """One drain; ``wait_acks``: each ``await msg.ack()`` waits for the daemon's answer,
    else ``msg.ack(wait=False)`` returns at once and the consumer sends its acks in
    batches (as AMQP's basic.ack, which has no answer)."""
    queue = f"{THROUGHPUT_QUEUE}:{'awaited' if wait_acks else 'batched'}"
    bodies = [element("m", i, VALUE_BYTES) for i in range(c.messages)]
    start = time.perf_counter()
    async with skueue.connect(addresses[0]) as q:
        for first in range(0, len(bodies), BATCH):
            await q.enqueue_many(bodies[first : first + BATCH], queue=queue)
    fill_seconds = time.perf_counter() - start

    got: list[str] = []
    refused = [0]  # acks answered False: the lease had ended, the message went back
    last = [0.0]  # on anyio's clock: the last ack's answer

    async def consumer(address: str) -> None:
        async with (
            skueue.connect(address) as q,
            q.consume(queue, prefetch=c.prefetch, lease=LEASE_S, idle=IDLE_S) as messages,
        ):
            async for msg in messages:
                got.append(head(msg.value))
                if not wait_acks:
                    await msg.ack(wait=False)
                elif not await msg.ack():
                    refused[0] += 1
                else:
                    last[0] = max(last[0], anyio.current_time())
        refused[0] += messages.late_acks
        last[0] = max(last[0], messages.answered_at or 0.0)

    start = anyio.current_time()
    with anyio.move_on_after(PHASE_TIMEOUT_S) as scope:
        async with anyio.create_task_group() as tg:
            for i in range(c.consumers):
                tg.start_soon(consumer, addresses[i % len(addresses)])
    if scope.cancelled_caught:
        timed_out("skueue throughput", len(got), c.messages)
    seconds = (last[0] or anyio.current_time()) - start
    left = await skueue_left(addresses[0], queue)
    return {
        "acks": "awaited" if wait_acks else "batched",
        "fill_per_second": c.messages / fill_seconds,
        "fill_seconds": fill_seconds,
        "consume_per_second": len(set(got)) / seconds,
        "consume_seconds": seconds,
        "acks_refused": refused[0],
        **counts(c.messages, got, left),
    }


async def skueue_latency(producer_at: str, consumer_at: str, c: Config) -> dict[str, Any]:
    arrivals = Arrivals(c.latency_messages)
    ready = anyio.Event()

    async def consumer() -> None:
        async with (
            skueue.connect(consumer_at) as q,
            q.consume(
                LATENCY_QUEUE, prefetch=c.prefetch, lease=LEASE_S, idle=c.latency_idle_s
            ) as messages,
        ):
            ready.set()
            async for msg in messages:
                arrivals.record(msg.value)
                await msg.ack()
                if arrivals.all_in.is_set():
                    break

    async with skueue.connect(producer_at) as producer, anyio.create_task_group() as tg:
        tg.start_soon(consumer)
        await ready.wait()
        await anyio.sleep(0.2)  # the consumer's first (blocking) lease request is out

        async def send(body: bytes) -> None:
            await producer.enqueue(body, queue=LATENCY_QUEUE)

        with anyio.fail_after(c.seconds + PHASE_TIMEOUT_S):
            sending = await paced(send, c)
    if not arrivals.all_in.is_set():
        timed_out("skueue latency", len(arrivals.seqs), c.latency_messages)
    return latency_row(c, arrivals, sending)


async def skueue_run(addresses: Sequence[str], c: Config) -> dict[str, Any]:
    out = {"throughput": await skueue_throughput(addresses, c)}
    progress("skueue", "throughput", out["throughput"])
    out["throughput_batched_acks"] = await skueue_throughput(addresses, c, wait_acks=False)
    progress("skueue", "throughput, acks batched", out["throughput_batched_acks"])
    out["latency"] = await skueue_latency(addresses[0], addresses[-1], c)
    progress("skueue", "latency", out["latency"])
    return out


def measure_skueue(c: Config) -> dict[str, Any]:
    commit = first_line(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], "")
    # One replica, as the README's figures were taken (3 is skueued's default).
    cluster = launch(DAEMONS, command=[*skueued_command(), "--fsync", "batch"], replicas=1)
    try:
        result = run_async(skueue_run, cluster.addresses, c)
    finally:
        with no_interrupt():
            cluster.stop()
    return {
        **result,
        "server": f"skueue {package_version('skueue')} ({commit})",
        "setup": f"{DAEMONS} skueued, --fsync batch",
    }
