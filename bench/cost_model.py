"""A cost model for scale beyond this machine (issue 10): messages and bytes per operation
per process as ``n`` grows, and the throughput of ``n`` one-core hosts it projects.

Rerun the numbers in the README (and after any change to the core)::

    .venv/bin/python bench/cost_model.py
    .venv/bin/python bench/cost_model.py --cpu-us-per-message 35 --cpu-us-per-op-local 40
    .venv/bin/python bench/cost_model.py --n 16 64 --ops-per-process 8 --cycles 20

Theory of operation
-------------------
A cluster of ``n`` processes (queue, static ring, the simulator's ``build_cluster``) runs a
closed-loop steady load in synchronous rounds, exactly as :mod:`skueue.sim.rounds` does:
each round every message sent in the previous round is handled, then every process that
may act ticks.  A *cycle* starts with every process submitting ``--ops-per-process``
operations (half enqueues, half dequeues, shuffled by the seed) and ends in the round the
last of them completes; the next cycle starts at once, like clients that wait for their
answers.  The first ``--warmup-cycles`` are not counted; messages in flight across the
edges of the counted window roughly cancel (as many arrive from the warm-up as leave
after it).

Every ``Send`` effect a process returns is a message that crosses processes (the core
delivers messages between a process's own three virtual nodes inside the process, for
free).  Each is counted per kind, per sending and per receiving process, with its bytes
on the wire as a daemon frames it: a 4-byte length header and the msgpack of
``["msg", to_kind, encode_message(m)]`` (``host/host.py``, ``wire/framing.py``; one
frame per message, no TCP/IP overhead counted).

Definitions (``ops`` = operations completed in the counted window, ``M`` = messages):

- messages per op: ``M / ops`` (the whole cluster's traffic per operation);
- a process's work per op: (messages it sends + messages it receives) / ops; averaged
  over the processes this is ``2 M / (n ops)``;
- share: a process's sent + received divided by ``2 M`` (all message ends), so shares sum
  to 1 and an even spread gives every process ``1 / n``; the busiest process's share,
  and its ratio to ``1 / n``, say how fair the load is.

Projection (a model, not a measurement): a host with one core is saturated when its CPU
per cluster operation reaches one second per second.  The busiest process spends
``busiest_msgs_per_op * cpu_us_per_message + cpu_us_per_op_local / n`` µs per cluster
operation (its clients issue ``1 / n`` of the operations, and each costs the request and
reply handling of ``--cpu-us-per-op-local``), so the cluster's throughput is
``1e6 / that``; the ideal process (the average) gives the upper bound if the load were
perfectly even.  ``--cpu-us-per-message`` is the CPU one process spends per message *end*
(one send or one receive); a figure measured as cluster CPU / messages crossing counts
both ends and must be halved first.  Left out: network latency and bandwidth, the
rounds a cycle takes (closed-loop clients wait ``rounds per cycle`` round trips, so
their number, not the CPU, may bound throughput), frames coalesced per peer, idle
pacing, membership changes, and any cost that grows with a process's memory.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skueue.core.effects import Complete, Effect, Send  # noqa: E402
from skueue.core.ops import OpKind, Structure  # noqa: E402
from skueue.core.process import Process  # noqa: E402
from skueue.overlay.labels import LABEL_SPACE  # noqa: E402
from skueue.sim.cluster import build_cluster, process_ids, tree_height  # noqa: E402
from skueue.wire.framing import HEADER_BYTES  # noqa: E402
from skueue.wire.peer import encode_message  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_N = (16, 64, 256, 1024, 4096)
QUICK_N = (4, 8, 16)
CPU_US_PER_MESSAGE = 60.0
CPU_US_PER_OP_LOCAL = 40.0
# Counted cycles per n when --cycles is not given: about this many operations, within
# the bounds (a big n has many operations in each cycle; a small one needs cycles to
# average over the tree's phases).
# The busiest process is a maximum over n noisy counts, biased upward when each process
# sees few messages, so even n = 4096 gets a dozen cycles (about 90 s on this 2-core
# machine, the whole default run about two minutes).
OPS_TARGET = 16_384
CYCLES_MIN, CYCLES_MAX = 12, 40
QUICK_CYCLES = 4
ROUNDS_PER_CYCLE_MAX = 100_000  # a cycle longer than this is a stuck protocol, not load


class Stuck(RuntimeError):
    """A cycle did not complete within its bound."""


@dataclass
class Point:
    """One ``n``: what the counted window measured (plain data; goes to JSON as is)."""

    n: int
    ops_per_process: int
    cycles: int
    warmup_cycles: int
    seed: int
    tree_height: int
    ops_submitted: int
    ops_completed: int
    rounds: int
    messages: int
    bytes: int
    by_kind: dict[str, dict[str, int]]  # kind -> {"messages", "bytes"}
    busiest: str  # process id
    busiest_messages: int  # its sent + received
    busiest_is_anchor: bool
    busiest_tree_kids: int  # its nodes' children in the tree that live in other processes
    # Its nodes' part of the label space (the DHT keys it stores and the routes that end
    # or pass there), times n: 1.0 is an even part.
    busiest_interval_over_even: float
    busiest_by_kind: dict[str, int]  # kind -> its sent + received
    # Pearson correlation, over the processes, of sent + received with the part of the
    # label space owned: near 1 when the DHT's uneven intervals make the busy processes.
    load_interval_correlation: float
    least_messages: int  # the idlest process's sent + received
    wall_seconds: float
    per_process: list[int] = field(repr=False)  # sent + received, by process index

    @property
    def rounds_per_cycle(self) -> float:
        return self.rounds / self.cycles

    @property
    def messages_per_op(self) -> float:
        return self.messages / self.ops_completed

    @property
    def bytes_per_op(self) -> float:
        return self.bytes / self.ops_completed

    @property
    def process_msgs_per_op_average(self) -> float:
        return 2 * self.messages / (self.n * self.ops_completed)

    @property
    def process_msgs_per_op_busiest(self) -> float:
        return self.busiest_messages / self.ops_completed

    @property
    def busiest_share(self) -> float:
        return self.busiest_messages / (2 * self.messages)

    @property
    def average_share(self) -> float:
        return 1 / self.n


@dataclass
class Projection:
    """Cluster throughput of ``n`` one-core hosts as the model projects it."""

    cpu_us_per_message: float
    cpu_us_per_op_local: float
    busiest_us_per_op: float  # the busiest process's CPU per cluster operation
    average_us_per_op: float
    ops_per_second: float  # bounded by the busiest process
    ops_per_second_ideal: float  # if every process did the average work


def project(point: Point, cpu_us_per_message: float, cpu_us_per_op_local: float) -> Projection:
    local = cpu_us_per_op_local / point.n
    busiest = point.process_msgs_per_op_busiest * cpu_us_per_message + local
    average = point.process_msgs_per_op_average * cpu_us_per_message + local
    return Projection(
        cpu_us_per_message, cpu_us_per_op_local, busiest, average, 1e6 / busiest, 1e6 / average
    )


# -- the measurement ----------------------------------------------------------------------


def wire_bytes(send: Send) -> int:
    """The frame a daemon sends for this message (Host._apply, then framing.pack)."""
    frame = ["msg", int(send.to.kind), encode_message(send.message)]
    return HEADER_BYTES + len(msgpack.packb(frame, use_bin_type=True))


class Driver:
    """Synchronous rounds over a static cluster, counting every message that crosses
    processes (SyncSim's round, with the sender of every Send known)."""

    def __init__(self, n: int, seed: int) -> None:
        self.ids = process_ids(n)
        processes = build_cluster(self.ids, Structure.QUEUE)
        self.height = tree_height(processes)
        self.order: list[Process] = [processes[pid] for pid in self.ids]
        self.index = {pid: i for i, pid in enumerate(self.ids)}
        self.rng = random.Random(seed)
        self.inbox: list[Send] = []
        self.dirty: set[int] = set(range(n))
        self.pending = 0  # operations submitted and not completed
        self.counting = False
        self.round = 0
        self.sent = [0] * n
        self.received = [0] * n
        self.kind_messages: Counter[str] = Counter()
        self.kind_bytes: Counter[str] = Counter()
        self.process_kind: Counter[tuple[int, str]] = Counter()

    def _apply(self, i: int, effects: list[Effect], outbox: list[Send]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                outbox.append(effect)
                if self.counting:
                    self._count(i, effect)
            else:
                assert isinstance(effect, Complete)
                self.pending -= 1

    def _count(self, i: int, send: Send) -> None:
        j = self.index[send.to.process]
        kind = type(send.message).__name__
        self.sent[i] += 1
        self.received[j] += 1
        self.kind_messages[kind] += 1
        self.kind_bytes[kind] += wire_bytes(send)
        self.process_kind[(i, kind)] += 1
        self.process_kind[(j, kind)] += 1

    def submit_cycle(self, ops_per_process: int) -> None:
        """Every process submits its operations for this cycle (sent with this round's)."""
        enqueues = ops_per_process // 2
        kinds = [OpKind.ENQUEUE] * enqueues + [OpKind.DEQUEUE] * (ops_per_process - enqueues)
        outbox: list[Send] = []
        for i, process in enumerate(self.order):
            self.rng.shuffle(kinds)
            for kind in kinds:
                value = f"{process.process_id}-{process.next_op_id}" if kind.inserts else None
                op = process.new_op(kind, value)
                self.pending += 1
                self._apply(i, process.submit(op), outbox)
            self.dirty.add(i)
        self.inbox.extend(outbox)

    def step(self) -> None:
        self.round += 1
        outbox: list[Send] = []
        delivering, self.inbox = self.inbox, []
        for send in delivering:
            i = self.index[send.to.process]
            self._apply(i, self.order[i].handle(send.to, send.message), outbox)
            self.dirty.add(i)
        still: set[int] = set()
        for i in sorted(self.dirty):
            process = self.order[i]
            effects = process.tick()
            if process.last_tick_fired:
                still.add(i)
            self._apply(i, effects, outbox)
        self.dirty = still
        self.inbox = outbox

    def run_cycle(self, ops_per_process: int) -> int:
        """One closed-loop cycle; the rounds it took."""
        start = self.round
        self.submit_cycle(ops_per_process)
        while self.pending:
            if self.round - start >= ROUNDS_PER_CYCLE_MAX:
                raise Stuck(f"{self.pending} operations incomplete after {ROUNDS_PER_CYCLE_MAX} "
                            f"rounds of one cycle (n={len(self.order)})")
            self.step()
        return self.round - start

    def interval_over_even(self, i: int) -> float:
        owned = sum(
            (node.ring.view.succ.label - node.ring.view.me.label) % LABEL_SPACE
            for node in self.order[i].nodes.values()
        )
        return owned / LABEL_SPACE * len(self.order)

    def tree_kids_elsewhere(self, i: int) -> int:
        process = self.order[i]
        return sum(
            1
            for node in process.nodes.values()
            for kid in node.ring.kids
            if kid.process != process.process_id
        )


def measure(
    n: int, *, ops_per_process: int = 2, cycles: int = 10, warmup_cycles: int = 1, seed: int = 0
) -> Point:
    if n < 2:
        raise ValueError("n must be at least 2: one process sends no messages")
    if ops_per_process < 1 or cycles < 1 or warmup_cycles < 0:
        raise ValueError("ops per process and cycles must be positive, warm-up not negative")
    began = time.perf_counter()
    driver = Driver(n, seed)
    for _ in range(warmup_cycles):
        driver.run_cycle(ops_per_process)
    driver.counting = True
    rounds = sum(driver.run_cycle(ops_per_process) for _ in range(cycles))
    ops = n * ops_per_process * cycles
    per_process = [s + r for s, r in zip(driver.sent, driver.received, strict=True)]
    busiest = max(range(n), key=per_process.__getitem__)
    messages = sum(driver.sent)
    return Point(
        n=n,
        ops_per_process=ops_per_process,
        cycles=cycles,
        warmup_cycles=warmup_cycles,
        seed=seed,
        tree_height=driver.height,
        ops_submitted=ops,
        ops_completed=ops - driver.pending,  # every cycle waits for all its operations
        rounds=rounds,
        messages=messages,
        bytes=sum(driver.kind_bytes.values()),
        by_kind={
            kind: {"messages": count, "bytes": driver.kind_bytes[kind]}
            for kind, count in sorted(driver.kind_messages.items())
        },
        busiest=driver.ids[busiest],
        busiest_messages=per_process[busiest],
        busiest_is_anchor=driver.order[busiest].stats().anchor,
        busiest_tree_kids=driver.tree_kids_elsewhere(busiest),
        busiest_interval_over_even=driver.interval_over_even(busiest),
        busiest_by_kind={
            kind: c for (i, kind), c in sorted(driver.process_kind.items()) if i == busiest
        },
        load_interval_correlation=_correlation(
            per_process, [driver.interval_over_even(i) for i in range(n)]
        ),
        least_messages=min(per_process),
        wall_seconds=time.perf_counter() - began,
        per_process=per_process,
    )


def _correlation(xs: Sequence[float], ys: Sequence[float]) -> float:
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:  # a constant series
        return float("nan")


def default_cycles(n: int, ops_per_process: int) -> int:
    return max(CYCLES_MIN, min(CYCLES_MAX, round(OPS_TARGET / (n * ops_per_process))))


# -- output -------------------------------------------------------------------------------

CSV_FIELDS = (
    "n", "ops_per_process", "cycles", "ops_completed", "rounds_per_cycle", "tree_height",
    "messages", "bytes", "messages_per_op", "bytes_per_op", "process_msgs_per_op_average",
    "process_msgs_per_op_busiest", "busiest", "busiest_is_anchor", "busiest_tree_kids",
    "busiest_interval_over_even", "load_interval_correlation", "busiest_share", "average_share",
    "busiest_over_average", "cpu_us_per_message", "cpu_us_per_op_local",
    "projected_ops_per_second", "projected_ops_per_second_ideal", "wall_seconds",
)  # fmt: skip


def row(point: Point, proj: Projection) -> dict[str, Any]:
    values: dict[str, Any] = {
        "n": point.n,
        "ops_per_process": point.ops_per_process,
        "cycles": point.cycles,
        "ops_completed": point.ops_completed,
        "rounds_per_cycle": point.rounds_per_cycle,
        "tree_height": point.tree_height,
        "messages": point.messages,
        "bytes": point.bytes,
        "messages_per_op": point.messages_per_op,
        "bytes_per_op": point.bytes_per_op,
        "process_msgs_per_op_average": point.process_msgs_per_op_average,
        "process_msgs_per_op_busiest": point.process_msgs_per_op_busiest,
        "busiest": point.busiest,
        "busiest_is_anchor": point.busiest_is_anchor,
        "busiest_tree_kids": point.busiest_tree_kids,
        "busiest_interval_over_even": point.busiest_interval_over_even,
        "load_interval_correlation": point.load_interval_correlation,
        "busiest_share": point.busiest_share,
        "average_share": point.average_share,
        "busiest_over_average": point.busiest_share / point.average_share,
        "cpu_us_per_message": proj.cpu_us_per_message,
        "cpu_us_per_op_local": proj.cpu_us_per_op_local,
        "projected_ops_per_second": proj.ops_per_second,
        "projected_ops_per_second_ideal": proj.ops_per_second_ideal,
        "wall_seconds": point.wall_seconds,
    }
    assert tuple(values) == CSV_FIELDS
    return values


def markdown(points: list[Point], projections: list[Projection]) -> str:
    proj0 = projections[0]
    lines = [
        "| n | ops | rounds/cycle | msgs/op | bytes/op | per-process msgs/op (avg) "
        "| busiest msgs/op | busiest share (× even) | busiest | projected ops/s (busiest) "
        "| ideal ops/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for p, pr in zip(points, projections, strict=True):
        who = p.busiest + (" (anchor)" if p.busiest_is_anchor else "")
        lines.append(
            f"| {p.n} | {p.ops_completed} | {p.rounds_per_cycle:.1f} | {p.messages_per_op:.2f} "
            f"| {p.bytes_per_op:.0f} | {p.process_msgs_per_op_average:.4f} "
            f"| {p.process_msgs_per_op_busiest:.4f} "
            f"| {p.busiest_share:.2%} ({p.busiest_share / p.average_share:.1f}×) | {who} "
            f"| {pr.ops_per_second:,.0f} | {pr.ops_per_second_ideal:,.0f} |"
        )
    kinds = sorted({k for p in points for k in p.by_kind})
    lines += [
        "",
        "Messages per operation by kind (whole cluster):",
        "",
        "| n | " + " | ".join(kinds) + " |",
        "|---:|" + "---:|" * len(kinds),
    ]
    for p in points:
        cells = [f"{p.by_kind.get(k, {'messages': 0})['messages'] / p.ops_completed:.2f}"
                 for k in kinds]
        lines.append(f"| {p.n} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Busiest process, its messages per kind (sent + received) and tree children:",
        "",
    ]
    for p in points:
        top = sorted(p.busiest_by_kind.items(), key=lambda kv: -kv[1])
        what = ", ".join(f"{k} {c}" for k, c in top)
        lines.append(
            f"- n={p.n}: {p.busiest}{' (anchor)' if p.busiest_is_anchor else ''}, "
            f"{p.busiest_tree_kids} tree children in other processes, "
            f"{p.busiest_interval_over_even:.1f}× an even part of the label space; {what}; "
            f"idlest process {p.least_messages}; correlation of a process's messages with "
            f"its part of the label space {p.load_interval_correlation:.2f}"
        )
    lines += [
        "",
        f"Projection (a model, not a measurement): n one-core hosts, cpu_us_per_message = "
        f"{proj0.cpu_us_per_message:g} µs per message end (a parameter, "
        f"--cpu-us-per-message), cpu_us_per_op_local = {proj0.cpu_us_per_op_local:g} µs "
        "(--cpu-us-per-op-local); ops/s = 1e6 / (busiest msgs/op × cpu_us_per_message + "
        "cpu_us_per_op_local / n).  Leaves out network latency and bandwidth, and the "
        "rounds per cycle that bound closed-loop clients.",
    ]
    return "\n".join(lines)


def write_outputs(
    points: list[Point], projections: list[Projection], stem: Path, args: dict[str, Any]
) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    rows = [row(p, pr) for p, pr in zip(points, projections, strict=True)]
    csv_path = stem.with_suffix(".csv")
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in r.items()})
    json_path = stem.with_suffix(".json")
    document = {
        "command": "bench/cost_model.py " + " ".join(sys.argv[1:]),
        "arguments": args,
        "source": _source(),
        "definitions": {
            "messages_per_op": "messages crossing processes / operations completed",
            "process_msgs_per_op_average": "2 * messages / (n * ops): average sent+received",
            "process_msgs_per_op_busiest": "the busiest process's sent+received / ops",
            "busiest_share": "busiest sent+received / (2 * messages); even = 1/n",
            "bytes": "4-byte frame header + msgpack of ['msg', to_kind, encode_message(m)]",
            "projected_ops_per_second": "1e6 / (busiest msgs/op * cpu_us_per_message + "
            "cpu_us_per_op_local / n); a model, not a measurement",
        },
        "points": [
            {**r, "by_kind": p.by_kind, "busiest_by_kind": p.busiest_by_kind,
             "least_messages": p.least_messages, "rounds": p.rounds, "seed": p.seed,
             "warmup_cycles": p.warmup_cycles}
            for r, p in zip(rows, points, strict=True)
        ],
    }  # fmt: skip
    json_path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    png_path = stem.with_suffix(".png")
    plot(points, projections, png_path)
    return [csv_path, json_path, png_path]


def _source() -> dict[str, Any]:
    """The commit measured, and whether the protocol's files differ from it (numbers from
    a working tree with uncommitted core changes are not that commit's)."""
    root = Path(__file__).resolve().parent.parent

    def git(*argv: str) -> str:
        try:
            done = subprocess.run(["git", *argv], cwd=root, capture_output=True, text=True)
        except OSError:
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    changed = git("status", "--porcelain", "--", "skueue/core", "overlay", "dht", "skueue/wire")
    return {"commit": git("rev-parse", "HEAD") or None, "protocol_uncommitted": changed.split("\n")
            if changed else []}


def plot(points: list[Point], projections: list[Projection], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    ns = [p.n for p in points]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    ax1.plot(ns, [p.process_msgs_per_op_busiest for p in points], "o-", color="tab:red",
             label="busiest process")
    ax1.plot(ns, [p.process_msgs_per_op_average for p in points], "s-", color="tab:blue",
             label="average process (2·msgs / (n·ops))")
    first = points[0]
    ax1.plot(ns, [first.process_msgs_per_op_average * first.n / n for n in ns], ":",
             color="gray", label="∝ 1/n (perfect scaling)")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_xticks(ns, [str(n) for n in ns])
    ax1.set_xlabel("processes n")
    ax1.set_ylabel("messages sent + received per cluster op")
    ax1.set_title("Work of one process per operation of the cluster")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend()

    pr0 = projections[0]
    ax2.plot(ns, [pr.ops_per_second for pr in projections], "o-", color="tab:red",
             label="bounded by the busiest process")
    ax2.plot(ns, [pr.ops_per_second_ideal for pr in projections], "s--", color="tab:blue",
             label="ideal (every process average)")
    ax2.plot(ns, [projections[0].ops_per_second_ideal * n / first.n for n in ns], ":",
             color="gray", label="∝ n (perfect scaling)")
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log")
    ax2.yaxis.set_major_formatter(FuncFormatter(_si))
    ax2.set_xticks(ns, [str(n) for n in ns])
    ax2.set_xlabel("hosts n (one core each)")
    ax2.set_ylabel("projected cluster ops/s")
    ax2.set_title(
        f"Projected throughput (model: {pr0.cpu_us_per_message:g} µs/message end, "
        f"{pr0.cpu_us_per_op_local:g} µs/op local)",
        fontsize=10,
    )
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend()
    fig.suptitle(
        f"Skueue cost model: synchronous rounds, queue, "
        f"{points[0].ops_per_process} ops per process per cycle",
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _si(value: float, _: object) -> str:
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


# -- command line -------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=None,
                        help=f"cluster sizes (default {' '.join(map(str, DEFAULT_N))})")
    parser.add_argument("--ops-per-process", type=int, default=2,
                        help="operations each process submits per cycle, half enqueues "
                        "(default 2)")
    parser.add_argument("--cycles", type=int, default=None,
                        help=f"counted cycles per n (default: about {OPS_TARGET} operations, "
                        f"{CYCLES_MIN} to {CYCLES_MAX} cycles)")
    parser.add_argument("--warmup-cycles", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu-us-per-message", type=float, default=CPU_US_PER_MESSAGE,
                        help="CPU per message end, sent or received (a measured figure; "
                        f"default {CPU_US_PER_MESSAGE:g})")
    parser.add_argument("--cpu-us-per-op-local", type=float, default=CPU_US_PER_OP_LOCAL,
                        help="CPU per operation that does not depend on n: the client's "
                        f"request and reply (default {CPU_US_PER_OP_LOCAL:g})")
    parser.add_argument("--quick", action="store_true",
                        help=f"n {' '.join(map(str, QUICK_N))}, {QUICK_CYCLES} cycles, no files")
    parser.add_argument("--out", type=Path, default=RESULTS / "cost_model",
                        help="output stem for .csv, .json and .png")
    parser.add_argument("--no-files", action="store_true", help="print the table only")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    ns = args.n or (QUICK_N if args.quick else DEFAULT_N)
    points: list[Point] = []
    for n in ns:
        cycles = args.cycles or (QUICK_CYCLES if args.quick else
                                 default_cycles(n, args.ops_per_process))
        point = measure(n, ops_per_process=args.ops_per_process, cycles=cycles,
                        warmup_cycles=args.warmup_cycles, seed=args.seed)
        print(f"n={n}: {point.ops_completed} ops, {point.messages} messages, "
              f"{point.wall_seconds:.1f} s", file=sys.stderr, flush=True)
        points.append(point)
    projections = [project(p, args.cpu_us_per_message, args.cpu_us_per_op_local)
                   for p in points]
    print(markdown(points, projections))
    if not (args.quick or args.no_files):
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        for path in write_outputs(points, projections, args.out, settings):
            print(f"wrote {path}", file=sys.stderr)
    total = sum(p.wall_seconds for p in points)
    print(f"total {total:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
