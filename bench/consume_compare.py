"""Skueue's leased consumer against RabbitMQ's quorum queue: drain throughput and latency.

    .venv/bin/python bench/consume_compare.py [--messages 20000] [--consumers 8]
        [--prefetch 100] [--rate 200] [--seconds 10] [--systems skueue,rabbitmq]
        [--json bench/results/consume_compare.json]

Two measurements per system (issue 12), on this machine, from one asyncio process:

1. Throughput.  ``--messages`` messages of 100 bytes with unique heads are enqueued first
   (not timed against each other: the fill rate is only reported), then ``--consumers``
   consumers drain them concurrently, each with ``--prefetch`` messages prefetched and
   one ack per message.  Consume msg/s = messages / (first consumer connecting .. last
   ack).  Every message is checked to come out exactly once (lost, duplicated) and the
   queue to be empty afterwards (left).

   - Skueue: 4 durable ``skueued`` (``--fsync batch``); the producer calls
     ``enqueue_many`` with 100 messages at a time; the consumers, round robin over the
     daemons, each ``q.consume(queue, prefetch=100, lease=60, idle=3)`` and
     ``await msg.ack()`` per message.  ``idle`` ends a consumer 3 s after its last
     message: that tail is not timed (the phase ends at the last ack).
   - RabbitMQ: a quorum queue (durable, ``x-queue-type: quorum``, fsync before confirm),
     filled with persistent messages under publisher confirms (100 in flight); aio-pika
     consumers, each on its own connection and channel with ``set_qos(prefetch_count=100)``,
     acking every message on its own.

2. Latency.  One producer and one consumer at a steady ``--rate`` for ``--seconds``.
   Every message is its own call (enqueue / publish awaiting its confirm), sent on a
   fixed schedule (a slow call does not hold back the next one), and carries its send
   time (``time.perf_counter_ns()``); the consumer (prefetch ``--prefetch``, ack each)
   records receive time minus send time.  Skueue: producer on daemon 0, consumer on
   daemon 3; RabbitMQ: a quorum queue again.  The send round trip (to the enqueue's
   reply, to the publisher confirm) is reported beside it.

Prints a Markdown table (with Skueue/RabbitMQ ratios) and writes every figure, the
command line, the core count and the versions as JSON (``--json``).  RabbitMQ is
Debian's rabbitmq-server (installed with apt-get where missing), started on free
loopback ports in a temporary directory, as ``bench/durable_peers.py`` does; every
process started here is stopped whatever happens (Ctrl-C: exit 130).  Exit 1 when a
system could not be measured or lost, duplicated or left messages.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from bench_support import command_line, first_line, package_version  # noqa: E402
from durable_peers_rows import head  # noqa: E402
from interrupts import no_interrupt, on_interrupt, run_async, why_failed  # noqa: E402
from rabbitmq_node import Rabbit, RabbitMQ, measure_on_node, messages_left, persistent  # noqa: E402

import skueue  # noqa: E402
from skueue.cluster.launch import launch, skueued_command  # noqa: E402
from skueue.cluster.loadgen import element, percentiles  # noqa: E402

SYSTEMS = ("skueue", "rabbitmq")
DAEMONS = 4
VALUE_BYTES = 100
BATCH = 100  # enqueue_many size; publishes in flight while filling RabbitMQ
THROUGHPUT_QUEUE = "bench"
LATENCY_QUEUE = "bench-latency"
LEASE_S = 60.0
IDLE_S = 3.0  # a throughput consumer stops after this long without a message
PHASE_TIMEOUT_S = 600.0
DEFAULT_JSON = BENCH / "results" / "consume_compare.json"


@dataclass(frozen=True)
class Config:
    messages: int = 20_000
    consumers: int = 8
    prefetch: int = 100
    rate: float = 200.0
    seconds: float = 10.0

    @property
    def latency_messages(self) -> int:
        return max(1, round(self.rate * self.seconds))

    @property
    def latency_idle_s(self) -> float:
        """How long the latency consumer waits for a message before it gives up."""
        return max(5.0, 10.0 / self.rate)


def counts(expected: int, got: Sequence[str], left: int) -> dict[str, int]:
    """Consumed, lost, duplicated and left, by message head."""
    unique = set(got)
    return {
        "consumed": len(got),
        "lost": expected - len(unique),
        "duplicated": len(got) - len(unique),
        "left": left,
    }


def timed_out(what: str, got: int, expected: int) -> None:
    print(f"{what}: stopped with {got} of {expected} messages", file=sys.stderr, flush=True)


# -- latency: the paced producer and the messages' time stamps ---------------------------


def stamped(seq: int) -> bytes:
    """A message carrying its send time: ``seq:perf_counter_ns:`` padded to 100 bytes."""
    text = f"{seq}:{time.perf_counter_ns()}:".encode()
    return text + b"x" * max(0, VALUE_BYTES - len(text))


def unstamp(value: bytes) -> tuple[str, int]:
    seq, sent_ns, _ = value.split(b":", 2)
    return seq.decode(), int(sent_ns)


class Arrivals:
    """What the latency consumer saw: each message's latency in ms, by its sequence."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seqs: list[str] = []
        self.ms: list[float] = []
        self.all_in = anyio.Event()

    def record(self, value: bytes) -> None:
        now = time.perf_counter_ns()
        seq, sent_ns = unstamp(value)
        self.seqs.append(seq)
        self.ms.append((now - sent_ns) / 1e6)
        if len(self.seqs) >= self.expected:
            self.all_in.set()


