"""bench/durable_peers.py and its parts: the pure ones (options, counting, pairing, the
report), without starting any server."""

from __future__ import annotations

from typing import Any

import pytest

from skueue.check.history import Record
from skueue.cluster.loadgen import LoadResult
from tests.unit.bench_scripts import load_bench

bench = load_bench("durable_peers")
peers_rows = load_bench("durable_peers_rows")
peers_report = load_bench("durable_peers_report")
peers_skueue = load_bench("durable_peers_skueue")


def a_row(system: str, durability: str, mode: str, ops_seconds: float, cpu: float) -> Any:
    """A row of 1000 messages, produced and consumed in ``ops_seconds`` each, all counted."""
    w = peers_rows.Workload(1000, clients=4, window=100)
    phase = peers_rows.Phase(ops_seconds, [1.0, 2.0, 3.0])
    counts = peers_rows.tally([str(i) for i in range(1000)], [str(i) for i in range(1000)], 0)
    return peers_rows.make_row(system, durability, mode, w, phase, phase, (cpu, 0.5), counts)


def test_options_default_to_every_system_and_mode() -> None:
    args = bench.parse_args([])
    assert args.systems == ["skueue", "redis", "rabbitmq", "nats"]
    assert args.modes == ["batch", "one"]
    assert args.durability == ["always", "everysec"]
    assert (args.messages, args.clients, args.window) == (bench.DEFAULT_MESSAGES, 4, 100)
    assert args.out == bench.DEFAULT_OUT
    assert not args.nats_sync_always and bench.parse_args(["--nats-sync-always"]).nats_sync_always


def test_options_are_split_and_checked(capsys: pytest.CaptureFixture[str]) -> None:
    args = bench.parse_args(["--systems", "nats,skueue", "--messages", "2000", "--modes", "one"])
    assert args.systems == ["nats", "skueue"] and args.messages == 2000 and args.modes == ["one"]
    for wrong in (["--systems", "kafka"], ["--modes", "pipelined"], ["--messages", "0"],
                  ["--durability", ""]):  # fmt: skip
        with pytest.raises(SystemExit) as exit_:
            bench.parse_args(wrong)
        assert exit_.value.code == 2
    assert "kafka" in capsys.readouterr().err


def test_the_plan_puts_each_skueue_durability_next_to_its_peers() -> None:
    assert bench.plan(bench.SYSTEMS, bench.DURABILITIES) == [
        ("skueue", "always"), ("redis", "always"), ("rabbitmq", "always"), ("nats", "always"),
        ("skueue", "everysec"), ("redis", "everysec"),
    ]  # fmt: skip
    # RabbitMQ and NATS have one durability: they run even when only everysec is asked.
    assert bench.plan(["nats", "redis"], ["everysec"]) == [
        ("redis", "everysec"), ("nats", "always"),
    ]  # fmt: skip


def test_counting_finds_lost_duplicated_and_unexpected_messages() -> None:
    counts = peers_rows.tally(["a", "b", "c", "d"], ["a", "b", "b", "z"], left=1)
    assert counts == {"produced": 4, "consumed": 4, "lost": 2, "duplicated": 1,
                      "unexpected": 1, "left": 1}  # fmt: skip
    row = a_row("redis", "always", "batch", 1.0, 0.01)
    assert peers_rows.row_ok(row)
    assert not peers_rows.row_ok({**row, "lost": 1})
    assert not peers_rows.row_ok({**row, "left": 3})
    assert not peers_rows.row_ok({**row, "linearizable": False})
    assert not peers_rows.row_ok({**row, "produced": 999})


def test_a_row_counts_both_phases() -> None:
    row = a_row("skueue", "always", "batch", 0.5, 0.02)
    assert row["ops_per_second"] == pytest.approx(2000 / 1.0)
    assert row["produce_per_second"] == pytest.approx(2000)
    assert row["cpu_us_per_message"] == pytest.approx(20.0)  # 0.02 s over 1000 messages
    assert row["client_cpu_us_per_message"] == pytest.approx(500.0)
    assert row["shape"] == "enqueue_many/dequeue_many of 100, 1 call in flight"
    assert row["durability_label"] == "--fsync batch"


