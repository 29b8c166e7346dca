"""A durable 4-daemon Skueue cluster against durable Redis, RabbitMQ and NATS JetStream.

    .venv/bin/python bench/durable_peers.py [--messages 30000] [--clients 4] [--window 100]
        [--systems skueue,redis,rabbitmq,nats] [--modes batch,one]
        [--durability always,everysec] [--nats-sync-always]
        [--out bench/results/durable_peers.json]

One workload for every system, on this machine, from one asyncio client process:
``--clients`` producers (default 4) put ``--messages`` messages of 100 bytes (unique
heads, as the load generator writes them), each producer a fixed share; once every
message is acknowledged, as many consumers take them all out again.  A row's ops/s is
(messages produced + messages consumed) / (produce time + consume time).  Latency is
per request, separately for the two phases: publish to confirm (a batch call is one
sample), and a consumer's fetch round trip.  CPU is the server side's only (redis-server,
the RabbitMQ node's beam.smp, nats-server, or the four daemons summed), user + system
from ``/proc/<pid>/stat`` over both phases, per message (clock ticks: 10 ms); the
client's own CPU per message is shown beside it, since the client shares the two cores.
Every client connects inside the measured phase (as the load generator does).  After
the consumers, every system is checked for what it still holds; each row counts
messages lost (produced, never consumed), duplicated (consumed twice) and left, and
Skueue's two phases are checked as one history for linearizability.  The default of
30000 messages takes about two minutes here (twice that when the machine is slow).

Every client keeps ``--window`` (100) messages in flight; what shape that takes:

- RabbitMQ quorum queue (durable, ``x-queue-type: quorum``), aio-pika: each producer
  has its own connection and a channel with publisher confirms, and 100 publishes
  awaiting their confirm; consumers: a channel each with prefetch 100, acking each
  message (basic.ack has no reply: no consume latency).  Quorum queues fsync their
  Raft log before confirming.
- NATS JetStream, stream with WORK_QUEUE retention and file storage, nats-py: each
  producer ``js.publish_async`` with at most 100 PubAcks pending
  (``publish_async_max_pending``); consumers share one durable pull consumer,
  ``fetch(100)``, and plain ``msg.ack()`` each message (fire and forget, no round trip;
  a lost ack means a redelivery after ack_wait, a duplicate, never a loss; the
  consumers flush their connection at the end, and the stream must then hold nothing).
  JetStream's file store does not fsync before its PubAck: it syncs every 2 minutes by
  default (``sync_interval``, which only nats-server 2.10 and later let one set to
  ``always``; Debian's is 2.9), so a power loss may lose acknowledged messages, or bring
  back acked ones.  It is paired with Skueue's ``--fsync batch`` all the same (its
  strongest setting here), labelled with what it really does; ``--nats-sync-always``
  asks a newer nats-server for ``sync_interval: always`` (2.9 refuses to start).
- Redis (AOF ``appendfsync always`` and ``everysec``), redis-py asyncio, a list: mode
  ``batch`` sends pipelines of 100 RPUSH or 100 LPOP (no MULTI); mode ``one`` keeps 100
  single commands in flight per client (100 pooled connections each).
- Skueue, 4 durable ``skueued`` (``--fsync batch``: one fsync per step before any
  reply; ``--fsync interval=1000``), driven by the project's load generator
  (``skueue.cluster.loadgen``), one connection per client, round robin over the
  daemons: mode ``batch`` sends ``enqueue_many``/``dequeue_many`` of 100, one call at a
  time; mode ``one`` one operation per call, with 100 calls in flight per connection
  (the load generator's lanes), as the RabbitMQ and NATS producers keep 100 single
  messages awaiting their confirm.

What is compared with what (the "vs" table prints ratios Skueue/peer):

- Skueue ``--fsync batch`` vs Redis ``appendfsync always`` (same mode: batch calls of
  100 vs pipelines of 100; 100 single calls in flight vs 100 single commands in flight);
- Skueue ``--fsync interval=1000`` vs Redis ``appendfsync everysec`` (same);
- Skueue ``--fsync batch``, both modes, vs RabbitMQ quorum (100 confirms in flight,
  prefetch 100) and vs NATS JetStream (100 PubAcks pending, fetch(100); fsync every
  2 min).

The peers come from Debian (apt-get where missing) and run as the current user on free
loopback ports, their state in a temporary directory removed afterwards; they are
stopped whatever happens (Ctrl-C: exit 130).  A peer that cannot be installed or started
gets one line and the others go on; the exit code is then 1, as it is when a row lost,
duplicated or left messages, or Skueue's history is not linearizable.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import attrs

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from bench_support import (  # noqa: E402
    HOST,
    command_line,
    cpu_seconds,
    ensure_package,
    ensure_redis,
    first_line,
    free_port,
    log_tail,
    start_redis,
    stop_popen,
)
from interrupts import no_interrupt, on_interrupt, run_async, why_failed  # noqa: E402
from rabbitmq_node import RabbitMQ, measure_on_node, messages_left  # noqa: E402

from skueue.check.checker import check  # noqa: E402
from skueue.cluster.launch import LaunchedCluster, launch, skueued_command  # noqa: E402
from skueue.cluster.loadgen import (  # noqa: E402
    LoadConfig,
    LoadResult,
    as_text,
    drain,
    element,
    percentiles,
    run_workload,
    shares,
)

SYSTEMS = ("skueue", "redis", "rabbitmq", "nats")
MODES = ("batch", "one")
DURABILITIES = ("always", "everysec")
DAEMONS = 4
DEFAULT_MESSAGES = 30_000
DEFAULT_OUT = ROOT / "bench" / "results" / "durable_peers.json"
SETTLE_TIMEOUT_S = 10.0

# What each system is told for each durability, and how the table names it.
SKUEUE_FSYNC = {"always": "batch", "everysec": "interval=1000"}
DURABILITY_LABEL = {
    ("skueue", "always"): "--fsync batch",
    ("skueue", "everysec"): "--fsync interval=1000",
    ("redis", "always"): "AOF appendfsync always",
    ("redis", "everysec"): "AOF appendfsync everysec",
    ("rabbitmq", "always"): "quorum queue (fsync before confirm)",
    ("nats", "always"): "JetStream file store (fsync every 2 min)",
}
NATS_SYNC_ALWAYS_LABEL = "JetStream file store (sync_interval always)"
SHAPE = {
    ("skueue", "batch"): "enqueue_many/dequeue_many of {w}, 1 call in flight",
    ("skueue", "one"): "1 op per call, {w} calls in flight",
    ("redis", "batch"): "pipelines of {w} RPUSH / LPOP",
    ("redis", "one"): "1 command per round trip, {w} in flight",
    ("rabbitmq", "confirm"): "{w} confirms in flight; prefetch {w}, ack each",
    ("nats", "confirm"): "publish_async, {w} pending; fetch({w}), ack each",
}


@dataclass(frozen=True)
class Workload:
    """What every row does: the same for every system."""

    messages: int
    clients: int = 4
    window: int = 100
    value_bytes: int = 100
    timeout_s: float = 300.0
    """The bound on each phase (produce, consume)."""
    nats_sync_always: bool = False
    """Start nats-server with ``jetstream { sync_interval: always }`` (2.10 and later)."""


@dataclass
class Phase:
    """One phase as measured: its duration and the latency of each request in ms."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)

    def stats(self) -> dict[str, float] | None:
        return percentiles(self.latencies) if self.latencies else None