async def paced(send: Callable[[bytes], Awaitable[Any]], c: Config) -> dict[str, Any]:
    """Send ``c.latency_messages`` messages at ``c.rate`` per second, each its own call
    started on schedule; returns the send round trips and the rate achieved."""
    round_trips: list[float] = []
    failed: list[BaseException] = []

    async def one(seq: int) -> None:
        t = time.perf_counter()
        try:
            await send(stamped(seq))
        except Exception as e:  # counted; the consumer's tally shows it as lost
            failed.append(e)
            return
        round_trips.append((time.perf_counter() - t) * 1000)

    interval = 1.0 / c.rate
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for seq in range(c.latency_messages):
            delay = start + seq * interval - time.perf_counter()
            if delay > 0:
                await anyio.sleep(delay)
            tg.start_soon(one, seq)
        scheduled = time.perf_counter() - start
    if failed:
        print(f"{len(failed)} sends failed, e.g. {failed[0]!r}", file=sys.stderr, flush=True)
    return {
        "sent": len(round_trips),
        "send_failed": len(failed),
        "send_rate": c.latency_messages / scheduled if scheduled > 0 else None,
        "send_round_trip_ms": percentiles(round_trips) if round_trips else None,
    }


def latency_row(c: Config, arrivals: Arrivals, sending: dict[str, Any]) -> dict[str, Any]:
    unique = set(arrivals.seqs)
    return {
        "messages": c.latency_messages,
        "rate": c.rate,
        "seconds": c.seconds,
        **sending,
        "received": len(arrivals.seqs),
        "lost": c.latency_messages - len(unique),
        "duplicated": len(arrivals.seqs) - len(unique),
        "latency_ms": percentiles(arrivals.ms) if arrivals.ms else None,
    }


# -- Skueue ------------------------------------------------------------------------------


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
    cluster = launch(DAEMONS, command=[*skueued_command(), "--fsync", "batch"])
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


# -- RabbitMQ ----------------------------------------------------------------------------


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


# -- the report --------------------------------------------------------------------------


