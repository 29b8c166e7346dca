"""What one operation costs a cluster in messages and CPU, from the daemons' own metrics.

    .venv/bin/python bench/message_cost.py [--daemons 4] [--clients 16] [--ops 24000]
        [--batch 1] [--profile FILE]

Starts ``--daemons`` in-memory ``skueued`` on free loopback ports, each with ``--metrics``,
runs ``skueue bench`` against them (``--clients`` clients, one request in flight,
``--batch`` operations per request, a drain after), scrapes every daemon's Prometheus
endpoint before and after, and prints per operation: the peer messages sent, the batches
sent, the mean operations per batch, and the daemons' CPU (``process_cpu_seconds_total``); then the
bench's throughput, latency and verdict.  With ``--profile FILE``, py-spy samples the
second daemon during the run (raw collapsed stacks in FILE; py-spy must be installed), and
the busy samples are summed by where they were when taken: the leaf frame's part of the
code (trio's scheduler, trio's streams and channels, the protocol core, the daemon's
runtime, the codec) and its function, so that "is it the scheduler?" has a number.
Every daemon is stopped at the end, also on failure or Ctrl-C (issue 10's diagnosis:
``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from skueue.cluster.launch import skueued_command  # noqa: E402

READY_TIMEOUT_S = 60.0
BENCH_TIMEOUT_S = 900.0
COUNTERS = (
    "skueue_peer_frames_sent_total",
    "skueue_batches_total",
    "skueue_batch_operations_sum",
    "skueue_batch_operations_count",
    "process_cpu_seconds_total",
)


def free_ports(n: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


@contextlib.contextmanager
def cluster(n: int, log_dir: Path) -> Iterator[tuple[list[str], list[str], list[int]]]:
    """``n`` in-memory daemons with metrics: their addresses, metrics addresses, pids."""
    ports = free_ports(2 * n)
    nodes = [f"127.0.0.1:{p}" for p in ports[:n]]
    metrics = [f"127.0.0.1:{p}" for p in ports[n:]]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(n):
            args = ["--listen", nodes[i], "--in-memory", "--metrics", metrics[i],
                    "--log-level", "warning"]  # fmt: skip
            peers = [a for j, a in enumerate(nodes) if j != i]
            if peers:
                args += ["--peers", ",".join(peers)]
            with (log_dir / f"d{i}.out").open("wb") as out:
                procs.append(subprocess.Popen([*skueued_command(), *args], stdout=out,
                                              stderr=subprocess.STDOUT))  # fmt: skip
        deadline = time.monotonic() + READY_TIMEOUT_S
        for i, proc in enumerate(procs):
            while b"skueued ready" not in (log_dir / f"d{i}.out").read_bytes():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"daemon {i} did not get ready: see {log_dir}/d{i}.out")
                time.sleep(0.1)
        yield nodes, metrics, [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def scrape(metrics: list[str]) -> dict[str, float]:
    """The counters of COUNTERS, summed over every daemon and label."""
    total = dict.fromkeys(COUNTERS, 0.0)
    for where in metrics:
        with urllib.request.urlopen(f"http://{where}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                name, _, value = line.rpartition(" ")
                name = re.sub(r"\{.*\}", "", name)
                if name in total:
                    total[name] += float(value)
    return total


# The part of the code a leaf frame is in, by its file; the first match wins.  The wait in
# epoll with nothing to do is idle, not work, and is counted apart.
PARTS = (
    ("idle", re.compile(r"^EpollIOManager\.(_epoll_wait|get_events) ")),
    ("trio scheduler", re.compile(r"\(trio/_core/")),
    ("trio streams, sockets, channels", re.compile(r"\(trio/")),
    ("protocol core", re.compile(r"\(skueue/(core|dht|overlay)/|__create_fn__")),
    ("codec", re.compile(r"\(skueue/wire/|\(msgpack/")),
    ("daemon runtime", re.compile(r"\(skueue/")),
)
OTHER = "standard library, native"


def profile_shares(collapsed: Path) -> tuple[float, dict[str, float], list[tuple[str, float]]]:
    """From py-spy's raw collapsed stacks: the idle share of all samples, then each part's
    and each leaf function's share of the busy samples (self time, largest first)."""
    idle = busy = 0
    parts: dict[str, int] = {}
    functions: dict[str, int] = {}
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        leaf, n = stack.rpartition(";")[2], int(count)
        part = next((name for name, pattern in PARTS if pattern.search(leaf)), OTHER)
        if part == "idle":
            idle += n
            continue
        busy += n
        parts[part] = parts.get(part, 0) + n
        function = leaf.split(" (")[0] or "(native)"
        functions[function] = functions.get(function, 0) + n
    total = max(1, idle + busy)

    def ranked(counts: dict[str, int]) -> dict[str, float]:
        return {k: v / max(1, busy) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}

    return idle / total, ranked(parts), list(ranked(functions).items())


