"""Skueue clusters against Redis lists, in one run, with the same clients and workload.

    .venv/bin/python bench/redis_compare.py [--ops 6000] [--clients 1,4,16] [--nodes 1,2,4]
        [--modes one,batch,inflight] [--batch-clients 8] [--batch 100] [--batch-ops N]
        [--in-flight-clients 16] [--in-flight 8] [--durability none|always|everysec]

Three loads (``--modes``), each half RPUSH/enqueue and half LPOP/dequeue with 100-byte
values, the choices drawn from the same seeds for both systems:

- ``one``: 1, 4 and 16 clients (``--clients``), one operation per round trip;
- ``batch``: 8 clients, 100 operations per round trip: Skueue's ``enqueue_many``/
  ``dequeue_many`` (``q.insert(list)``/``q.remove(100)``) against redis-py pipelines of
  100 RPUSH or 100 LPOP (``transaction=False``: no MULTI);
- ``inflight``: 16 clients, each with 8 requests outstanding.  Skueue keeps them on one
  connection per client; redis-py cannot, so each Redis client runs 8 tasks sharing one
  ``redis.asyncio.Redis``, whose pool opens 8 connections.

Redis is Debian's redis-server, started by this script on a free loopback port (installed
through apt where missing) and driven with redis-py's asyncio client; Skueue clusters of
1, 2 and 4 real ``skueued`` processes are driven with the project's load generator on the
same asyncio loop.  Every row reports ops/s (operations, not requests), p50/p99 latency
per request, and the server side's CPU per operation: redis-server's, or the sum over all
daemons, user + system from ``/proc/<pid>/stat`` over the workload (clock ticks: 10 ms).
Every Skueue row is drained after its workload and its history checked for
linearizability; a failed check makes the script exit 1 after printing everything.  It
prints the command and a Markdown table (with ours/Redis for the same load), the CPU an
idle daemon uses, and writes the same as JSON (``--out``).

``--durability`` makes both systems keep the same promise: ``none`` (the default: Redis
without persistence, Skueue ``--in-memory``), ``always`` (Redis AOF with appendfsync
always, Skueue ``--fsync batch``: an acknowledged operation survives a power loss) or
``everysec`` (appendfsync everysec, Skueue ``--fsync interval=1000``: up to a second lost
to a power loss).  Redis keeps its AOF in a temporary directory, removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from bench_support import (  # noqa: E402
    DURABILITY,
    HOST,
    command_line,
    cpu_seconds,
    ensure_redis,
    start_redis,
    stop_redis,
)

from skueue.check.checker import check  # noqa: E402
from skueue.cluster.launch import LaunchedCluster, launch, skueued_command  # noqa: E402
from skueue.cluster.loadgen import (  # noqa: E402
    LoadConfig,
    drain,
    element,
    lane_name,
    lane_rng,
    percentiles,
    request_sizes,
    run_workload,
    shares,
)

RESULTS = ROOT / "bench" / "results"
INSERT_RATIO = 0.5
MODES = ("one", "batch", "inflight")
COLUMNS = (
    "system", "daemons", "load", "ops/s", "p50 ms", "p99 ms", "CPU µs/op", "client CPU µs/op",
    "ours/Redis", "history",
)  # fmt: skip


@dataclass(frozen=True)
class Load:
    """One row's workload; Redis and Skueue rows with equal loads are compared."""

    mode: str
    clients: int
    ops: int
    batch: int = 1
    in_flight: int = 1

    def describe(self) -> str:
        shape = {
            "one": "1 op per round trip",
            "batch": f"{self.batch} ops per round trip",
            "inflight": f"{self.in_flight} requests in flight each",
        }[self.mode]
        return f"{self.clients} client{'s' if self.clients > 1 else ''}, {shape}"


def loads_of(args: argparse.Namespace) -> list[Load]:
    modes = args.modes.split(",")
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise SystemExit(f"unknown mode(s) {unknown}; choose from {','.join(MODES)}")
    loads: list[Load] = []
    if "one" in modes:
        loads += [Load("one", int(c), args.ops) for c in args.clients.split(",")]
    if "batch" in modes:
        batch_ops = args.batch_ops or args.ops
        loads.append(Load("batch", args.batch_clients, batch_ops, batch=args.batch))
    if "inflight" in modes:
        loads.append(Load("inflight", args.in_flight_clients, args.ops, in_flight=args.in_flight))
    return loads


# -- measuring ---------------------------------------------------------------------------


def row_stats(
    load: Load, seconds: float, latency: dict[str, float], cpu: float, client_cpu: float
) -> dict[str, Any]:
    return {
        **asdict(load),
        "ops_per_second": load.ops / seconds,
        **latency,
        "cpu_us_per_op": cpu * 1e6 / load.ops,
        "client_cpu_us_per_op": client_cpu * 1e6 / load.ops,
    }


def idle_cpu_percent(pid: int, seconds: float) -> float:
    """CPU an idle daemon uses, over a quiet interval."""
    before = cpu_seconds([pid])
    time.sleep(seconds)
    return 100.0 * (cpu_seconds([pid]) - before) / seconds


