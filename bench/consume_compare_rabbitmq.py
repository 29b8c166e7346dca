"""bench/consume_compare.py's RabbitMQ side: a quorum queue filled under publisher
confirms, drained by aio-pika consumers acking each message, and the paced latency run."""

from __future__ import annotations

import time
from typing import Any

import anyio
from consume_compare_report import progress
from consume_compare_workload import (
    BATCH,
    LATENCY_QUEUE,
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
from rabbitmq_node import Rabbit, RabbitMQ, measure_on_node, messages_left, persistent

from skueue.cluster.loadgen import element


async def rabbitmq_throughput(node: Rabbit, c: Config) -> dict[str, Any]:
    setup = await node.channel()
    await node.quorum_queue(setup, THROUGHPUT_QUEUE)
    bodies = [element("m", i, VALUE_BYTES) for i in range(c.messages)]
    exchange = (await node.channel(publisher_confirms=True)).default_exchange

    async def lane(k: int) -> None:
        for body in bodies[k::BATCH]:
            await exchange.publish(persistent(body), routing_key=THROUGHPUT_QUEUE)  # confirmed

    start = time.perf_counter()
    with anyio.fail_after(PHASE_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            for k in range(BATCH):
                tg.start_soon(lane, k)
    fill_seconds = time.perf_counter() - start

    got: list[str] = []
    last = [0.0]
    all_in = anyio.Event()

    async def on_message(message: Any) -> None:
        await message.ack()
        got.append(head(message.body))
        last[0] = time.perf_counter()
        if len(got) >= c.messages:
            all_in.set()

    async def consumer() -> None:
        channel = await node.channel()
        await channel.set_qos(prefetch_count=c.prefetch)
        queue = await channel.get_queue(THROUGHPUT_QUEUE, ensure=False)
        await queue.consume(on_message)

    start = time.perf_counter()
    with anyio.move_on_after(PHASE_TIMEOUT_S) as scope:
        async with anyio.create_task_group() as tg:
            for _ in range(c.consumers):
                tg.start_soon(consumer)
        await all_in.wait()
    if scope.cancelled_caught:
        timed_out("rabbitmq throughput", len(got), c.messages)
    seconds = (last[0] or time.perf_counter()) - start
    await node.close(keep=1)  # the consumers' connections: unacked messages would go back
    left = await messages_left(setup, THROUGHPUT_QUEUE, c.messages - len(set(got)))
    await setup.queue_delete(THROUGHPUT_QUEUE)
    return {
        "fill_per_second": c.messages / fill_seconds,
        "fill_seconds": fill_seconds,
        "consume_per_second": len(set(got)) / seconds,
        "consume_seconds": seconds,
        **counts(c.messages, got, left),
    }


async def rabbitmq_latency(node: Rabbit, c: Config) -> dict[str, Any]:
    setup = await node.channel()
    await node.quorum_queue(setup, LATENCY_QUEUE)
    arrivals = Arrivals(c.latency_messages)

    async def on_message(message: Any) -> None:
        arrivals.record(message.body)
        await message.ack()

    channel = await node.channel()
    await channel.set_qos(prefetch_count=c.prefetch)
    await (await channel.get_queue(LATENCY_QUEUE, ensure=False)).consume(on_message)
    exchange = (await node.channel(publisher_confirms=True)).default_exchange
    await anyio.sleep(0.2)  # as for Skueue

    async def send(body: bytes) -> None:
        await exchange.publish(persistent(body), routing_key=LATENCY_QUEUE)  # confirmed

    with anyio.fail_after(c.seconds + PHASE_TIMEOUT_S):
        sending = await paced(send, c)
    with anyio.move_on_after(c.latency_idle_s):
        await arrivals.all_in.wait()
    if not arrivals.all_in.is_set():
        timed_out("rabbitmq latency", len(arrivals.seqs), c.latency_messages)
    await node.close(keep=1)
    await setup.queue_delete(LATENCY_QUEUE)
    return latency_row(c, arrivals, sending)


async def rabbitmq_run(server: RabbitMQ, c: Config) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for phase, run in (("throughput", rabbitmq_throughput), ("latency", rabbitmq_latency)):
        node = Rabbit(server.port)
        try:
            out[phase] = await run(node, c)
        finally:
            await node.close()
        progress("rabbitmq", phase, out[phase])
    return out


def measure_rabbitmq(c: Config) -> dict[str, Any]:
    result, server = measure_on_node(rabbitmq_run, c)
    return {
        **result,
        "server": server,
        "setup": "quorum queue, persistent messages, publisher confirms",
    }