def progress(system: str, phase: str, row: dict[str, Any]) -> None:
    if phase.startswith("throughput"):
        text = (
            f"{row['consume_per_second']:.0f} msg/s consumed (fill {row['fill_per_second']:.0f}"
            f"/s); lost {row['lost']}, dup {row['duplicated']}, left {row['left']}"
        )
    else:
        ms = row["latency_ms"] or {}
        text = (
            f"p50 {ms.get('p50', float('nan')):.2f} ms, p99 {ms.get('p99', float('nan')):.2f} "
            f"ms at {row['send_rate'] or 0:.0f} msg/s; lost {row['lost']}, "
            f"dup {row['duplicated']}"
        )
    print(f"{system:8} {phase:10}: {text}", file=sys.stderr, flush=True)


def row_ok(result: dict[str, Any]) -> bool:
    lat = result.get("latency")
    drains = [
        result.get("throughput"),
        *([result["throughput_batched_acks"]] if "throughput_batched_acks" in result else []),
    ]
    return (
        all(t is not None for t in drains)
        and lat is not None
        and all(
            t["lost"] == t["duplicated"] == t["left"] == t.get("acks_refused", 0) == 0
            for t in drains
        )  # type: ignore[index]
        and lat["lost"] == lat["duplicated"] == lat["send_failed"] == 0
    )


def get(result: dict[str, Any] | None, *path: str) -> float | None:
    value: Any = result
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    paths = {
        "consume_per_second": ("throughput", "consume_per_second"),
        "latency_p50_ms": ("latency", "latency_ms", "p50"),
        "latency_p99_ms": ("latency", "latency_ms", "p99"),
    }
    out: dict[str, float | None] = {}
    for name, path in paths.items():
        ours, theirs = get(results.get("skueue"), *path), get(results.get("rabbitmq"), *path)
        out[name] = ours / theirs if ours is not None and theirs else None
    # RabbitMQ's acks have no answer: its one drain is the peer of both of Skueue's.
    ours = get(results.get("skueue"), "throughput_batched_acks", "consume_per_second")
    theirs = get(results.get("rabbitmq"), "throughput", "consume_per_second")
    out["consume_per_second_batched_acks"] = ours / theirs if ours is not None and theirs else None
    return out


def report_text(report: dict[str, Any]) -> str:
    c, results = report["config"], report["results"]
    sk, rb = results.get("skueue"), results.get("rabbitmq")

    def number(value: float | None, digits: int = 0) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    def p50_p99(result: dict[str, Any] | None, *path: str) -> str:
        return " / ".join(number(get(result, *path, p), 2) for p in ("p50", "p99"))

    def tally(result: dict[str, Any] | None, phase: str, names: Sequence[str]) -> str:
        row = get(result, phase)
        return "–" if not isinstance(row, dict) else "/".join(str(row[n]) for n in names)

    r = report["ratios"]
    lines = [
        (
            f"consume msg/s ({c['messages']} msgs, {c['consumers']} consumers, "
            f"prefetch {c['prefetch']}, each ack awaited)",
            number(get(sk, "throughput", "consume_per_second")),
            number(get(rb, "throughput", "consume_per_second")),
            number(r["consume_per_second"], 2),
        ),
        (
            "... Skueue's acks batched (msg.ack(wait=False); AMQP's basic.ack has no answer)",
            number(get(sk, "throughput_batched_acks", "consume_per_second")),
            number(get(rb, "throughput", "consume_per_second")),
            number(r["consume_per_second_batched_acks"], 2),
        ),
        (
            "fill msg/s (before the drain, not compared)",
            number(get(sk, "throughput", "fill_per_second")),
            number(get(rb, "throughput", "fill_per_second")),
            "",
        ),
        (
            "drain lost/dup/left",
            tally(sk, "throughput", ("lost", "duplicated", "left")),
            tally(rb, "throughput", ("lost", "duplicated", "left")),
            "",
        ),
        (
            f"latency p50 ms ({c['rate']:g} msg/s for {c['seconds']:g} s)",
            number(get(sk, "latency", "latency_ms", "p50"), 2),
            number(get(rb, "latency", "latency_ms", "p50"), 2),
            number(r["latency_p50_ms"], 2),
        ),
        (
            "latency p99 ms",
            number(get(sk, "latency", "latency_ms", "p99"), 2),
            number(get(rb, "latency", "latency_ms", "p99"), 2),
            number(r["latency_p99_ms"], 2),
        ),
        (
            "send round trip p50 / p99 ms",
            p50_p99(sk, "latency", "send_round_trip_ms"),
            p50_p99(rb, "latency", "send_round_trip_ms"),
            "",
        ),
        (
            "latency lost/dup",
            tally(sk, "latency", ("lost", "duplicated")),
            tally(rb, "latency", ("lost", "duplicated")),
            "",
        ),
    ]
    table = ["| | Skueue | RabbitMQ | Skueue/RabbitMQ |", "|---|---|---|---|"]
    table += ["| " + " | ".join(cells) + " |" for cells in lines]
    setups = "; ".join(
        f"{name}: {res['server']}, {res['setup']}" for name, res in results.items() if res
    )
    parts = [
        f"Machine: {report['machine']['description']}.",
        f"```sh\n{report['command']}\n```",
        "\n".join(table),
        f"{setups}." if setups else "",
    ]
    if report["failures"]:
        parts.append("\n".join(f"- not measured: {f}" for f in report["failures"]))
    return "\n\n".join(p for p in parts if p)


