"""Recovery time of a durable daemon after kill -9, with the cluster holding many elements
(issue 11).

Starts 4 durable ``skueued`` (fsync batch, the default snapshot size unless
``--snapshot-bytes``), fills the queue with ``--elements`` elements of ``--value-bytes``
through 8 clients calling ``enqueue_many``, reports each daemon's RSS, kills one daemon
with SIGKILL, starts it again with the same data directory and times how long it takes
to be ready (snapshot restored and log replayed), then drains the queue and checks that
every element came back exactly once.  Bounded: every wait has a timeout, and every
process it starts is stopped.

    .venv/bin/python bench/recovery_time.py --elements 1000000
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

import skueue
from skueue.cluster.launch import skueued_command

HOST = "127.0.0.1"
READY_TIMEOUT_S = 600.0
RESULTS = Path(__file__).parent / "results" / "recovery_time.json"


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind((HOST, 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Daemons:
    def __init__(self, root: Path, n: int, snapshot_bytes: int | None) -> None:
        self.root = root
        self.addresses = [f"{HOST}:{p}" for p in free_ports(n)]
        self.snapshot_bytes = snapshot_bytes
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def argv(self, i: int) -> list[str]:
        peers = ",".join(a for j, a in enumerate(self.addresses) if j != i)
        argv = [*skueued_command(), "--listen", self.addresses[i], "--peers", peers,
                "--data-dir", str(self.root / f"data{i}"), "--log-level", "info"]
        if self.snapshot_bytes:
            argv += ["--snapshot-bytes", str(self.snapshot_bytes)]
        return argv

    def spawn(self, i: int, tag: str) -> subprocess.Popen[bytes]:
        log = self.root / f"d{i}-{tag}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(self.argv(i), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        if i < len(self.procs):
            self.procs[i], self.logs[i] = proc, log
        else:
            self.procs.append(proc)
            self.logs.append(log)
        return proc

    def wait_ready(self, i: int) -> float:
        start = time.monotonic()
        while time.monotonic() - start < READY_TIMEOUT_S:
            if "skueued ready" in self.logs[i].read_text(errors="replace"):
                return time.monotonic() - start
            if self.procs[i].poll() is not None:
                raise SystemExit(f"daemon {i} exited:\n{self.logs[i].read_text()[-2000:]}")
            time.sleep(0.01)
        raise SystemExit(f"daemon {i} not ready within {READY_TIMEOUT_S:g} s")

    def rss_mb(self, i: int) -> float:
        status = Path(f"/proc/{self.procs[i].pid}/status").read_text()
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        return int(match.group(1)) / 1024 if match else float("nan")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


async def fill(addresses: list[str], elements: int, value_bytes: int, batch: int) -> None:
    per_client = -(-elements // 8)

    async def client(c: int) -> None:
        start, end = c * per_client, min(elements, (c + 1) * per_client)
        async with skueue.connect(addresses[c % len(addresses)], request_timeout_s=120) as q:
            for first in range(start, end, batch):
                await q.enqueue_many([
                    f"{k:012d}".encode().ljust(value_bytes, b".")
                    for k in range(first, min(end, first + batch))
                ])

    async with anyio.create_task_group() as tg:
        for c in range(8):
            tg.start_soon(client, c)


async def drain(address: str, batch: int) -> list[bytes]:
    got: list[bytes] = []
    async with skueue.connect(address, request_timeout_s=120) as q:
        while True:
            part = await q.dequeue_many(batch)
            if not part:
                return got
            got.extend(part)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--elements", type=int, default=1_000_000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--snapshot-bytes", type=int, default=None)
    p.add_argument("--out", type=Path, default=RESULTS, help="where the JSON result goes")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="skueue-recovery-") as tmp:
        daemons = Daemons(Path(tmp), 4, args.snapshot_bytes)
        try:
            for i in range(4):
                daemons.spawn(i, "first")
            for i in range(4):
                daemons.wait_ready(i)
            t = time.monotonic()
            anyio.run(fill, daemons.addresses, args.elements, args.value_bytes, args.batch)
            fill_s = time.monotonic() - t
            rss = [round(daemons.rss_mb(i), 1) for i in range(4)]
            disk = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
            victim = 1
            daemons.procs[victim].send_signal(signal.SIGKILL)
            daemons.procs[victim].wait()
            daemons.spawn(victim, "restarted")
            recovery_s = daemons.wait_ready(victim)
            said = daemons.logs[victim].read_text()
            replayed = re.search(r"replayed the input log.*?records=(\d+)", said)
            restored = "restored the snapshot" in said
            t = time.monotonic()
            got = anyio.run(drain, daemons.addresses[0], args.batch)
            drain_s = time.monotonic() - t
        finally:
            daemons.stop()
    expected = {f"{k:012d}".encode().ljust(args.value_bytes, b".") for k in range(args.elements)}
    exact = len(got) == len(expected) and set(got) == expected
    result = {
        "elements": args.elements,
        "value_bytes": args.value_bytes,
        "fill_s": round(fill_s, 1),
        "fill_ops_per_s": round(args.elements / fill_s),
        "rss_mb_per_daemon": rss,
        "data_dir_bytes": disk,
        "recovery_s": round(recovery_s, 2),
        "snapshot_restored": restored,
        "records_replayed": int(replayed.group(1)) if replayed else None,
        "drained": len(got),
        "drain_s": round(drain_s, 1),
        "exactly_once": exact,
        "snapshot_bytes": args.snapshot_bytes or "default (64 MiB)",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for k, v in result.items():
        print(f"{k:20} {v}")
    return 0 if exact else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