def head(value: bytes) -> str:
    """A message's unique head (``p3.41-7``), by which messages are counted."""
    return as_text(value) or ""


def tally(produced: Sequence[str], consumed: Sequence[str], left: int) -> dict[str, int]:
    """Messages produced (acknowledged), consumed, lost, duplicated and left, by head."""
    sent, got = set(produced), set(consumed)
    return {
        "produced": len(produced),
        "consumed": len(consumed),
        "lost": len(sent - got),
        "duplicated": len(consumed) - len(got),
        "unexpected": len(got - sent),
        "left": left,
    }


class CpuMeter:
    """CPU used since it was made: the servers' (``pids``, as redis_compare measures it)
    and this client process's own (every system is driven from it, on the same cores)."""

    def __init__(self, pids: Sequence[int]) -> None:
        self.pids = list(pids)
        self.server = cpu_seconds(self.pids)
        self.client = time.process_time()

    def used(self) -> tuple[float, float]:
        return cpu_seconds(self.pids) - self.server, time.process_time() - self.client


def make_row(
    system: str,
    durability: str,
    mode: str,
    w: Workload,
    produce: Phase,
    consume: Phase,
    cpu: tuple[float, float],
    counts: dict[str, int],
) -> dict[str, Any]:
    seconds = produce.seconds + consume.seconds
    return {
        "system": system,
        "durability": durability,
        "durability_label": DURABILITY_LABEL[(system, durability)],
        "mode": mode,
        "shape": SHAPE[(system, mode)].format(w=w.window),
        "messages": w.messages,
        "clients": w.clients,
        "window": w.window,
        "ops_per_second": (counts["produced"] + counts["consumed"]) / seconds,
        "produce_per_second": counts["produced"] / produce.seconds,
        "consume_per_second": counts["consumed"] / consume.seconds,
        "produce_seconds": produce.seconds,
        "consume_seconds": consume.seconds,
        "produce_latency_ms": produce.stats(),
        "consume_latency_ms": consume.stats(),
        "cpu_us_per_message": cpu[0] * 1e6 / w.messages,
        "client_cpu_us_per_message": cpu[1] * 1e6 / w.messages,
        **counts,
        "history": None,
    }


