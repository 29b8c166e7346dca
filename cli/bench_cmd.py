"""``skueue bench``: drive a cluster with concurrent clients and report what it did.

Live progress on stderr; the report (ops/s, latency p50/p90/p99, the consistency
verdict of the run's own history) on stdout.  ``--in-flight K`` keeps K requests
outstanding on each client's one connection and ``--batch B`` puts B operations in each
request (enqueue_many/dequeue_many); throughput counts operations, latency is per
request.  ``--history`` keeps the history in the
project's JSON Lines format (wall-clock seconds since the run started); it is written at
the end, through a temporary file, and an existing file is replaced only with ``--force``.
The final drain is checked with the rest but left out of the statistics; its records
carry ``"phase": "drain"``.  ``--queue NAME`` (repeatable) sends every request to one of
these named queues, drawn at random, and ``--priorities P`` makes them with P priority
levels first and gives every enqueue a random level: the history of a priority queue,
for ``skueue analyze`` (its PEI) and the checkers.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from skueue.check.checker import check
from skueue.check.history import write_jsonl
from skueue.cli.args import fail, integer_in, non_negative_int, positive_int, ratio, replica_count
from skueue.cli.client_cmds import EXIT_UNREACHABLE, queue_name, request_timeout
from skueue.cli.nodes import default_node
from skueue.cli.output import AtomicOutput
from skueue.cli.running import run_async
from skueue.client.api import DEFAULT_NODE, DEFAULT_REQUEST_TIMEOUT_S
from skueue.cluster.launch import ClusterError, cpu_seconds, launch
from skueue.cluster.loadgen import LoadConfig, LoadResult, make_queues, run_load
from skueue.core.ops import PRIORITIES_MAX
from skueue.host.address import AddressError, parse_addresses
from skueue.runtime.replica_count import default_replicas


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="load-test a cluster through the real client",
        description="Run a mixed workload from concurrent clients against "
        "running daemons; report throughput, latency and the verdict.",
    )
    p.add_argument(
        "--nodes",
        default=None,
        metavar="ADDR,...",
        help=f"daemons to spread the clients over (default: $SKUEUE_NODE, else {DEFAULT_NODE})",
    )
    p.add_argument(
        "--spawn",
        type=positive_int,
        default=None,
        metavar="N",
        help="start N local skueued processes for this run and stop them after",
    )
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="with --spawn: the daemons keep their input logs in DIR (kept after the run) "
        "(default: a temporary directory, removed after the run)",
    )
    p.add_argument(
        "--in-memory",
        action="store_true",
        help="with --spawn: daemons that keep nothing on disk (default: durable, fsync batch)",
    )
    p.add_argument(
        "--replicas",
        type=replica_count,
        metavar="K",
        help="with --spawn: skueued --replicas K, each process's log on K daemons "
        "(default: skueued's, 3 for 3 durable daemons or more, else 1)",
    )
    p.add_argument(
        "--structure",
        choices=["queue", "stack"],
        default="queue",
        help="with --spawn: what the daemons serve",
    )
    p.add_argument(
        "--clients",
        type=positive_int,
        default=4,
        metavar="C",
        help="concurrent clients, spread round robin over the daemons",
    )
    p.add_argument(
        "--ops",
        type=non_negative_int,
        default=2000,
        metavar="K",
        help="operations in all, shared among the clients (the drain comes on top)",
    )
    p.add_argument(
        "--in-flight",
        dest="in_flight",
        type=positive_int,
        default=1,
        metavar="K",
        help="requests each client keeps outstanding on its one connection",
    )
    p.add_argument(
        "--batch",
        type=positive_int,
        default=1,
        metavar="B",
        help="operations per request: enqueue_many/dequeue_many of B elements "
        "(latency stays per request)",
    )
    p.add_argument(
        "--enqueue-ratio",
        "--push-ratio",
        dest="ratio",
        type=ratio,
        default=0.5,
        metavar="P",
        help="fraction of operations that enqueue (push)",
    )
    p.add_argument(
        "--value-bytes",
        type=positive_int,
        default=100,
        metavar="B",
        help="size of each element in bytes (at least 16, at most the daemon's value limit: "
        "1 MiB unless configured)",
    )
    p.add_argument(
        "--queue",
        "-q",
        dest="queues",
        action="append",
        type=queue_name,
        default=None,
        metavar="NAME",
        help="a named queue for the workload (repeatable: each request picks one at random, "
        "and the drain empties each) (default: the default queue)",
    )
    p.add_argument(
        "--priorities",
        type=integer_in(1, PRIORITIES_MAX, "PRIORITIES_MAX"),
        default=1,
        metavar="P",
        help=f"priority levels (1 to {PRIORITIES_MAX}): each --queue is made with P levels "
        "before the run (one made already must have them), and each enqueue goes to a "
        "random level, 0 the most urgent; needs --queue",
    )
    p.add_argument(
        "--seed", type=int, default=0, metavar="S", help="seed of the clients' random choices"
    )
    p.add_argument(
        "--no-drain", dest="drain", action="store_false", help="do not empty the queue at the end"
    )
    p.add_argument(
        "--timeout",
        type=request_timeout,
        default=DEFAULT_REQUEST_TIMEOUT_S,
        metavar="SECONDS",
        help="give up on a request after this long (the run then fails)",
    )
    p.add_argument(
        "--history",
        metavar="FILE",
        help="write the run's history (JSON Lines) at the end of the run",
    )
    p.add_argument("-f", "--force", action="store_true", help="replace an existing --history file")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(run=run)


def report(result: LoadResult, config: LoadConfig) -> dict[str, Any]:
    records = result.records
    verdict = check(records, model="linearizable", drained=config.drain)
    inserted = sum(1 for r in records if r.op in ("enqueue", "push"))
    removed = sum(1 for r in records if r.op in ("dequeue", "pop") and r.value is not None)
    return {
        "nodes": list(config.nodes),
        "clients": config.clients,
        "in_flight": config.in_flight,
        "batch": config.batch,
        "ops": config.ops,
        "queues": list(config.queues),
        "priorities": config.priorities,
        "requests": len(result.requests),
        "seconds": round(result.workload_seconds, 3),
        "ops_per_second": round(result.ops_per_second, 1),
        "latency_ms": result.latency_ms(),
        "inserted": inserted,
        "removed": removed,
        "drained": result.drained,
        "verdict": verdict.describe(),
        "linearizable": verdict.ok,
    }


def print_report(r: dict[str, Any], out: Any) -> None:
    lat = r["latency_ms"]["all"] if r["latency_ms"] else {}
    print(
        f"{r['ops']} operations from {r['clients']} clients on {len(r['nodes'])} node(s) "
        f"in {r['seconds']} s: {r['ops_per_second']} ops/s",
        file=out,
    )
    print(
        f"{r['in_flight']} request(s) in flight per client, up to {r['batch']} operation(s) "
        f"per request: {r['requests']} requests",
        file=out,
    )
    if lat:
        print(
            f"latency ms per request: p50 {lat['p50']}  p90 {lat['p90']}  p99 {lat['p99']}",
            file=out,
        )
    for op, stats in r["latency_ms"].items():
        if op != "all":
            print(f"  {op:8} p50 {stats['p50']}  p90 {stats['p90']}  p99 {stats['p99']}", file=out)
    if r["queues"]:
        levels = f", {r['priorities']} priority levels each" if r["priorities"] > 1 else ""
        print(f"queues: {', '.join(r['queues'])}{levels}", file=out)
    print(f"inserted {r['inserted']}, removed {r['removed']} (drain: {r['drained']})", file=out)
    print(f"verdict: {r['verdict']}", file=out)


async def run_with_progress(config: LoadConfig, console: Console) -> LoadResult:
    columns = (
        TextColumn("[bold]bench"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("ops"),
        TimeElapsedColumn(),
    )
    made = await make_queues(config)
    if made:
        console.print(f"made {', '.join(made)} with {config.priorities} priority levels")
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("ops", total=config.ops)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        return await run_load(config, update)


def run(args: argparse.Namespace) -> int:
    if args.spawn is not None:
        if args.nodes:
            fail("skueue bench", "--spawn starts its own daemons; leave out --nodes")
        if args.in_memory and args.data_dir:
            fail("skueue bench", "--in-memory and --data-dir exclude each other")
    elif args.in_memory or args.data_dir or args.replicas is not None:
        fail("skueue bench", "--in-memory, --data-dir and --replicas go with --spawn")
    if args.priorities > 1:
        if not args.queues:
            fail("skueue bench", "--priorities needs --queue NAME: the default queue is "
                 "made without levels by its first operation")
        if args.spawn is not None and args.structure == "stack":
            fail("skueue bench", "--priorities: a stack has no priority levels")
    else:
        try:
            nodes = tuple(str(a) for a in parse_addresses(args.nodes or default_node()))
        except AddressError as e:
            fail("skueue bench", str(e))
        if not nodes:
            fail("skueue bench", "no node addresses given")
    # The history file is claimed before anything starts (a bad path or an existing file
    # fails at once) and written only at the end; an interrupted run leaves an old file
    # as it was.
    history = AtomicOutput("skueue bench", args.history, force=args.force) if args.history else None
    try:
        if args.spawn is not None:
            return run_spawned(args, history)
        return bench(load_config(args, nodes, "queue"), args, history)
    finally:
        if history is not None:
            history.discard()


def load_config(args: argparse.Namespace, nodes: tuple[str, ...], structure: str) -> LoadConfig:
    return LoadConfig(
        nodes,
        args.clients,
        args.ops,
        args.ratio,
        max(16, args.value_bytes),
        args.seed,
        args.drain,
        structure,
        args.timeout,
        in_flight=args.in_flight,
        batch=args.batch,
        queues=tuple(dict.fromkeys(args.queues or ())),
        priorities=args.priorities,
    )


def run_spawned(args: argparse.Namespace, history: AtomicOutput | None) -> int:
    console = Console(stderr=True)
    console.print(f"starting {args.spawn} skueued processes on 127.0.0.1 ...")
    try:
        cluster = launch(
            args.spawn,
            structure=args.structure,
            data_dir=args.data_dir,
            in_memory=args.in_memory,
            replicas=args.replicas,
        )
    except ClusterError as e:
        fail("skueue bench", str(e), code=EXIT_UNREACHABLE)
    with cluster:
        console.print("cluster ready: " + ", ".join(cluster.addresses))
        if cluster.data_dir is None:
            console.print("in memory: nothing on disk (--in-memory)")
        else:
            kept = "kept" if args.data_dir else "removed after the run; --data-dir DIR keeps it"
            k = args.replicas or default_replicas(args.spawn)
            replicated = f", each process's log on {k}" if k != 1 else ""
            console.print(f"data directory: {cluster.data_dir} (durable, fsync batch"
                          f"{replicated}; {kept})")
        before = _daemons_cpu_s(cluster.pids)
        code = bench(load_config(args, tuple(cluster.addresses), args.structure), args, history)
        after = _daemons_cpu_s(cluster.pids)
        if before is not None and after is not None:
            # What the daemons spent (user and system), the drain included: the cost
            # behind the throughput where the cores are the limit.
            used = after - before
            console.print(f"daemons' CPU: {used:.2f} s, {used / args.ops * 1e6:.0f} µs "
                          "per operation")  # fmt: skip
        console.print("stopping the cluster ...")
    left = [a for a, alive in cluster.status() if alive]
    if left:
        fail("skueue bench", f"daemons still running after stop: {left}", code=1)
    return code


def _daemons_cpu_s(pids: list[int]) -> float | None:
    """The CPU seconds the daemons used so far (None where /proc cannot say)."""
    used = [cpu_seconds(pid) for pid in pids]
    return None if None in used else sum(u for u in used if u is not None)


def bench(config: LoadConfig, args: argparse.Namespace, history: AtomicOutput | None) -> int:
    console = Console(stderr=True)
    result = run_async("skueue bench", lambda: run_with_progress(config, console))
    r = report(result, config)
    if history is not None:
        history.commit(lambda f: write_jsonl(result.records, f))
    if args.json:
        json.dump(r, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_report(r, sys.stdout)
    return 0 if r["linearizable"] else 1
