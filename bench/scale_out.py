"""Scale-out: Skueue clusters of 1, 2, 4, 8, ... daemons against one Redis core (issue 30).

    .venv/bin/python bench/scale_out.py [--nodes 1,2,4] [--seconds 6] [--load-procs N]
        [--modes one,batch] [--durable-nodes N,...] [--pin auto|yes|no]
        [--redis-server PATH | --no-redis] [--out bench/results/scale_out.json]
    .venv/bin/python bench/scale_out.py --replot FILE.json   # table, goals, plot again

Every row runs ``--seconds`` of load from the same ``--load-procs`` load processes
(bench/scale_out_load.py), then stops by itself:

- one at a time: each process runs ``--clients`` clients (16) with ``--in-flight`` (2)
  requests in flight each, every lane alternating enqueue(100 bytes) and dequeue();
- batched: ``--batch-clients`` (4) per process, one request in flight each, alternating
  enqueue_many(100) and dequeue_many(100).

against, in turn: Redis 7 (``--redis-server``, else Debian's, installed through apt
where missing) without persistence; N in-memory ``skueued`` for each N of ``--nodes``
(started with skueue.cluster.launch, clients round robin over them); then, for each N of
``--durable-nodes`` (default: the largest N with a core of its own), Skueue with
``--fsync batch`` in a data directory under ``--data-root``, and Redis with appendfsync
always.  Redis runs alone, on the core daemon 0 gets.

Placement (``--pin auto``): on a machine with cores for the load processes and at least
two daemons, each load process gets a core of its own (the last cores, the same for
every row) and the daemons the others, one each while they last (a row with more
daemons than that shares them, and says so); Redis takes daemon 0's core.  Pinning acts
like ``taskset -a -p -c``.  With fewer cores nothing is pinned, and the report says so.

Per row: ops/s (operations, not requests), the cluster's CPU per operation (the daemons'
or redis-server's user + system time from /proc/PID/stat over the row), the load
processes' CPU per operation, cores busy (cluster CPU over the row's time), p50/p99
latency per request (a batch is one sample), and for Skueue the history's verdict: every
load process records its lanes on CLOCK_MONOTONIC (shared by all processes), the parent
merges them, drains the queue on the same clock and checks the whole with the
linearizability checker.  Then each goal of issue 30 with its figure, met or not; a JSON
report (``--out``) and a PNG beside it (throughput and CPU per operation against N; Redis
as lines; skipped with a note where matplotlib is missing).  Exit 1 if a row failed or a
history is not linearizable; Ctrl-C stops everything it started, quietly, exit 130.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import queue
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

import scale_out_load  # noqa: E402
import scale_out_report  # noqa: E402
from bench_support import (  # noqa: E402
    command_line,
    cpu_seconds,
    describe_machine,
    ensure_redis,
    fs_type,
    pin,
    start_redis,
    stop_redis,
)
from scale_out_load import Job, LoadReport  # noqa: E402

from skueue.check.checker import check  # noqa: E402
from skueue.cluster.launch import LaunchedCluster, launch, skueued_command  # noqa: E402
from skueue.cluster.loadgen import LoadConfig, LoadResult, drain, percentiles  # noqa: E402

RESULTS = ROOT / "bench" / "results"
MODES = ("one", "batch")
NODE_STEPS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
LOAD_PROCS_MAX = 8
# The start is set this far ahead of the moment every load process is ready, so that
# each is asleep waiting for it, not still being told.
START_AHEAD_S = 0.3
# A row's load processes get this long past its end to report back.
REPORT_GRACE_S = scale_out_load.REQUEST_TIMEOUT_S + 30.0


# -- placement ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Which cores the daemons, Redis and the load processes run on (None: unpinned)."""

    pinned: bool
    cores: tuple[int, ...]
    daemon_cores: tuple[int, ...]
    load_cores: tuple[int, ...]
    summary: str

    def daemon(self, i: int) -> tuple[int, ...] | None:
        return (self.daemon_cores[i % len(self.daemon_cores)],) if self.pinned else None

    def load(self, j: int) -> tuple[int, ...] | None:
        return (self.load_cores[j % len(self.load_cores)],) if self.pinned else None

    def placement(self, n: int) -> str:
        """How a row of ``n`` daemons (Redis: 1) is placed, for the table."""
        if not self.pinned:
            return "unpinned"
        if n <= len(self.daemon_cores):
            return "own cores"
        return f"{n} on {len(self.daemon_cores)} cores"