def timed_out(system: str, w: Workload, got: int, sent: int) -> None:
    print(
        f"{system}: consumers stopped after {w.timeout_s:g} s with {got} of {sent} messages",
        file=sys.stderr,
        flush=True,
    )


def row_ok(row: dict[str, Any]) -> bool:
    counts_ok = row["lost"] == row["duplicated"] == row["unexpected"] == row["left"] == 0
    return counts_ok and row.get("linearizable", True) and row["produced"] == row["messages"]


def progress(row: dict[str, Any]) -> None:
    print(
        f"{row['system']:8} {row['durability']:8} {row['mode']:7}: "
        f"{row['ops_per_second']:8.0f} ops/s  (produce {row['produce_per_second']:.0f}/s, "
        f"consume {row['consume_per_second']:.0f}/s, lost {row['lost']}, "
        f"dup {row['duplicated']}, left {row['left']})",
        file=sys.stderr,
        flush=True,
    )


# -- Skueue ------------------------------------------------------------------------------


def skueue_config(cluster: LaunchedCluster, mode: str, w: Workload, ratio: float) -> LoadConfig:
    batch, in_flight = (w.window, 1) if mode == "batch" else (1, w.window)
    return LoadConfig(
        tuple(cluster.addresses),
        w.clients,
        w.messages,
        ratio,
        w.value_bytes,
        seed=w.clients,
        drain=False,
        in_flight=in_flight,
        batch=batch,
    )


def one_history(produce: LoadResult, consume: LoadResult) -> list[Any]:
    """Both phases as one history: processes renamed apart (each phase names its lanes
    from c0), the consumers' times moved onto the producers' clock."""
    shift = consume.started - produce.started
    return [attrs.evolve(r, process=f"P{r.process}") for r in produce.records] + [
        attrs.evolve(
            r, process=f"C{r.process}", invoke=r.invoke + shift, response=r.response + shift
        )
        for r in consume.records
    ]


