"""What bench/consume_compare.py has both systems do: its settings, the drain's count of
messages out (lost, duplicated, left), and the latency run: a producer paced at a fixed
rate whose messages carry their send time, and a consumer that records their arrival."""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from skueue.cluster.loadgen import percentiles

DAEMONS = 4
VALUE_BYTES = 100
BATCH = 100  # enqueue_many size; publishes in flight while filling RabbitMQ
THROUGHPUT_QUEUE = "bench"
LATENCY_QUEUE = "bench-latency"
LEASE_S = 60.0
IDLE_S = 3.0  # a throughput consumer stops after this long without a message
PHASE_TIMEOUT_S = 600.0


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