def test_pairs_compare_the_same_promise_and_shape() -> None:
    rows = [
        a_row("skueue", "always", "batch", 1.0, 0.1),
        a_row("skueue", "always", "one", 1.0, 0.1),
        a_row("skueue", "everysec", "batch", 1.0, 0.1),
        a_row("redis", "always", "batch", 1.0, 0.1),
        a_row("redis", "always", "one", 1.0, 0.1),
        a_row("redis", "everysec", "batch", 1.0, 0.1),
        a_row("rabbitmq", "always", "confirm", 1.0, 0.1),
        a_row("nats", "always", "confirm", 1.0, 0.1),
    ]
    found = {
        (ours["durability"], ours["mode"], peer["system"], peer["durability"], peer["mode"])
        for ours, peer in peers_report.pairs(rows)
    }
    assert found == {
        ("always", "batch", "redis", "always", "batch"),
        ("always", "batch", "rabbitmq", "always", "confirm"),
        ("always", "batch", "nats", "always", "confirm"),
        ("always", "one", "redis", "always", "one"),
        ("always", "one", "rabbitmq", "always", "confirm"),
        ("always", "one", "nats", "always", "confirm"),
        ("everysec", "batch", "redis", "everysec", "batch"),
    }


def test_the_ratio_is_skueue_over_the_peer() -> None:
    ours = a_row("skueue", "always", "batch", 2.0, 0.3)  # 500 ops/s
    peer = a_row("rabbitmq", "always", "confirm", 0.5, 0.1)  # 2000 ops/s
    c = peers_report.comparison(ours, peer)
    assert c["ops_ratio"] == pytest.approx(0.25)
    assert c["cpu_ratio"] == pytest.approx(3.0)
    assert c["skueue"] == "batch, --fsync batch"
    assert c["peer"] == "rabbitmq, quorum queue (fsync before confirm)"
    assert c["compares"] == (
        "enqueue_many/dequeue_many of 100, 1 call in flight vs "
        "100 confirms in flight; prefetch 100, ack each"
    )
    assert peers_report.comparison(ours, {**peer, "cpu_us_per_message": 0.0})["cpu_ratio"] is None


def test_the_report_prints_rows_ratios_and_failures() -> None:
    ours = {**a_row("skueue", "everysec", "one", 1.0, 0.3), "history": "ok",
            "linearizable": True, "history_method": "certificate"}  # fmt: skip
    peer = {**a_row("redis", "everysec", "one", 0.25, 0.1), "duplicated": 2}
    rabbit = {**a_row("rabbitmq", "always", "confirm", 1.0, 0.1), "consume_latency_ms": None}
    rows = [ours, peer, rabbit]
    report = {
        "machine": "x86_64, 2 cores",
        "command": ".venv/bin/python bench/durable_peers.py --messages 1000",
        "workload": {"messages": 1000, "clients": 4, "window": 100, "value_bytes": 100},
        "rows": rows,
        "comparisons": [peers_report.comparison(a, b) for a, b in peers_report.pairs(rows)],
        "failures": ["nats (always): RuntimeError: nats-server did not start in 30 s"],
    }
    text = peers_report.report_text(report)
    assert "```sh\n.venv/bin/python bench/durable_peers.py --messages 1000\n```" in text
    assert (
        "| skueue | --fsync interval=1000 | 1 op per call, 100 calls in flight | 1000 | 1000 "
        "| 1000 | 2.00 / 3.00 | 2.00 / 3.00 | 300 | 500 | 0/0/0 | ok (certificate) |"
    ) in text
    assert "| 4000 |" in text and "| **0/2/0** |" in text  # Redis duplicated: flagged
    assert "| 100 | 500 | 0/0/0 | – |" in text  # RabbitMQ: no consume latency, no history
    assert "| 1 op per call, 100 calls in flight vs 1 command per round trip" in text
    assert "| 0.25 | 3.00 |" in text  # one pair only: Skueue everysec one vs Redis
    assert "- not measured: nats (always): RuntimeError" in text


def test_both_phases_make_one_history() -> None:
    produce = LoadResult([Record("c0", 0, "enqueue", "c0-0", 0.1, 0.2, 5, 0)], 0.3, 1,
                         started=100.0)  # fmt: skip
    consume = LoadResult([Record("c0", 0, "dequeue", "c0-0", 0.0, 0.1, 5, 1)], 0.2, 1,
                         started=100.5)  # fmt: skip
    history = peers_skueue.one_history(produce, consume)
    assert [(r.process, r.seq, r.op) for r in history] == [
        ("Pc0", 0, "enqueue"), ("Cc0", 0, "dequeue"),
    ]  # fmt: skip
    assert history[1].invoke == pytest.approx(0.5) and history[1].response == pytest.approx(0.6)