def plan_layout(cores: Sequence[int], load_procs: int, pin_mode: str) -> Layout:
    cores = tuple(sorted(cores))
    fits = len(cores) >= load_procs + 2
    if pin_mode == "no" or (pin_mode == "auto" and not fits):
        procs = f"{load_procs} load process{'es' if load_procs > 1 else ''}"
        why = "--pin no" if pin_mode == "no" else (
            f"{len(cores)} cores cannot give {procs} and two daemons a core each"
        )  # fmt: skip
        summary = f"UNPINNED ({why}): daemons, Redis and load share every core"
        return Layout(False, cores, cores, cores, summary)
    if not fits:
        raise SystemExit(
            f"--pin yes: {len(cores)} cores are too few for {load_procs} load processes and "
            "two daemons (use --pin no or fewer --load-procs)"
        )
    daemon_cores, load_cores = cores[: len(cores) - load_procs], cores[len(cores) - load_procs :]
    summary = (
        f"pinned: daemons on cores {span(daemon_cores)} (one each), Redis on core "
        f"{daemon_cores[0]}, {load_procs} load processes on cores {span(load_cores)} (one each)"
    )
    return Layout(True, cores, daemon_cores, load_cores, summary)


def span(cores: Sequence[int]) -> str:
    contiguous = list(cores) == list(range(cores[0], cores[0] + len(cores)))
    return f"{cores[0]}-{cores[-1]}" if contiguous and len(cores) > 1 else ",".join(map(str, cores))


# -- one row -----------------------------------------------------------------------------


