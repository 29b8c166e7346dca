"""bench/consume_compare.py's report: the progress lines, whether a system's figures are
sound, the ratios Skueue/RabbitMQ, the Markdown table, the versions measured."""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence
from typing import Any

from bench_support import package_version


def progress(system: str, phase: str, row: dict[str, Any]) -> None:
    if phase.startswith("throughput"):
        text = (
            f"{row['consume_per_second']:.0f} msg/s consumed (fill {row['fill_per_second']:.0f}"
            f"/s); lost {row['lost']}, dup {row['duplicated']}, left {row['left']}"
        )
    else:
        ms = row["latency_ms"] or {}
        text = (
            f"p50 {ms.get('p50', float('nan')):.2f} ms, p99 {ms.get('p99', float('nan')):.2f} "
            f"ms at {row['send_rate'] or 0:.0f} msg/s; lost {row['lost']}, "
            f"dup {row['duplicated']}"
        )
    print(f"{system:8} {phase:10}: {text}", file=sys.stderr, flush=True)


def row_ok(result: dict[str, Any]) -> bool:
    lat = result.get("latency")
    drains = [
        result.get("throughput"),
        *([result["throughput_batched_acks"]] if "throughput_batched_acks" in result else []),
    ]
    return (
        all(t is not None for t in drains)
        and lat is not None
        and all(
            t["lost"] == t["duplicated"] == t["left"] == t.get("acks_refused", 0) == 0
            for t in drains
        )  # type: ignore[index]
        and lat["lost"] == lat["duplicated"] == lat["send_failed"] == 0
    )


def get(result: dict[str, Any] | None, *path: str) -> float | None:
    value: Any = result
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    paths = {
        "consume_per_second": ("throughput", "consume_per_second"),
        "latency_p50_ms": ("latency", "latency_ms", "p50"),
        "latency_p99_ms": ("latency", "latency_ms", "p99"),
    }
    out: dict[str, float | None] = {}
    for name, path in paths.items():
        ours, theirs = get(results.get("skueue"), *path), get(results.get("rabbitmq"), *path)
        out[name] = ours / theirs if ours is not None and theirs else None
    # RabbitMQ's acks have no answer: its one drain is the peer of both of Skueue's.
    ours = get(results.get("skueue"), "throughput_batched_acks", "consume_per_second")
    theirs = get(results.get("rabbitmq"), "throughput", "consume_per_second")
    out["consume_per_second_batched_acks"] = ours / theirs if ours is not None and theirs else None
    return out


def report_text(report: dict[str, Any]) -> str:
    c, results = report["config"], report["results"]
    sk, rb = results.get("skueue"), results.get("rabbitmq")

    def number(value: float | None, digits: int = 0) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    def p50_p99(result: dict[str, Any] | None, *path: str) -> str:
        return " / ".join(number(get(result, *path, p), 2) for p in ("p50", "p99"))

    def tally(result: dict[str, Any] | None, phase: str, names: Sequence[str]) -> str:
        row = get(result, phase)
        return "–" if not isinstance(row, dict) else "/".join(str(row[n]) for n in names)

    r = report["ratios"]
    lines = [
        (
            f"consume msg/s ({c['messages']} msgs, {c['consumers']} consumers, "
            f"prefetch {c['prefetch']}, each ack awaited)",
            number(get(sk, "throughput", "consume_per_second")),
            number(get(rb, "throughput", "consume_per_second")),
            number(r["consume_per_second"], 2),
        ),
        (
            "... Skueue's acks batched (msg.ack(wait=False); AMQP's basic.ack has no answer)",
            number(get(sk, "throughput_batched_acks", "consume_per_second")),
            number(get(rb, "throughput", "consume_per_second")),
            number(r["consume_per_second_batched_acks"], 2),
        ),
        (
            "fill msg/s (before the drain, not compared)",
            number(get(sk, "throughput", "fill_per_second")),
            number(get(rb, "throughput", "fill_per_second")),
            "",
        ),
        (
            "drain lost/dup/left",
            tally(sk, "throughput", ("lost", "duplicated", "left")),
            tally(rb, "throughput", ("lost", "duplicated", "left")),
            "",
        ),
        (
            f"latency p50 ms ({c['rate']:g} msg/s for {c['seconds']:g} s)",
            number(get(sk, "latency", "latency_ms", "p50"), 2),
            number(get(rb, "latency", "latency_ms", "p50"), 2),
            number(r["latency_p50_ms"], 2),
        ),
        (
            "latency p99 ms",
            number(get(sk, "latency", "latency_ms", "p99"), 2),
            number(get(rb, "latency", "latency_ms", "p99"), 2),
            number(r["latency_p99_ms"], 2),
        ),
        (
            "send round trip p50 / p99 ms",
            p50_p99(sk, "latency", "send_round_trip_ms"),
            p50_p99(rb, "latency", "send_round_trip_ms"),
            "",
        ),
        (
            "latency lost/dup",
            tally(sk, "latency", ("lost", "duplicated")),
            tally(rb, "latency", ("lost", "duplicated")),
            "",
        ),
    ]
    table = ["| | Skueue | RabbitMQ | Skueue/RabbitMQ |", "|---|---|---|---|"]
    table += ["| " + " | ".join(cells) + " |" for cells in lines]
    setups = "; ".join(
        f"{name}: {res['server']}, {res['setup']}" for name, res in results.items() if res
    )
    parts = [
        f"Machine: {report['machine']['description']}.",
        f"```sh\n{report['command']}\n```",
        "\n".join(table),
        f"{setups}." if setups else "",
    ]
    if report["failures"]:
        parts.append("\n".join(f"- not measured: {f}" for f in report["failures"]))
    return "\n\n".join(p for p in parts if p)


def versions(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    found = {"python": platform.python_version()}
    found.update({p: package_version(p) for p in ("skueue", "anyio", "aio-pika", "aiormq")})
    found.update({f"{name}_server": res["server"] for name, res in results.items()})
    return found
