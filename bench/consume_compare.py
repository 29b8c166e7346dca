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
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from bench_support import command_line  # noqa: E402
from consume_compare_rabbitmq import measure_rabbitmq  # noqa: E402
from consume_compare_report import ratios, report_text, row_ok, versions  # noqa: E402
from consume_compare_skueue import measure_skueue  # noqa: E402
from consume_compare_workload import (  # noqa: E402
    BATCH,
    DAEMONS,
    IDLE_S,
    LEASE_S,
    VALUE_BYTES,
    Config,
)
from interrupts import on_interrupt, why_failed  # noqa: E402

SYSTEMS = ("skueue", "rabbitmq")
DEFAULT_JSON = BENCH / "results" / "consume_compare.json"


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
