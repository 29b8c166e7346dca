"""bench/security_cost.py's parts that need no cluster: what each set-up passes the
daemons, and the summary's medians and ratios against plaintext."""

from __future__ import annotations

from pathlib import Path

from tests.unit.bench_scripts import load_bench

bench = load_bench("security_cost")


def test_each_set_up_adds_its_security_to_the_daemons(tmp_path: Path) -> None:
    files = bench.security_files(tmp_path)
    assert bench.daemon_args("plaintext", files) == []
    keyed = bench.daemon_args("key+tokens", files)
    assert "--cluster-key" in keyed and "--client-tokens" in keyed and "--tls-cert" not in keyed
    tls = bench.daemon_args("key+tokens+tls", files)
    assert tls[: len(keyed)] == keyed and {"--tls-cert", "--tls-key", "--tls-ca"} <= set(tls)
    assert (tmp_path / "client.tokens").read_text() == f"client {files['token']}\n"


def test_the_summary_takes_medians_and_ratios_against_plaintext() -> None:
    def run(mode: str, ops: float, p99: float) -> dict[str, object]:
        return {"mode": mode, "ops_per_s": ops, "p50_ms": 1.0, "p99_ms": p99,
                "cpu_us_per_op": 10.0, "linearizable": True}  # fmt: skip

    runs = [run("plaintext", 100, 4), run("plaintext", 300, 2), run("plaintext", 200, 3),
            run("key+tokens+tls", 150, 6), run("key+tokens+tls", 50, 9),
            run("key+tokens+tls", 100, 7)]  # fmt: skip
    rows = bench.summarise(runs, ["plaintext", "key+tokens+tls"])
    assert [r["ops_per_s"] for r in rows] == [200, 100]
    assert [r["p99_ms"] for r in rows] == [3, 7]  # the median round's
    assert rows[0]["throughput_vs_plaintext"] == 1.0
    assert rows[1]["throughput_vs_plaintext"] == 0.5 and rows[1]["p99_vs_plaintext"] == 7 / 3
