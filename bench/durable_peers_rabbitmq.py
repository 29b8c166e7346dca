"""bench/durable_peers.py's RabbitMQ row: a quorum queue (fsync before confirm) on a node of
its own, aio-pika producers with publisher confirms, consumers acking each message."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import anyio
from bench_support import HOST
from durable_peers_rows import (
    CpuMeter,
    Phase,
    Workload,
    head,
    make_row,
    progress,
    tally,
    timed_out,
)
from rabbitmq_node import RabbitMQ, measure_on_node, messages_left

from skueue.cluster.loadgen import element, shares

RABBITMQ_QUEUE = "durable-peers"


async def rabbitmq_row(node: RabbitMQ, w: Workload) -> dict:
    import aio_pika

    url = f"amqp://guest:guest@{HOST}:{node.port}/"
    pid = node.beam_pid()
    sent: list[str] = []
    got: list[str] = []
    connections: list[Any] = []

    async def connect() -> Any:
        with anyio.fail_after(30):
            connection = await aio_pika.connect(url)
        connections.append(connection)
        return connection

    try:
        setup = await (await connect()).channel()
        queue_args = {"x-queue-type": "quorum"}
        await setup.queue_delete(RABBITMQ_QUEUE)
        await setup.declare_queue(RABBITMQ_QUEUE, durable=True, arguments=queue_args)

        produce = Phase()

        async def producer(index: int, count: int) -> None:
            channel = await (await connect()).channel(publisher_confirms=True)
            exchange = channel.default_exchange

            async def lane(k: int, part: int) -> None:
                for seq in range(part):
                    body = element(f"p{index}.{k}", seq, w.value_bytes)
                    message = aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
                    t = time.perf_counter()
                    await exchange.publish(message, routing_key=RABBITMQ_QUEUE)  # confirmed
                    produce.latencies.append((time.perf_counter() - t) * 1000)
                    sent.append(head(body))

            async with anyio.create_task_group() as tg:
                for k, part in enumerate(shares(count, w.window)):
                    tg.start_soon(lane, k, part)

        consume = Phase()
        all_in = anyio.Event()
        last = [0.0]

        async def on_message(message: Any) -> None:
            await message.ack()
            got.append(head(message.body))
            if len(got) >= len(sent):
                last[0] = time.perf_counter()
                all_in.set()

        meter = CpuMeter([pid])
        start = time.perf_counter()
        with anyio.fail_after(w.timeout_s):
            async with anyio.create_task_group() as tg:
                for i, share in enumerate(shares(w.messages, w.clients)):
                    tg.start_soon(producer, i, share)
        produce.seconds = time.perf_counter() - start

        consumers = []
        start = time.perf_counter()
        with anyio.move_on_after(w.timeout_s) as scope:
            for _ in range(w.clients):
                channel = await (await connect()).channel()
                await channel.set_qos(prefetch_count=w.window)
                queue = await channel.get_queue(RABBITMQ_QUEUE, ensure=False)
                consumers.append((queue, await queue.consume(on_message)))
            await all_in.wait()
        if scope.cancelled_caught:  # messages missing: the row says how many
            last[0] = time.perf_counter()
            timed_out("rabbitmq", w, len(got), len(sent))
        consume.seconds = last[0] - start
        cpu = meter.used()
        for queue, tag in consumers:
            with anyio.fail_after(30):
                await queue.cancel(tag)
        left = await messages_left(setup, RABBITMQ_QUEUE, w.messages - len(set(got)))
        return make_row(
            "rabbitmq", "always", "confirm", w, produce, consume, cpu, tally(sent, got, left)
        )
    finally:
        for connection in connections:
            with contextlib.suppress(Exception), anyio.fail_after(10):
                await connection.close()


def measure_rabbitmq(w: Workload) -> list[dict]:
    row, server = measure_on_node(rabbitmq_row, w)
    row["server"] = server
    progress(row)
    return [row]