async def skueue_row(cluster: LaunchedCluster, durability: str, mode: str, w: Workload) -> dict:
    meter = CpuMeter(cluster.pids)
    with anyio.fail_after(w.timeout_s):
        produce = await run_workload(skueue_config(cluster, mode, w, 1.0))
    consumers = skueue_config(cluster, mode, w, 0.0)
    with anyio.fail_after(w.timeout_s):
        consume = await run_workload(consumers)
    cpu = meter.used()
    # Whatever the consumers left (nothing, unless something is wrong) is drained outside
    # the measurement, so that the next row starts empty and the history is complete.
    with anyio.fail_after(w.timeout_s):
        await drain(consumers, consume)
    sent = [r.value for r in produce.records if r.value is not None]
    got = [r.value for r in consume.records if r.phase != "drain" and r.value is not None]
    row = make_row(
        "skueue",
        durability,
        mode,
        w,
        Phase(produce.workload_seconds, [q.ms for q in produce.requests]),
        Phase(consume.workload_seconds, [q.ms for q in consume.requests]),
        cpu,
        tally(sent, got, consume.drained),
    )
    verdict = check(one_history(produce, consume), model="linearizable", drained=True)
    row.update(
        history=verdict.describe(),
        linearizable=verdict.ok,
        history_method=verdict.method,
        daemons=len(cluster.pids),
    )
    return row


def measure_skueue(durability: str, modes: Sequence[str], w: Workload) -> list[dict]:
    command = [*skueued_command(), "--fsync", SKUEUE_FSYNC[durability]]
    rows = []
    commit = first_line(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], "")
    cluster = launch(DAEMONS, command=command)
    try:
        for mode in modes:
            row = run_async(skueue_row, cluster, durability, mode, w)
            rows.append({**row, "server": f"skueue {commit}"})
            progress(rows[-1])
    finally:
        with no_interrupt():
            cluster.stop()
    return rows


# -- Redis -------------------------------------------------------------------------------


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


# -- RabbitMQ ----------------------------------------------------------------------------

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


# -- NATS JetStream ----------------------------------------------------------------------

NATS_STREAM = "DURABLE_PEERS"
NATS_SUBJECT = "durable-peers.q"
NATS_CONSUMER = "workers"


