"""The cost of security (issue 13): one workload on the same 4-daemon cluster, plaintext
against a cluster key with client tokens, against the key and tokens inside TLS.

    .venv/bin/python bench/security_cost.py [--nodes 4] [--clients 8] [--ops 20000]
        [--in-flight 1] [--batch 1] [--value-bytes 100] [--rounds 3]
        [--modes plaintext,key+tokens,key+tokens+tls] [--out bench/results/security_cost.json]
        [--smoke]

Three set-ups (``--modes``), each a fresh cluster of ``--nodes`` in-memory ``skueued``
on 127.0.0.1 driven by the project's load generator (``--clients`` clients, half
enqueues and half dequeues of ``--value-bytes`` values, ``--in-flight`` requests
outstanding per client, ``--batch`` operations per request, the same seed):

- ``plaintext``: no key, no tokens, no TLS (what a loopback daemon does by default);
- ``key+tokens``: ``--cluster-key`` (the HMAC handshake on every peer link) and
  ``--client-tokens`` (every client presents a token);
- ``key+tokens+tls``: the same inside TLS: ``--tls-cert/--tls-key/--tls-ca`` (mutual TLS
  on peer links, ECDSA P-256 certificates from ``skueue certs``'s functions), clients
  verifying the daemons' certificates.

The modes run interleaved, ``--rounds`` times (plaintext, key, TLS, plaintext, ...), so
that a change in the machine's load hits all of them alike; each reports the median of
its rounds' throughput and the p50/p99 request latency of its median round, the daemons'
CPU per operation (user + system from ``/proc``), and its throughput as a ratio of
plaintext's.  Every run is drained and its history checked for linearizability (exit 1
if one fails).  Prints the command and a Markdown table, and writes everything as JSON
(``--out``).  ``--smoke`` runs a few hundred operations once, to show that the script
works (its figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skueue.check.checker import check  # noqa: E402
from skueue.cli.certs_cmd import ensure_ca, issue, write_pair  # noqa: E402
from skueue.client.tls import client_context  # noqa: E402
from skueue.cluster.launch import LaunchedCluster, launch, skueued_command  # noqa: E402
from skueue.cluster.loadgen import LoadConfig, drain, run_workload  # noqa: E402
from skueue.runtime.security.peer_auth import generate_key  # noqa: E402

RESULTS = ROOT / "bench" / "results"
HOST = "127.0.0.1"
MODES = ("plaintext", "key+tokens", "key+tokens+tls")
INSERT_RATIO = 0.5
SEED = 13
SMOKE = {"ops": 400, "clients": 4, "rounds": 1}
OUT = "security_cost.json"
SMOKE_OUT = "security_cost.smoke.json"


def security_files(directory: Path) -> dict[str, Path | str]:
    """A cluster key, a token file and its client token, a CA and a member certificate."""
    key = directory / "cluster.key"
    key.write_text(generate_key() + "\n")
    token = generate_key()
    tokens = directory / "client.tokens"
    tokens.write_text(f"client {token}\n")
    ca_key, ca_cert, _ = ensure_ca(directory)
    member_key, member = issue(ca_key, ca_cert, "member", "peer", [HOST])
    write_pair(directory / "member.crt", directory / "member.key", member, member_key)
    return {"key": key, "tokens": tokens, "token": token, "ca": directory / "ca.crt",
            "crt": directory / "member.crt", "crt_key": directory / "member.key"}  # fmt: skip


def daemon_args(mode: str, files: dict[str, Path | str]) -> list[str]:
    if mode == "plaintext":
        return []
    args = ["--cluster-key", str(files["key"]), "--client-tokens", str(files["tokens"])]
    if mode == "key+tokens+tls":
        args += ["--tls-cert", str(files["crt"]), "--tls-key", str(files["crt_key"]),
                 "--tls-ca", str(files["ca"])]  # fmt: skip
    return args


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU of ``pids`` so far (clock ticks of /proc/<pid>/stat)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


async def one_run(
    cluster: LaunchedCluster, args: argparse.Namespace, mode: str, files: dict[str, Path | str]
) -> dict[str, Any]:
    tls = client_context(str(files["ca"])) if mode.endswith("tls") else False
    config = LoadConfig(
        tuple(cluster.addresses), args.clients, args.ops, INSERT_RATIO, args.value_bytes,
        seed=SEED, in_flight=args.in_flight, batch=args.batch,
        token=None if mode == "plaintext" else str(files["token"]), tls=tls,
    )  # fmt: skip
    cpu_before = cpu_seconds(cluster.pids)
    result = await run_workload(config)
    cpu = cpu_seconds(cluster.pids) - cpu_before
    await drain(config, result)  # outside the measurement; the history needs it
    verdict = check(result.records, model="linearizable", drained=True)
    latency = result.latency_ms()["all"]
    return {
        "mode": mode,
        "ops_per_s": args.ops / result.workload_seconds,
        "seconds": result.workload_seconds,
        "p50_ms": latency["p50"],
        "p99_ms": latency["p99"],
        "cpu_us_per_op": cpu * 1e6 / args.ops,
        "history": verdict.describe(),
        "linearizable": verdict.ok,
    }


def measure(args: argparse.Namespace, modes: list[str]) -> list[dict[str, Any]]:
    runs = []
    with tempfile.TemporaryDirectory(prefix="skueue-security-") as tmp:
        files = security_files(Path(tmp))
        for round_ in range(args.rounds):
            for mode in modes:
                command = [*skueued_command(), *daemon_args(mode, files)]
                with launch(args.nodes, in_memory=True, command=command) as cluster:
                    run = anyio.run(one_run, cluster, args, mode, files, backend="asyncio")
                run["round"] = round_
                runs.append(run)
                print(
                    f"round {round_ + 1}/{args.rounds} {mode}: {run['ops_per_s']:.0f} ops/s, "
                    f"p50 {run['p50_ms']:.2f} ms, p99 {run['p99_ms']:.2f} ms, {run['history']}",
                    file=sys.stderr,
                    flush=True,
                )
    return runs


def summarise(runs: list[dict[str, Any]], modes: list[str]) -> list[dict[str, Any]]:
    """Per mode: the median throughput, the latencies of the median run, the ratio."""
    rows = []
    for mode in modes:
        mine = sorted((r for r in runs if r["mode"] == mode), key=lambda r: r["ops_per_s"])
        median = mine[(len(mine) - 1) // 2]
        rows.append({
            "mode": mode,
            "ops_per_s": statistics.median(r["ops_per_s"] for r in mine),
            "p50_ms": median["p50_ms"],
            "p99_ms": median["p99_ms"],
            "cpu_us_per_op": statistics.median(r["cpu_us_per_op"] for r in mine),
            "rounds": len(mine),
            "linearizable": all(r["linearizable"] for r in mine),
        })  # fmt: skip
    base = next((r for r in rows if r["mode"] == "plaintext"), None)
    for row in rows:
        row["throughput_vs_plaintext"] = (
            None if base is None else row["ops_per_s"] / base["ops_per_s"]
        )
        row["p99_vs_plaintext"] = None if base is None else row["p99_ms"] / base["p99_ms"]
    return rows


def command_line() -> str:
    python = (
        os.path.relpath(sys.executable, ROOT)
        if sys.executable.startswith(str(ROOT))
        else sys.executable
    )
    return shlex.join([python, *sys.argv])


def print_report(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"$ {command_line()}")
    print(
        f"{args.nodes} daemons, {args.clients} clients, {args.ops} ops per run, "
        f"{args.in_flight} in flight, batch {args.batch}, {args.value_bytes}-byte values, "
        f"median of {args.rounds} round(s)\n"
    )
    print(
        "| set-up | ops/s | vs plaintext | p50 ms | p99 ms | p99 vs plaintext "
        "| daemon CPU µs/op | history |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ratio = (
            "" if r["throughput_vs_plaintext"] is None else f"{r['throughput_vs_plaintext']:.2f}"
        )
        p99 = "" if r["p99_vs_plaintext"] is None else f"{r['p99_vs_plaintext']:.2f}"
        ok = "ok" if r["linearizable"] else "FAILED"
        print(
            f"| {r['mode']} | {r['ops_per_s']:.0f} | {ratio} | {r['p50_ms']:.2f} | "
            f"{r['p99_ms']:.2f} | {p99} | {r['cpu_us_per_op']:.0f} | {ok} |"
        )


def package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="The cost of keys, tokens and TLS on one workload.")
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--ops", type=int, default=20_000)
    p.add_argument("--in-flight", type=int, default=1)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--out", type=Path, default=None, help=f"default: {RESULTS}/{OUT}")
    p.add_argument("--smoke", action="store_true", help="a few hundred ops, once: it works")
    args = p.parse_args(argv)
    if args.smoke:
        for name, value in SMOKE.items():
            setattr(args, name, value)
    # A smoke run never replaces the real figures.
    args.out = args.out or RESULTS / (SMOKE_OUT if args.smoke else OUT)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(MODES)
    if unknown or not modes:
        p.error(f"--modes: pick from {', '.join(MODES)}")
    began = time.monotonic()
    runs = measure(args, modes)
    rows = summarise(runs, modes)
    print_report(rows, args)
    report = {
        "command": command_line(),
        "smoke": args.smoke,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "versions": {n: package_version(n) for n in ("skueue", "trio", "anyio", "cryptography")},
        "openssl": __import__("ssl").OPENSSL_VERSION,
        "settings": {
            k: getattr(args, k)
            for k in ("nodes", "clients", "ops", "in_flight", "batch", "value_bytes", "rounds")
        },  # fmt: skip
        "rows": rows,
        "runs": runs,
        "seconds": time.monotonic() - began,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0 if all(r["linearizable"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
