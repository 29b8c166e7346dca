"""bench/durable_peers.py's report: which rows are compared with which, and the Markdown
it prints (the rows, then the ratios Skueue/peer)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from durable_peers_rows import DAEMONS, row_ok


def pairs(rows: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(Skueue row, peer row) compared: Redis of the same durability and mode; RabbitMQ
    and NATS (one mode each) against Skueue ``--fsync batch`` in every mode."""
    found = []
    for ours in (r for r in rows if r["system"] == "skueue"):
        for peer in (r for r in rows if r["system"] != "skueue"):
            same_redis = peer["system"] == "redis" and peer["mode"] == ours["mode"]
            if peer["durability"] == ours["durability"] and (
                same_redis or peer["system"] in ("rabbitmq", "nats")
            ):
                found.append((ours, peer))
    return found


def comparison(ours: dict[str, Any], peer: dict[str, Any]) -> dict[str, Any]:
    return {
        "skueue": f"{ours['mode']}, {ours['durability_label']}",
        "peer": f"{peer['system']}, {peer['durability_label']}",
        "compares": f"{ours['shape']} vs {peer['shape']}",
        "ops_ratio": ours["ops_per_second"] / peer["ops_per_second"],
        "cpu_ratio": ours["cpu_us_per_message"] / peer["cpu_us_per_message"]
        if peer["cpu_us_per_message"]
        else None,
    }


def latency_cell(stats: dict[str, float] | None) -> str:
    return "–" if stats is None else f"{stats['p50']:.2f} / {stats['p99']:.2f}"


def ratio_cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def counts_cell(row: dict[str, Any]) -> str:
    text = f"{row['lost']}/{row['duplicated']}/{row['left']}"
    return text if row_ok(row) else f"**{text}**"


ROW_COLUMNS = (
    "system",
    "durability",
    "shape (per client)",
    "ops/s",
    "produce msg/s",
    "consume msg/s",
    "produce p50 / p99 ms",
    "consume p50 / p99 ms",
    "CPU µs/msg",
    "client CPU µs/msg",
    "lost/dup/left",
    "history",
)
PAIR_COLUMNS = ("Skueue", "peer", "shapes compared", "ops/s Skueue/peer", "CPU/msg Skueue/peer")


def table(columns: Sequence[str], lines: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(cells) + " |" for cells in lines]
    return "\n".join(out)


def report_text(report: dict[str, Any]) -> str:
    rows, compared = report["rows"], report["comparisons"]
    lines = [
        [
            r["system"],
            r["durability_label"],
            r["shape"],
            f"{r['ops_per_second']:.0f}",
            f"{r['produce_per_second']:.0f}",
            f"{r['consume_per_second']:.0f}",
            latency_cell(r["produce_latency_ms"]),
            latency_cell(r["consume_latency_ms"]),
            f"{r['cpu_us_per_message']:.0f}",
            f"{r['client_cpu_us_per_message']:.0f}",
            counts_cell(r),
            "–"
            if r["history"] is None
            else f"{'ok' if r['linearizable'] else 'VIOLATION'} ({r['history_method']})",
        ]
        for r in rows
    ]
    pair_lines = [
        [
            c["skueue"],
            c["peer"],
            c["compares"],
            ratio_cell(c["ops_ratio"]),
            ratio_cell(c["cpu_ratio"]),
        ]
        for c in compared
    ]
    w = report["workload"]
    parts = [
        f"Machine: {report['machine']}.",
        f"```sh\n{report['command']}\n```",
        f"{w['messages']} messages of {w['value_bytes']} bytes; {w['clients']} producers, "
        f"then {w['clients']} consumers; {w['window']} messages in flight per client. "
        f"Skueue: {DAEMONS} daemons.",
        table(ROW_COLUMNS, lines),
        "ops/s = (produced + consumed) / (produce time + consume time). Latency per "
        "request: publish to confirm (a batch call is one sample), fetch round trip "
        "(RabbitMQ pushes to its consumers: none). CPU: the server side's (Skueue: all "
        "daemons) over both phases, per message, in clock ticks of "
        f"{1000 / os.sysconf('SC_CLK_TCK'):g} ms per process.",
        "NATS JetStream's file store sends its PubAck before any fsync and syncs every 2 "
        "minutes, unless started with sync_interval: always (--nats-sync-always; "
        "nats-server 2.10 or later); its consumers ack with a plain msg.ack(). "
        "RabbitMQ's quorum queue fsyncs before it confirms. "
        "Servers: "
        + (", ".join(sorted({r["server"] for r in rows if r.get("server")})) or "–")
        + ".",
    ]
    if pair_lines:
        parts.append(table(PAIR_COLUMNS, pair_lines))
    if report["failures"]:
        parts.append("\n".join(f"- not measured: {f}" for f in report["failures"]))
    return "\n\n".join(parts)
