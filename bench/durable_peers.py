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
import json
import os
import platform
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from bench_support import command_line  # noqa: E402
from durable_peers_nats import measure_nats  # noqa: E402
from durable_peers_rabbitmq import measure_rabbitmq  # noqa: E402
from durable_peers_redis import measure_redis  # noqa: E402
from durable_peers_report import comparison, pairs, report_text  # noqa: E402
from durable_peers_rows import DAEMONS, Workload, row_ok  # noqa: E402
from durable_peers_skueue import measure_skueue  # noqa: E402
from interrupts import on_interrupt, why_failed  # noqa: E402

SYSTEMS = ("skueue", "redis", "rabbitmq", "nats")
MODES = ("batch", "one")
DURABILITIES = ("always", "everysec")
DEFAULT_MESSAGES = 30_000
DEFAULT_OUT = ROOT / "bench" / "results" / "durable_peers.json"


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