class Nats:
    def __init__(self, sync_always: bool = False) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="durable-peers-nats-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "server.log"
        self.binary = "nats-server"
        self.sync_always = sync_always

    def start(self) -> None:
        self.binary = binary = ensure_package("nats-server", "nats-server")
        config = []
        if self.sync_always:  # nats-server 2.9 refuses the field: it then fails to start
            (self.dir / "nats.conf").write_text("jetstream { sync_interval: always }\n")
            config = ["-c", str(self.dir / "nats.conf")]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    "-a",
                    HOST,
                    "-p",
                    str(self.port),
                    "-js",
                    "-sd",
                    str(self.dir / "js"),
                    "-P",
                    str(self.dir / "nats.pid"),
                    *config,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited: {log_tail(self.log)}")
            if "Server is ready" in self.log.read_text(errors="replace"):
                return
            time.sleep(0.05)
        raise RuntimeError("nats-server did not start in 30 s")

    def stop(self) -> None:
        if self.proc is not None:
            stop_popen(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


async def nats_row(server: Nats, w: Workload) -> dict:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType

    assert server.proc is not None
    pid = server.proc.pid
    url = f"nats://{HOST}:{server.port}"
    sent: list[str] = []
    got: list[str] = []
    connections: list[Any] = []

    async def connect() -> Any:
        with anyio.fail_after(30):
            nc = await nats.connect(url, allow_reconnect=False)
        connections.append(nc)
        return nc

    try:
        jsm = (await connect()).jetstream()
        await jsm.add_stream(
            name=NATS_STREAM,
            subjects=[NATS_SUBJECT],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
        )
        await jsm.add_consumer(
            NATS_STREAM,
            ConsumerConfig(
                durable_name=NATS_CONSUMER,
                ack_policy=AckPolicy.EXPLICIT,
                max_ack_pending=max(1000, 2 * w.clients * w.window),
            ),
        )

        produce = Phase()
        failed: list[BaseException] = []

        async def producer(index: int, count: int) -> None:
            js = (await connect()).jetstream(publish_async_max_pending=w.window)
            for seq in range(count):
                body = element(f"p{index}", seq, w.value_bytes)
                future = await js.publish_async(NATS_SUBJECT, body)  # the phase bounds any stall
                t = time.perf_counter()

                def done(f: Any, t: float = t, name: str = head(body)) -> None:
                    if f.cancelled() or f.exception() is not None:
                        failed.append(f.exception() or RuntimeError("cancelled"))
                        return
                    produce.latencies.append((time.perf_counter() - t) * 1000)
                    sent.append(name)

                future.add_done_callback(done)
            await js.publish_async_completed()

        consume = Phase()

        async def consumer(count: int) -> None:
            js = (await connect()).jetstream()
            sub = await js.pull_subscribe_bind(durable=NATS_CONSUMER, stream=NATS_STREAM)
            while count > 0:
                t = time.perf_counter()
                try:
                    msgs = await sub.fetch(min(w.window, count), timeout=5)
                except nats.errors.TimeoutError:
                    continue  # bounded by the phase's timeout
                consume.latencies.append((time.perf_counter() - t) * 1000)
                for msg in msgs:
                    await msg.ack()  # plain ack: no reply awaited
                    got.append(head(msg.data))
                count -= len(msgs)

        meter = CpuMeter([pid])
        start = time.perf_counter()
        with anyio.fail_after(w.timeout_s):
            async with anyio.create_task_group() as tg:
                for i, share in enumerate(shares(w.messages, w.clients)):
                    tg.start_soon(producer, i, share)
        produce.seconds = time.perf_counter() - start
        if failed:
            print(f"nats: {len(failed)} publishes failed, e.g. {failed[0]!r}", file=sys.stderr)

        start = time.perf_counter()
        with anyio.move_on_after(w.timeout_s) as scope:
            async with anyio.create_task_group() as tg:
                for share in shares(len(sent), w.clients):
                    tg.start_soon(consumer, share)
        if scope.cancelled_caught:  # messages missing: the row says how many
            timed_out("nats", w, len(got), len(sent))
        with anyio.fail_after(30):
            for nc in connections:
                await nc.flush()  # every ack has reached the server
        consume.seconds = time.perf_counter() - start
        cpu = meter.used()
        # A work queue drops a message once its ack is processed: wait for that to settle.
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while True:
            left = (await jsm.stream_info(NATS_STREAM)).state.messages
            if left == 0 or time.monotonic() > deadline:
                break
            await anyio.sleep(0.1)
        return make_row(
            "nats", "always", "confirm", w, produce, consume, cpu, tally(sent, got, left)
        )
    finally:
        for nc in connections:
            with contextlib.suppress(Exception), anyio.fail_after(10):
                await nc.close()


def measure_nats(w: Workload) -> list[dict]:
    server = Nats(w.nats_sync_always)
    try:
        server.start()
        row = run_async(nats_row, server, w)
        row["server"] = first_line([server.binary, "--version"], "nats-server")
        if w.nats_sync_always:
            row["durability_label"] = NATS_SYNC_ALWAYS_LABEL
        progress(row)
        return [row]
    finally:
        with no_interrupt():
            server.stop()


# -- the plan, the pairs, the report -----------------------------------------------------


def plan(systems: Sequence[str], durabilities: Sequence[str]) -> list[tuple[str, str]]:
    """(system, durability) in running order: each Skueue durability next to its peers,
    so that rows compared with each other run close in time."""
    order = []
    for durability in DURABILITIES:
        if durability not in durabilities:
            continue
        order += [(s, durability) for s in ("skueue", "redis") if s in systems]
        if durability == "always":
            order += [(s, durability) for s in ("rabbitmq", "nats") if s in systems]
    if "always" not in durabilities:  # RabbitMQ and NATS only have one durability
        order += [(s, "always") for s in ("rabbitmq", "nats") if s in systems]
    return order


def pairs(rows: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(Skueue row, peer row) compared: Redis of the same durability and mode; RabbitMQ
    and NATS (one mode each) against Skueue ``--fsync batch`` in every mode."""
    found = []
    for ours in (r for r in rows if r["system"] == "skueue"):
        for peer in (r for r in rows if r["system"] != "skueue"):
            same_redis = peer["system"] == "redis" and peer["mode"] == ours["mode"]
            if peer["durability"] == ours["durability"] and (
                same_redis or peer["system"] in ("rabbitmq", "nats")
            ):
                found.append((ours, peer))
    return found


def comparison(ours: dict[str, Any], peer: dict[str, Any]) -> dict[str, Any]:
    return {
        "skueue": f"{ours['mode']}, {ours['durability_label']}",
        "peer": f"{peer['system']}, {peer['durability_label']}",
        "compares": f"{ours['shape']} vs {peer['shape']}",
        "ops_ratio": ours["ops_per_second"] / peer["ops_per_second"],
        "cpu_ratio": ours["cpu_us_per_message"] / peer["cpu_us_per_message"]
        if peer["cpu_us_per_message"]
        else None,
    }


def latency_cell(stats: dict[str, float] | None) -> str:
    return "–" if stats is None else f"{stats['p50']:.2f} / {stats['p99']:.2f}"


def ratio_cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def counts_cell(row: dict[str, Any]) -> str:
    text = f"{row['lost']}/{row['duplicated']}/{row['left']}"
    return text if row_ok(row) else f"**{text}**"


ROW_COLUMNS = (
    "system",
    "durability",
    "shape (per client)",
    "ops/s",
    "produce msg/s",
    "consume msg/s",
    "produce p50 / p99 ms",
    "consume p50 / p99 ms",
    "CPU µs/msg",
    "client CPU µs/msg",
    "lost/dup/left",
    "history",
)
PAIR_COLUMNS = ("Skueue", "peer", "shapes compared", "ops/s Skueue/peer", "CPU/msg Skueue/peer")


def table(columns: Sequence[str], lines: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(cells) + " |" for cells in lines]
    return "\n".join(out)


def report_text(report: dict[str, Any]) -> str:
    rows, compared = report["rows"], report["comparisons"]
    lines = [
        [
            r["system"],
            r["durability_label"],
            r["shape"],
            f"{r['ops_per_second']:.0f}",
            f"{r['produce_per_second']:.0f}",
            f"{r['consume_per_second']:.0f}",
            latency_cell(r["produce_latency_ms"]),
            latency_cell(r["consume_latency_ms"]),
            f"{r['cpu_us_per_message']:.0f}",
            f"{r['client_cpu_us_per_message']:.0f}",
            counts_cell(r),
            "–"
            if r["history"] is None
            else f"{'ok' if r['linearizable'] else 'VIOLATION'} ({r['history_method']})",
        ]
        for r in rows
    ]
    pair_lines = [
        [
            c["skueue"],
            c["peer"],
            c["compares"],
            ratio_cell(c["ops_ratio"]),
            ratio_cell(c["cpu_ratio"]),
        ]
        for c in compared
    ]
    w = report["workload"]
    parts = [
        f"Machine: {report['machine']}.",
        f"```sh\n{report['command']}\n```",
        f"{w['messages']} messages of {w['value_bytes']} bytes; {w['clients']} producers, "
        f"then {w['clients']} consumers; {w['window']} messages in flight per client. "
        f"Skueue: {DAEMONS} daemons.",
        table(ROW_COLUMNS, lines),
        "ops/s = (produced + consumed) / (produce time + consume time). Latency per "
        "request: publish to confirm (a batch call is one sample), fetch round trip "
        "(RabbitMQ pushes to its consumers: none). CPU: the server side's (Skueue: all "
        "daemons) over both phases, per message, in clock ticks of "
        f"{1000 / os.sysconf('SC_CLK_TCK'):g} ms per process.",
        "NATS JetStream's file store sends its PubAck before any fsync and syncs every 2 "
        "minutes, unless started with sync_interval: always (--nats-sync-always; "
        "nats-server 2.10 or later); its consumers ack with a plain msg.ack(). "
        "RabbitMQ's quorum queue fsyncs before it confirms. "
        "Servers: "
        + (", ".join(sorted({r["server"] for r in rows if r.get("server")})) or "–")
        + ".",
    ]
    if pair_lines:
        parts.append(table(PAIR_COLUMNS, pair_lines))
    if report["failures"]:
        parts.append("\n".join(f"- not measured: {f}" for f in report["failures"]))
    return "\n\n".join(parts)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--messages",
        type=int,
        default=DEFAULT_MESSAGES,
        help="messages per row (produced, then consumed)",
    )
    parser.add_argument("--clients", type=int, default=4, help="producers, then consumers")
    parser.add_argument(
        "--window",
        type=int,
        default=100,
        help="messages in flight per client: batch size, calls in flight, "
        "confirms in flight, prefetch, fetch size",
    )
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--modes", default=",".join(MODES), help="Skueue's and Redis' shapes")
    parser.add_argument(
        "--durability",
        default=",".join(DURABILITIES),
        help="always: Skueue --fsync batch, Redis appendfsync always; "
        "everysec: --fsync interval=1000, appendfsync everysec",
    )
    parser.add_argument(
        "--nats-sync-always",
        action="store_true",
        help="nats-server with sync_interval: always (fsync every write; needs 2.10+)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="bound on each phase, s")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON report")
    args = parser.parse_args(argv)
    for name, allowed in (("systems", SYSTEMS), ("modes", MODES), ("durability", DURABILITIES)):
        chosen = [x for x in getattr(args, name).split(",") if x]
        unknown = sorted(set(chosen) - set(allowed))
        if unknown or not chosen:
            parser.error(f"--{name}: unknown or empty {unknown}; choose from {','.join(allowed)}")
        setattr(args, name, chosen)
    if args.messages < 1 or args.clients < 1 or args.window < 1 or args.value_bytes < 16:
        parser.error("--messages, --clients and --window >= 1, --value-bytes >= 16 are needed")
    return args


def measure(system: str, durability: str, modes: Sequence[str], w: Workload) -> list[dict]:
    if system == "skueue":
        return measure_skueue(durability, modes, w)
    if system == "redis":
        return measure_redis(durability, modes, w)
    if system == "rabbitmq":
        return measure_rabbitmq(w)
    return measure_nats(w)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, on_interrupt)
    w = Workload(args.messages, args.clients, args.window, args.value_bytes, args.timeout,
                 args.nats_sync_always)  # fmt: skip
    print(command_line(), file=sys.stderr, flush=True)
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    for system, durability in plan(args.systems, args.durability):
        try:
            rows += measure(system, durability, args.modes, w)
        except (Exception, SystemExit) as e:  # one peer failing does not stop the others
            why = why_failed(e)
            failures.append(f"{system} ({durability}): {why}")
            print(f"{system} ({durability}) not measured: {why}", file=sys.stderr, flush=True)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    report = {
        "machine": machine,
        "command": command_line(),
        "workload": {
            "messages": w.messages,
            "clients": w.clients,
            "window": w.window,
            "value_bytes": w.value_bytes,
            "daemons": DAEMONS,
        },
        "rows": rows,
        "comparisons": [comparison(a, b) for a, b in pairs(rows)],
        "failures": failures,
    }
    print("\n" + report_text(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if rows and not failures and all(row_ok(r) for r in rows) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # every server was stopped on the way out
        sys.exit(130)
