"""One row of bench/durable_peers.py: the workload every system runs, what each phase
measured, the messages counted by their heads, and the row as the report keeps it.

A row is a plain dict (it goes to JSON as is); :func:`make_row` builds every system's the
same way, so that rows of different systems compare.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench_support import cpu_seconds

from skueue.cluster.loadgen import as_text, percentiles

DAEMONS = 4

# How the table names each system's durability, and the shape each mode gives a client.
DURABILITY_LABEL = {
    ("skueue", "always"): "--fsync batch",
    ("skueue", "everysec"): "--fsync interval=1000",
    ("redis", "always"): "AOF appendfsync always",
    ("redis", "everysec"): "AOF appendfsync everysec",
    ("rabbitmq", "always"): "quorum queue (fsync before confirm)",
    ("nats", "always"): "JetStream file store (fsync every 2 min)",
}
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