# -- Redis -------------------------------------------------------------------------------


async def redis_request(r: Any, key: str, values: list[bytes], size: int) -> None:
    """One round trip: RPUSH each of ``values``, or else ``size`` LPOPs.  Several commands
    go as one pipeline without MULTI, as a client batching by hand would send them."""
    if size == 1:
        await (r.rpush(key, values[0]) if values else r.lpop(key))
        return
    pipe = r.pipeline(transaction=False)
    for v in values:
        pipe.rpush(key, v)
    for _ in range(0 if values else size):
        pipe.lpop(key)
    await pipe.execute()


async def redis_load(port: int, pid: int, load: Load, value_bytes: int) -> dict[str, Any]:
    import redis.asyncio as aioredis

    key = f"skueue-bench-{random.random()}"  # a fresh list: no row sees another's elements
    latencies: list[float] = []

    async def lane(r: Any, name: str, count: int) -> None:
        # The seeds of the load generator's lanes: both systems see the same choices.
        rng, seq = lane_rng(load.clients, name), 0
        for size in request_sizes(count, load.batch):
            inserting = rng.random() < INSERT_RATIO
            values = [element(name, seq + k, value_bytes) for k in range(size)] if inserting else []
            t = time.perf_counter()
            await redis_request(r, key, values, size)
            latencies.append((time.perf_counter() - t) * 1000)
            seq += size

    async def one_client(index: int, count: int) -> None:
        # Lanes in flight share the client object; its pool gives each its own connection.
        r = aioredis.Redis(host=HOST, port=port)
        try:
            async with anyio.create_task_group() as tg:
                for k, share in enumerate(shares(count, load.in_flight)):
                    tg.start_soon(lane, r, lane_name(index, k, load.in_flight), share)
        finally:
            await r.aclose()

    cpu_before, start = cpu_seconds([pid]), time.perf_counter()
    client_before = cpu_seconds([os.getpid()])
    async with anyio.create_task_group() as tg:
        for i, share in enumerate(shares(load.ops, load.clients)):
            tg.start_soon(one_client, i, share)
    seconds, cpu = time.perf_counter() - start, cpu_seconds([pid]) - cpu_before
    client_cpu = cpu_seconds([os.getpid()]) - client_before
    return row_stats(load, seconds, percentiles(latencies), cpu, client_cpu)


def measure_redis(
    loads: list[Load], value_bytes: int, durability: str = "none"
) -> list[dict[str, Any]]:
    directory = tempfile.mkdtemp(prefix="redis-bench-")
    redis_proc, port = start_redis(ensure_redis(), durability, directory)
    rows = []
    try:
        for load in loads:
            r = anyio.run(redis_load, port, redis_proc.pid, load, value_bytes, backend="asyncio")
            rows.append({"system": "redis", "nodes": 1, **r, "history": None})
            progress(rows[-1])
    finally:
        stop_redis(redis_proc)
        shutil.rmtree(directory, ignore_errors=True)
    return rows


# -- Skueue ------------------------------------------------------------------------------


async def skueue_load(cluster: LaunchedCluster, load: Load, value_bytes: int) -> dict[str, Any]:
    config = LoadConfig(
        tuple(cluster.addresses),
        load.clients,
        load.ops,
        INSERT_RATIO,
        value_bytes,
        seed=load.clients,
        in_flight=load.in_flight,
        batch=load.batch,
    )
    cpu_before, client_before = cpu_seconds(cluster.pids), cpu_seconds([os.getpid()])
    result = await run_workload(config)
    cpu = cpu_seconds(cluster.pids) - cpu_before
    client_cpu = cpu_seconds([os.getpid()]) - client_before
    # Drained outside the measurement, yet before the check: the next row starts on an
    # empty queue (its history would otherwise remove elements it never inserted), and a
    # drained history must account for every element.
    await drain(config, result)
    verdict = check(result.records, model="linearizable", drained=True)
    return {
        **row_stats(load, result.workload_seconds, result.latency_ms()["all"], cpu, client_cpu),
        "history": verdict.describe(),
        "linearizable": verdict.ok,
        "history_method": verdict.method,
    }


def measure_skueue(
    node_counts: list[int],
    loads: list[Load],
    value_bytes: int,
    idle_seconds: float,
    durability: str = "none",
) -> tuple[list[dict[str, Any]], float | None]:
    rows, idle = [], None
    fsync = DURABILITY[durability][1]
    command = None if fsync is None else [*skueued_command(), "--fsync", fsync]
    for n in node_counts:
        # Durable: one replica, as the README's figures were taken (3 is skueued's default).
        with launch(n, in_memory=fsync is None, command=command,
                    replicas=None if fsync is None else 1) as cluster:
            for load in loads:
                r = anyio.run(skueue_load, cluster, load, value_bytes, backend="asyncio")
                rows.append({"system": "skueue", "nodes": n, **r})
                progress(rows[-1])
            if n == max(node_counts) and idle_seconds > 0:
                time.sleep(1.0)  # let the last run's traffic settle
                idle = idle_cpu_percent(cluster.pids[0], idle_seconds)
    return rows, idle


