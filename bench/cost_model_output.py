"""bench/cost_model.py's output: the Markdown tables it prints, and the CSV, JSON and PNG
it writes."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cost_model_points import Point, Projection

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