class LoadPool:
    """The load processes, started once (spawned, so nothing of the parent's state comes
    along) and given one :class:`Job` each per row."""

    def __init__(self, procs: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.procs = procs
        self.to_parent = ctx.Queue()
        self.from_parent = ctx.Queue()
        self.pool = ctx.Pool(
            procs, scale_out_load.init, (self.to_parent, self.from_parent), maxtasksperchild=None
        )
        self.rows = 0

    def close(self) -> None:
        self.pool.terminate()
        self.pool.join()

    def wait_for(self, step: str, row: int, count: int, timeout_s: float) -> None:
        """Until ``count`` processes said ``step`` for ``row`` (other rows' words dropped)."""
        deadline, heard = time.monotonic() + timeout_s, 0
        while heard < count:
            try:
                said, their_row, _ = self.to_parent.get(
                    True, max(0.01, deadline - time.monotonic())
                )
            except queue.Empty:
                raise SystemExit(f"load processes: {count - heard} never said {step!r}") from None
            heard += said == step and their_row == row

    def run(self, jobs: list[Job], server_pids: Sequence[int]) -> dict[str, Any]:
        """One row: every job at once from a common start; the servers' CPU over it."""
        row = jobs[0].row
        pending = [self.pool.apply_async(scale_out_load.run, (job,)) for job in jobs]
        self.wait_for("ready", row, len(jobs), scale_out_load.READY_TIMEOUT_S + 30)
        start = time.monotonic() + START_AHEAD_S
        for _ in jobs:
            self.from_parent.put((row, start))
        time.sleep(max(0.0, start - time.monotonic()))
        cpu_before = cpu_seconds(server_pids)
        self.wait_for("done", row, len(jobs), jobs[0].seconds + REPORT_GRACE_S)
        cpu = cpu_seconds(server_pids) - cpu_before
        window = time.monotonic() - start
        reports: list[LoadReport] = [p.get(REPORT_GRACE_S) for p in pending]
        errors = [f"load process {r.index}: {r.error}" for r in reports if r.error]
        ops = sum(r.ops for r in reports)
        if errors or not ops:
            return {"error": "; ".join(errors) or "no operation completed", "reports": reports}
        seconds = max(r.end for r in reports)
        return {
            "start": start,
            "seconds": seconds,
            "ops": ops,
            "ops_per_second": ops / seconds,
            "cpu_us_per_op": cpu * 1e6 / ops,
            "client_cpu_us_per_op": sum(r.cpu_s for r in reports) * 1e6 / ops,
            "cores_busy": cpu / window,
            "latency_ms": percentiles([x for r in reports for x in r.latencies_ms]),
            "reports": reports,
        }


@dataclass(frozen=True)
class Shape:
    """The load of one mode, the same for every row of that mode."""

    mode: str
    clients: int
    in_flight: int
    batch: int


def shapes(args: argparse.Namespace) -> list[Shape]:
    table = {
        "one": Shape("one", args.clients, args.in_flight, 1),
        "batch": Shape("batch", args.batch_clients, 1, args.batch),
    }
    return [table[m] for m in args.modes]


def jobs_for(
    pool: LoadPool, system: str, shape: Shape, addresses: list[str], args: Any, layout: Layout
) -> list[Job]:
    pool.rows += 1
    return [
        Job(
            pool.rows,
            system,
            shape.mode,
            j,
            tuple(addresses),
            shape.clients,
            shape.in_flight,
            shape.batch,
            args.value_bytes,
            args.seconds,
            layout.load(j),
            redis_key=f"scale-out-{pool.rows}",
        )  # fmt: skip
        for j in range(pool.procs)
    ]


def row_of(
    system: str,
    nodes: int,
    durable: bool,
    shape: Shape,
    got: dict[str, Any],
    layout: Layout,
    args: Any,
) -> dict[str, Any]:
    """A measured row as the report keeps it (the load processes' reports left out)."""
    row = {
        "system": system, "nodes": nodes, "durable": durable, **asdict(shape),
        "load_procs": args.load_procs, "placement": layout.placement(nodes),
        **{k: v for k, v in got.items() if k not in ("reports", "start")},
    }  # fmt: skip
    print(
        f"{system:6} {nodes:2} {'durable' if durable else 'memory':7} {shape.mode:5}: "
        + (
            f"FAILED: {got['error']}" if "error" in got else f"{got['ops_per_second']:10,.0f} ops/s"
        ),
        file=sys.stderr,
        flush=True,
    )
    return row


def verdict_of(cluster: LaunchedCluster, got: dict[str, Any]) -> dict[str, Any]:
    """The row's merged history, drained on the row's clock, through the checker."""
    records = [rec for r in got["reports"] for rec in r.records]
    lanes = len({rec.process for rec in records})
    config = LoadConfig(tuple(cluster.addresses), clients=max(1, lanes), ops=len(records))
    # loadgen's drain stamps times as perf_counter() - started; both clocks are
    # CLOCK_MONOTONIC, but the offset is taken anyway so that the drain follows the
    # workload on the row's clock whatever perf_counter is.
    started = time.perf_counter() - (time.monotonic() - got["start"])
    result = LoadResult(records, got["seconds"], got["ops"], started=started)
    anyio.run(drain, config, result, backend="asyncio")
    t = time.monotonic()
    verdict = check(result.records, model="linearizable", drained=True)
    return {
        "linearizable": verdict.ok, "method": verdict.method, "verdict": verdict.describe(),
        "records": len(result.records), "drained": result.drained,
        "processes": len({rec.process for rec in result.records}),
        "check_seconds": round(time.monotonic() - t, 2),
    }  # fmt: skip


# -- the rows ----------------------------------------------------------------------------


def redis_rows(pool: LoadPool, layout: Layout, args: Any, durable: bool) -> list[dict[str, Any]]:
    directory = tempfile.mkdtemp(prefix="scale-out-redis-", dir=args.data_root)
    rows = []
    try:
        proc, port = start_redis(
            args.redis_binary, "always" if durable else "none", directory, layout.daemon(0)
        )
        try:
            for shape in shapes(args):
                jobs = jobs_for(pool, "redis", shape, [f"127.0.0.1:{port}"], args, layout)
                got = pool.run(jobs, [proc.pid])
                rows.append(row_of("redis", 1, durable, shape, got, layout, args))
        finally:
            stop_redis(proc)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return rows


@contextlib.contextmanager
def cluster(n: int, durable: bool, layout: Layout, args: Any) -> Iterator[LaunchedCluster]:
    """``n`` daemons, each pinned per the layout; durable: --fsync batch on disk."""
    with contextlib.ExitStack() as stack:
        if durable:
            data = tempfile.mkdtemp(prefix="scale-out-data-", dir=args.data_root)
            stack.callback(shutil.rmtree, data, True)
            command = [*skueued_command(), "--fsync", "batch"]
            # --replicas K on clusters of K or more (issue 31); below, one replica.
            k = args.replicas if n >= args.replicas else 1
            options: dict[str, Any] = {"command": command, "data_dir": data, "replicas": k}
        else:
            options = {"in_memory": True}
        c = stack.enter_context(launch(n, log_level="warning", **options))
        for i, pid in enumerate(c.pids):
            cores = layout.daemon(i)
            if cores is not None:
                pin(pid, cores)
        yield c


def skueue_rows(
    pool: LoadPool, layout: Layout, args: Any, n: int, durable: bool
) -> list[dict[str, Any]]:
    rows = []
    with cluster(n, durable, layout, args) as c:
        for shape in shapes(args):
            got = pool.run(jobs_for(pool, "skueue", shape, c.addresses, args, layout), c.pids)
            row = row_of("skueue", n, durable, shape, got, layout, args)
            if "error" not in got:
                row["history"] = verdict_of(c, got)
            rows.append(row)
    return rows


def measure(args: Any, layout: Layout) -> list[dict[str, Any]]:
    pool = LoadPool(args.load_procs)
    try:
        rows = [] if args.no_redis else redis_rows(pool, layout, args, durable=False)
        for n in args.nodes:
            rows += skueue_rows(pool, layout, args, n, durable=False)
        for n in args.durable_nodes:
            rows += skueue_rows(pool, layout, args, n, durable=True)
        if args.durable_nodes and not args.no_redis:
            rows += redis_rows(pool, layout, args, durable=True)
        return rows
    finally:
        pool.close()


# -- the command -------------------------------------------------------------------------


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of integers") from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every count must be at least 1")
    return values


def positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r}: must be above 0")
        return value

    return parse


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    cores = sorted(os.sched_getaffinity(0))
    load_default = min(LOAD_PROCS_MAX, max(1, len(cores) // 2))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--nodes",
        type=int_list,
        default=None,
        help="cluster sizes (default 1,2,4,8,12,... while each daemon has a core "
        "beside the load processes; at least 1,2,4)",
    )
    p.add_argument("--seconds", type=positive(float), default=6.0, help="per row (default 6)")
    p.add_argument(
        "--replicas",
        type=int,
        choices=(1, 3, 5),
        default=1,
        help="skueued --replicas of the durable rows, on clusters that many or more "
        "(default 1, as the README's figures; 3: replication's scale-out)",
    )
    p.add_argument(
        "--load-procs",
        type=positive(int),
        default=load_default,
        help=f"load processes, the same for every row (default {load_default} here: "
        f"half the cores, at most {LOAD_PROCS_MAX})",
    )
    p.add_argument(
        "--modes", type=lambda t: t.split(","), default=list(MODES), help="one,batch (default both)"
    )
    p.add_argument(
        "--clients",
        type=positive(int),
        default=16,
        help="one-at-a-time clients per load process (default 16)",
    )
    p.add_argument(
        "--in-flight",
        type=positive(int),
        default=2,
        help="one-at-a-time requests in flight per client (default 2)",
    )
    p.add_argument(
        "--batch-clients",
        type=positive(int),
        default=4,
        help="batched clients per load process (default 4)",
    )
    p.add_argument(
        "--batch",
        type=positive(int),
        default=100,
        help="operations per batched request (default 100)",
    )
    p.add_argument("--value-bytes", type=positive(int), default=100)
    p.add_argument(
        "--durable-nodes",
        type=int_list,
        default=None,
        help="cluster sizes also run with --fsync batch, against Redis with "
        "appendfsync always (default: the largest N with cores of their own; "
        "'' for none)",
    )
    p.add_argument("--pin", choices=("auto", "yes", "no"), default="auto")
    p.add_argument(
        "--redis-server",
        default=None,
        metavar="PATH",
        help="the redis-server to run (default: on PATH, else installed through "
        "apt); with PATH/../../lib/ put first on its LD_LIBRARY_PATH",
    )
    p.add_argument(
        "--no-redis",
        action="store_true",
        help="no Redis rows (for a machine where none can be had)",
    )
    p.add_argument(
        "--data-root",
        type=Path,
        default=ROOT / ".bench-data",
        help="where the durable rows keep their data, in a temporary directory "
        "removed after (default .bench-data/ in the checkout: /tmp may be tmpfs)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=RESULTS / "scale_out.json",
        help="the JSON report; the plot goes beside it as .png",
    )
    p.add_argument(
        "--replot",
        type=Path,
        default=None,
        metavar="JSON",
        help="run nothing: print the report of that JSON again and draw its plot",
    )
    args = p.parse_args(argv)
    unknown = sorted(set(args.modes) - set(MODES))
    if unknown:
        p.error(f"--modes: unknown {','.join(unknown)}; choose from {','.join(MODES)}")
    server = args.redis_server
    if server is not None and not (os.path.isfile(server) and os.access(server, os.X_OK)):
        p.error(f"--redis-server {server}: not an executable file")
    args.cores = cores
    return args


def default_nodes(layout: Layout) -> list[int]:
    room = max(4, len(layout.daemon_cores) if layout.pinned else 4)
    return [n for n in NODE_STEPS if n <= room]


def print_report(report: dict[str, Any]) -> None:
    print(f"\nMachine: {report['machine']}.\nPlacement: {report['layout']['summary']}.")
    print(f"\n```sh\n{report['command']}\n```\n")
    print(scale_out_report.table(report["rows"]))
    o = report["options"]
    procs = f"{o['load_procs']} load process{'es' if o['load_procs'] > 1 else ''}"
    print(
        f"\n{procs} for every row, {o['seconds']:g} s per row; one at a time: "
        f"{o['clients']} clients per process with {o['in_flight']} requests in flight each; "
        f"batched: {o['batch_clients']} clients per process, {o['batch']} operations per "
        "request.  ops/s counts operations; latency is per request; cluster CPU is the "
        "daemons' (or redis-server's) user + system time, client CPU the load processes', "
        "per operation; cores busy is the cluster's CPU over the row's time."
    )
    if report.get("durable_fs"):
        print(f"Durable rows' data on {report['durable_fs']}.")
    print("\nIssue 30's goals (ratios from one run):")
    print("\n".join(scale_out_report.goal_lines(report["goals"])))


def replot(path: Path) -> int:
    report = json.loads(path.read_text())
    print_report(report)
    print(scale_out_report.plot(report, path.with_suffix(".png")))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replot is not None:
        return replot(args.replot)
    layout = plan_layout(args.cores, args.load_procs, args.pin)
    args.nodes = args.nodes or default_nodes(layout)
    if args.durable_nodes is None:
        own = [n for n in args.nodes if not layout.pinned or n <= len(layout.daemon_cores)]
        args.durable_nodes = [max(own or args.nodes)]
    args.redis_binary = None if args.no_redis else ensure_redis(args.redis_server)
    args.data_root.mkdir(parents=True, exist_ok=True)
    print(f"placement: {layout.summary}", file=sys.stderr, flush=True)
    rows = measure(args, layout)
    report: dict[str, Any] = {
        "machine": describe_machine(args.cores, args.redis_binary),
        "command": command_line(),
        "layout": {
            **asdict(layout),
            "daemons_on_own_cores_max": len(layout.daemon_cores) if layout.pinned else None,
        },
        "options": {
            k: str(v) if isinstance(v, Path) else v
            for k, v in vars(args).items()
            if k not in ("replot", "cores")
        },
        "durable_fs": fs_type(args.data_root.resolve()) if args.durable_nodes else None,
        "rows": rows,
        "goals": scale_out_report.goals(rows),
    }
    print_report(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nreport: {args.out}")
    print(scale_out_report.plot(report, args.out.with_suffix(".png")))
    failed = [
        r for r in rows if r.get("error") or (r.get("history") and not r["history"]["linearizable"])
    ]
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