# -- the report --------------------------------------------------------------------------


def progress(row: dict[str, Any]) -> None:
    print(
        f"{row['system']:6} nodes={row['nodes']} {row['mode']:8} clients={row['clients']:3}: "
        f"{row['ops_per_second']:9.0f} ops/s",
        file=sys.stderr,
    )


def load_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["mode"], row["clients"], row["ops"], row["batch"], row["in_flight"])


def with_ratios(rows: list[dict[str, Any]], loads: list[Load]) -> list[dict[str, Any]]:
    """Rows grouped by load (Redis first, then Skueue by size), each with ours/Redis."""
    redis_rate = {load_key(r): r["ops_per_second"] for r in rows if r["system"] == "redis"}
    order = {load_key(asdict(load)): i for i, load in enumerate(loads)}
    for r in rows:
        r["ratio_vs_redis"] = r["ops_per_second"] / redis_rate[load_key(r)]
    return sorted(rows, key=lambda r: (order[load_key(r)], r["system"] != "redis", r["nodes"]))


def history_cell(row: dict[str, Any]) -> str:
    if row["history"] is None:
        return "–"
    return f"{'ok' if row['linearizable'] else 'VIOLATION'} ({row['history_method']})"


def print_report(
    rows: list[dict[str, Any]], loads: list[Load], machine: str, idle: float | None, args: Any
) -> None:
    print(f"\nMachine: {machine}.\n\n```sh\n{command_line()}\n```\n")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for r in rows:
        load = Load(r["mode"], r["clients"], r["ops"], r["batch"], r["in_flight"])
        print(
            f"| {r['system']} | {r['nodes']} | {load.describe()} | {r['ops_per_second']:.0f} "
            f"| {r['p50']:.2f} | {r['p99']:.2f} | {r['cpu_us_per_op']:.0f} "
            f"| {r['client_cpu_us_per_op']:.0f} | {r['ratio_vs_redis']:.2f} | {history_cell(r)} |"
        )
    print(
        "\nops/s counts operations; latency is per request (a batch is one sample); CPU is "
        "the server side's (redis-server, or all daemons summed) and, apart, the client "
        "side's (this benchmark's one process, which runs every client), over the workload, "
        f"in clock ticks of {1000 / os.sysconf('SC_CLK_TCK'):g} ms per process."
    )
    if any(load.mode == "inflight" for load in loads):
        print(
            f"Redis' in-flight rows use {args.in_flight} pooled connections per client "
            f"(tasks sharing one redis.asyncio.Redis); Skueue's keep {args.in_flight} "
            "requests in flight on one connection per client."
        )
    if idle is not None:
        print(
            f"Idle daemon CPU (one of {max(int(n) for n in args.nodes.split(','))}, over "
            f"{args.idle_seconds:g} s): {idle:.2f}% of a core"
        )
    for r in rows:
        if r["history"] is not None and not r["linearizable"]:
            print(
                f"\nHistory of skueue nodes={r['nodes']} {r['mode']} clients={r['clients']}: "
                f"{r['history']}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=6000, help="operations per row")
    parser.add_argument("--clients", default="1,4,16", help="client counts of the 'one' mode")
    parser.add_argument("--nodes", default="1,2,4", help="cluster sizes to measure")
    parser.add_argument("--modes", default=",".join(MODES), help="loads to measure")
    parser.add_argument("--batch-clients", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100, help="operations per batched request")
    parser.add_argument("--batch-ops", type=int, default=None, help="batch rows' ops (--ops)")
    parser.add_argument("--in-flight-clients", type=int, default=16)
    parser.add_argument("--in-flight", type=int, default=8, help="requests in flight per client")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument(
        "--durability",
        choices=sorted(DURABILITY),
        default="none",
        help="none: both in memory; always: Redis AOF appendfsync always against Skueue "
        "--fsync batch; everysec: appendfsync everysec against --fsync interval=1000",
    )
    parser.add_argument("--out", type=Path, default=None, help="the JSON report")
    args = parser.parse_args()
    if args.out is None:
        suffix = "" if args.durability == "none" else f"_{args.durability}"
        args.out = RESULTS / f"redis_compare{suffix}.json"
    loads = loads_of(args)
    node_counts = [int(n) for n in args.nodes.split(",")]

    rows = measure_redis(loads, args.value_bytes, args.durability)
    skueue_rows, idle = measure_skueue(
        node_counts, loads, args.value_bytes, args.idle_seconds, args.durability
    )
    rows = with_ratios(rows + skueue_rows, loads)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print_report(rows, loads, machine, idle, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    options = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    report = {
        "machine": machine,
        "command": command_line(),
        "options": options,
        "rows": rows,
        "idle_cpu_percent": idle,
    }
    args.out.write_text(json.dumps(report, indent=2))
    if not all(r["linearizable"] for r in skueue_rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
