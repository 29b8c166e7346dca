"""Recovery time of a durable daemon after kill -9, with the cluster holding many elements
(issue 11).

Starts 4 durable ``skueued`` (fsync batch, the default snapshot size unless
``--snapshot-bytes``), fills the queue with ``--elements`` elements of ``--value-bytes``
through 8 clients calling ``enqueue_many``, reports each daemon's RSS, kills one daemon
with SIGKILL, starts it again with the same data directory and times how long it takes
to be ready (snapshot restored and log replayed), then drains the queue and checks that
every element came back exactly once.  Bounded: every wait has a timeout, and every
process it starts is stopped.

With ``--replicas 3 --lose-disk`` the killed daemon's data directory is deleted too (its
host lost for good), and it is started with an empty one and ``--restore-from-copies``:
the time to ready is then the restore from the others' copies (runtime/restore.py).

    .venv/bin/python bench/recovery_time.py --elements 1000000
    .venv/bin/python bench/recovery_time.py --elements 100000 --replicas 3 --lose-disk \
        --out bench/results/restore_from_copies.json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
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
    def __init__(self, root: Path, n: int, snapshot_bytes: int | None, replicas: int) -> None:
        self.root = root
        self.addresses = [f"{HOST}:{p}" for p in free_ports(n)]
        self.snapshot_bytes = snapshot_bytes
        self.replicas = replicas
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def argv(self, i: int) -> list[str]:
        peers = ",".join(a for j, a in enumerate(self.addresses) if j != i)
        argv = [*skueued_command(), "--listen", self.addresses[i], "--peers", peers,
                "--data-dir", str(self.root / f"data{i}"), "--log-level", "info",
                "--replicas", str(self.replicas)]
        if self.replicas > 1:
            # The killed daemon comes back (or is restored) at its address: a copy
            # taking its process over meanwhile would refuse the restore.
            argv.append("--no-failover")
        if self.snapshot_bytes:
            argv += ["--snapshot-bytes", str(self.snapshot_bytes)]
        return argv

    def spawn(self, i: int, tag: str, *extra: str) -> subprocess.Popen[bytes]:
        log = self.root / f"d{i}-{tag}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([*self.argv(i), *extra], stdout=out, stderr=subprocess.STDOUT,
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

    def rss_mb(self, i: int, field: str = "VmRSS") -> float:
        """Resident memory now (VmRSS) or at its peak so far (VmHWM), in MB."""
        status = Path(f"/proc/{self.procs[i].pid}/status").read_text()
        match = re.search(rf"{field}:\s+(\d+) kB", status)
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
                await q.enqueue_many(
                    [element(k, value_bytes) for k in range(first, min(end, first + batch))]
                )

    async with anyio.create_task_group() as tg:
        for c in range(8):
            tg.start_soon(client, c)


def element(k: int, value_bytes: int) -> bytes:
    return f"{k:012d}".encode().ljust(value_bytes, b".")


async def entries_per_daemon(addresses: list[str]) -> list[int]:
    """The elements each daemon holds (the De Bruijn ranges are not even: the memory of
    a daemon follows its share)."""
    async with skueue.connect(addresses[0], admin=True) as q:
        members = (await q.stats()).get("members", [])
    held = {m.get("address"): m.get("entries", 0) for m in members}
    return [held.get(a, -1) for a in addresses]


async def drain(address: str, batch: int, value_bytes: int) -> tuple[list[int], int]:
    """The numbers of the elements drained, and how many came back altered (only the
    numbers are kept: 2 x 10^6 elements of 1 KB would take 2 GB here)."""
    got: list[int] = []
    altered = 0
    async with skueue.connect(address, request_timeout_s=120) as q:
        while True:
            part = await q.dequeue_many(batch)
            if not part:
                return got, altered
            for value in part:
                k = int(value[:12]) if value[:12].isdigit() else -1
                altered += value != element(k, value_bytes)
                got.append(k)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--elements", type=int, default=1_000_000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--snapshot-bytes", type=int, default=None)
    p.add_argument("--replicas", type=int, default=1, help="skueued --replicas")
    p.add_argument("--lose-disk", action="store_true", help="delete the killed daemon's data "
                   "directory and restore it from the copies (needs --replicas 3)")
    p.add_argument("--out", type=Path, default=RESULTS, help="where the JSON result goes")
    args = p.parse_args()
    if args.lose_disk and args.replicas == 1:
        p.error("--lose-disk needs --replicas 3: with 1, no other member keeps a copy")
    with tempfile.TemporaryDirectory(prefix="skueue-recovery-") as tmp:
        daemons = Daemons(Path(tmp), 4, args.snapshot_bytes, args.replicas)
        try:
            for i in range(4):
                daemons.spawn(i, "first")
            for i in range(4):
                daemons.wait_ready(i)
            t = time.monotonic()
            anyio.run(fill, daemons.addresses, args.elements, args.value_bytes, args.batch)
            fill_s = time.monotonic() - t
            rss = [round(daemons.rss_mb(i), 1) for i in range(4)]
            peak = [round(daemons.rss_mb(i, "VmHWM"), 1) for i in range(4)]
            # Of the resident memory, what is the heap (the rest maps files: page files)
            anon = [round(daemons.rss_mb(i, "RssAnon"), 1) for i in range(4)]
            held = anyio.run(entries_per_daemon, daemons.addresses)
            disk = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
            victim = 1
            daemons.procs[victim].send_signal(signal.SIGKILL)
            daemons.procs[victim].wait()
            if args.lose_disk:
                shutil.rmtree(Path(tmp) / f"data{victim}")
                daemons.spawn(victim, "restored", "--restore-from-copies")
            else:
                daemons.spawn(victim, "restarted")
            recovery_s = daemons.wait_ready(victim)
            restarted_peak = round(daemons.rss_mb(victim, "VmHWM"), 1)
            said = daemons.logs[victim].read_text()
            replayed = re.search(r"replayed the input log.*?records=(\d+)", said)
            restored = "restored the snapshot" in said
            t = time.monotonic()
            got, altered = anyio.run(drain, daemons.addresses[0], args.batch, args.value_bytes)
            drain_s = time.monotonic() - t
            drain_peak = [round(daemons.rss_mb(i, "VmHWM"), 1) for i in range(4)]
        finally:
            daemons.stop()
    exact = not altered and sorted(got) == list(range(args.elements))
    result = {
        "elements": args.elements,
        "value_bytes": args.value_bytes,
        "fill_s": round(fill_s, 1),
        "fill_ops_per_s": round(args.elements / fill_s),
        "entries_per_daemon": held,
        "rss_mb_per_daemon": rss,
        "peak_rss_mb_after_fill": peak,
        "anon_rss_mb_after_fill": anon,
        "peak_rss_mb_after_drain": drain_peak,
        "restarted_peak_rss_mb": restarted_peak,
        "data_dir_bytes": disk,
        "recovery_s": round(recovery_s, 2),
        "snapshot_restored": restored,
        "records_replayed": int(replayed.group(1)) if replayed else None,
        "drained": len(got),
        "drain_s": round(drain_s, 1),
        "altered": altered,
        "exactly_once": exact,
        "snapshot_bytes": args.snapshot_bytes or "default (64 MiB)",
        "replicas": args.replicas,
        "lost_disk": args.lose_disk,
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
