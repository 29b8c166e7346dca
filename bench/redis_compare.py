"""Skueue clusters against Redis lists, in one run, with the same clients and workload.

    .venv/bin/python bench/redis_compare.py [--ops 6000] [--clients 1,4,16] [--nodes 1,2,4]

For every client count, the same load: each client issues its share of the operations
one at a time, half RPUSH/enqueue and half LPOP/dequeue, with 100-byte values.  Redis is
Debian's redis-server, started by this script on a free loopback port (installed through
apt where missing) and driven with redis-py's asyncio client; Skueue clusters of 1, 2
and 4 real ``skueued`` processes are driven with the project's client on the same asyncio
loop.  It prints a Markdown table (ops/s, p50/p99 latency, the ratio ours/Redis) and the
CPU an idle daemon uses, and writes the same as JSON next to this file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skueue.cluster.launch import launch  # noqa: E402
from skueue.cluster.loadgen import LoadConfig, percentiles, run_load  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def ensure_redis() -> str:
    path = shutil.which("redis-server")
    if path:
        return path
    print("redis-server not found; installing Debian's redis-server", file=sys.stderr)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "redis-server"], check=True, env=env)
    found = shutil.which("redis-server")
    if not found:
        raise SystemExit("redis-server is still missing after apt-get install")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_redis(binary: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("redis-server did not start")


async def redis_load(port: int, clients: int, ops: int, value_bytes: int) -> dict[str, Any]:
    import redis.asyncio as aioredis

    key = f"skueue-bench-{random.random()}"
    latencies: list[float] = []

    async def one(index: int, count: int) -> None:
        r = aioredis.Redis(host="127.0.0.1", port=port)
        rng = random.Random(index)
        try:
            for seq in range(count):
                value = f"c{index}-{seq}:".encode().ljust(value_bytes, b"x")
                t = time.perf_counter()
                if rng.random() < 0.5:
                    await r.rpush(key, value)
                else:
                    await r.lpop(key)
                latencies.append((time.perf_counter() - t) * 1000)
        finally:
            await r.aclose()

    shares = [ops // clients + (1 if i < ops % clients else 0) for i in range(clients)]
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i, share in enumerate(shares):
            tg.start_soon(one, i, share)
    seconds = time.perf_counter() - start
    return {"ops_per_second": ops / seconds, **percentiles(latencies)}


async def skueue_load(nodes: list[str], clients: int, ops: int, value_bytes: int) -> dict[str, Any]:
    config = LoadConfig(tuple(nodes), clients, ops, 0.5, value_bytes, seed=clients, drain=False)
    result = await run_load(config)
    return {"ops_per_second": result.ops_per_second, **result.latency_ms()["all"]}


def idle_cpu_percent(pid: int, seconds: float = 10.0) -> float:
    """CPU an idle daemon uses, from /proc (user + system ticks over a quiet interval)."""
    def ticks() -> int:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    hz = os.sysconf("SC_CLK_TCK")
    before = ticks()
    time.sleep(seconds)
    return 100.0 * (ticks() - before) / hz / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=6000, help="operations per configuration")
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--nodes", default="1,2,4", help="cluster sizes to measure")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "redis_compare.json")
    args = parser.parse_args()
    client_counts = [int(c) for c in args.clients.split(",")]
    node_counts = [int(n) for n in args.nodes.split(",")]

    binary = ensure_redis()
    redis_proc, port = start_redis(binary)
    rows: list[dict[str, Any]] = []
    try:
        for clients in client_counts:
            r = anyio.run(redis_load, port, clients, args.ops, args.value_bytes, backend="asyncio")
            rows.append({"system": "redis", "nodes": 1, "clients": clients, **r})
            print(f"redis          clients={clients:3}: {r['ops_per_second']:9.0f} ops/s",
                  file=sys.stderr)
    finally:
        redis_proc.terminate()
        redis_proc.wait(timeout=10)

    idle = None
    for n in node_counts:
        with launch(n) as cluster:
            for clients in client_counts:
                r = anyio.run(skueue_load, cluster.addresses, clients, args.ops, args.value_bytes,
                              backend="asyncio")
                rows.append({"system": "skueue", "nodes": n, "clients": clients, **r})
                print(f"skueue nodes={n} clients={clients:3}: {r['ops_per_second']:9.0f} ops/s",
                      file=sys.stderr)
            if n == max(node_counts) and args.idle_seconds > 0:
                time.sleep(1.0)  # let the last run's traffic settle
                idle = idle_cpu_percent(cluster.pids[0], args.idle_seconds)

    redis_rate = {r["clients"]: r["ops_per_second"] for r in rows if r["system"] == "redis"}
    for r in rows:
        r["ratio_vs_redis"] = r["ops_per_second"] / redis_rate[r["clients"]]
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"\nMachine: {machine}. Command: .venv/bin/python bench/redis_compare.py "
          f"--ops {args.ops} --clients {args.clients} --nodes {args.nodes}\n")
    print("| system | daemons | clients | ops/s | p50 ms | p99 ms | ours/Redis |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['system']} | {r['nodes']} | {r['clients']} | {r['ops_per_second']:.0f} "
              f"| {r['p50']:.2f} | {r['p99']:.2f} | {r['ratio_vs_redis']:.2f} |")
    if idle is not None:
        print(f"\nIdle daemon CPU (one of {max(node_counts)}, over {args.idle_seconds:g} s): "
              f"{idle:.2f}% of a core")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": machine, "rows": rows, "idle_cpu_percent": idle},
                                   indent=2))


if __name__ == "__main__":
    main()