def print_profile(collapsed: Path, top: int = 15) -> None:
    idle, parts, functions = profile_shares(collapsed)
    print(f"profile of one daemon: {idle:.0%} of the samples idle; of the busy ones, by part")
    for name, share in parts.items():
        print(f"  {share:6.1%}  {name}")
    print(f"the {top} leaf functions with the most busy samples")
    for name, share in functions[:top]:
        print(f"  {share:6.1%}  {name}")


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--daemons", type=int, default=4)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--ops", type=int, default=24000)
    parser.add_argument("--batch", type=int, default=1, help="operations per request")
    parser.add_argument("--profile", type=Path, default=None, metavar="FILE")
    args = parser.parse_args(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="skueue-message-cost-"))
    try:
        with cluster(args.daemons, log_dir) as (nodes, metrics, pids):
            before = scrape(metrics)
            spy = None
            if args.profile is not None:
                installed = Path(sys.executable).parent / "py-spy"
                spy_cmd = str(installed) if installed.exists() else "py-spy"
                sampled = str(pids[min(1, len(pids) - 1)])
                spy = subprocess.Popen(
                    [spy_cmd, "record", "-p", sampled, "-r", "250", "-f", "raw",
                     "-o", str(args.profile), "--nonblocking"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
            bench = subprocess.run(
                [sys.executable, "-m", "skueue.cli.skueue", "bench", "--nodes", ",".join(nodes),
                 "--clients", str(args.clients), "--ops", str(args.ops),
                 "--batch", str(args.batch), "--json"],
                capture_output=True, text=True, timeout=BENCH_TIMEOUT_S, check=False,
            )  # fmt: skip
            if spy is not None:
                spy.send_signal(2)  # py-spy writes its samples when interrupted
                spy.wait(timeout=60)
            after = scrape(metrics)
        if bench.returncode != 0:
            raise SystemExit(f"skueue bench failed:\n{bench.stderr[-2000:]}")
        report = json.loads(bench.stdout)
        d = {k: after[k] - before[k] for k in COUNTERS}
        ops = args.ops
        out = {
            "peer_messages_per_op": d["skueue_peer_frames_sent_total"] / ops,
            "batches_per_op": d["skueue_batches_total"] / ops,
            "ops_per_batch": d["skueue_batch_operations_sum"]
            / max(1.0, d["skueue_batch_operations_count"]),
            "daemon_cpu_us_per_op": d["process_cpu_seconds_total"] / ops * 1e6,
            "ops_per_second": report["ops_per_second"],
            "p50_ms": report["latency_ms"]["all"]["p50"],
            "p99_ms": report["latency_ms"]["all"]["p99"],
        }
        print(f"{args.daemons} daemons, {args.clients} clients, {ops} operations "
              f"(the drain comes on top in the counters); {report['verdict']}")  # fmt: skip
        for key, value in out.items():
            print(f"  {key:22} {value:10.2f}")
        if args.profile is not None:
            print_profile(args.profile)
        return out
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