def versions(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    found = {"python": platform.python_version()}
    found.update({p: package_version(p) for p in ("skueue", "anyio", "aio-pika", "aiormq")})
    found.update({f"{name}_server": res["server"] for name, res in results.items()})
    return found


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=Config.messages, help="drained, each")
    parser.add_argument("--consumers", type=int, default=Config.consumers)
    parser.add_argument("--prefetch", type=int, default=Config.prefetch)
    parser.add_argument("--rate", type=float, default=Config.rate, help="latency: msg/s")
    parser.add_argument("--seconds", type=float, default=Config.seconds, help="latency: s")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="the JSON report")
    args = parser.parse_args(argv)
    chosen = [s for s in args.systems.split(",") if s]
    if not chosen or set(chosen) - set(SYSTEMS):
        parser.error(f"--systems: choose from {','.join(SYSTEMS)}")
    args.systems = [s for s in SYSTEMS if s in chosen]
    if min(args.messages, args.consumers, args.prefetch) < 1:
        parser.error("--messages, --consumers and --prefetch must be at least 1")
    if not (args.rate > 0 and args.seconds > 0):
        parser.error("--rate and --seconds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, on_interrupt)  # cancels the measurement; then exit 130
    c = Config(args.messages, args.consumers, args.prefetch, args.rate, args.seconds)
    print(command_line(), file=sys.stderr, flush=True)
    measure = {"skueue": measure_skueue, "rabbitmq": measure_rabbitmq}
    results: dict[str, dict[str, Any]] = {}
    failures: list[str] = []
    for system in args.systems:
        try:
            results[system] = measure[system](c)
        except (Exception, SystemExit) as e:  # one system failing does not stop the other
            why = why_failed(e)
            failures.append(f"{system}: {why}")
            print(f"{system} not measured: {why}", file=sys.stderr, flush=True)
    cores = os.cpu_count()
    report = {
        "command": command_line(),
        "machine": {
            "description": f"{platform.machine()}, {cores} cores, Python "
            f"{platform.python_version()}",
            "cores": cores,
            "usable_cores": len(os.sched_getaffinity(0)),
            "platform": platform.platform(),
        },
        "versions": versions(results),
        "config": {
            **asdict(c),
            "value_bytes": VALUE_BYTES,
            "daemons": DAEMONS,
            "fill_batch": BATCH,
            "lease_s": LEASE_S,
            "idle_s": IDLE_S,
        },
        "results": results,
        "ratios": ratios(results),
        "failures": failures,
    }
    print("\n" + report_text(report))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    ok = len(results) == len(args.systems) and all(row_ok(r) for r in results.values())
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # every process started here was stopped on the way out
        sys.exit(130)
