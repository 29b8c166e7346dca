"""A durable daemon's element pages damaged on disk (issue 11, torn tail): the torn tail of
the last append is cut at recovery and the replay makes that element again; a byte
changed inside an element the snapshot names stops the start with one clear line.  In
neither case does a client ever get wrong bytes."""

from __future__ import annotations

import signal
from pathlib import Path

import skueue
from tests.e2e.daemons import HOST, Daemon, free_ports, spawn, stop, wait_ready

ELEMENT_BYTES = 1024


def elements(n: int) -> list[bytes]:
    return [f"{k:08d}".encode().ljust(ELEMENT_BYTES, b".") for k in range(n)]


def start(tmp_path: Path, address: str, snapshot_bytes: int, name: str) -> Daemon:
    args = ["--listen", address, "--data-dir", str(tmp_path / "data"),
            "--snapshot-bytes", str(snapshot_bytes), "--log-level", "info"]
    return spawn(args, tmp_path, name)


def fill_then_kill(tmp_path: Path, address: str, snapshot_bytes: int, n: int) -> Path:
    """Enqueue ``n`` elements one request each, kill -9; the first data page's path."""
    daemon = start(tmp_path, address, snapshot_bytes, "first")
    try:
        wait_ready([daemon])
        with skueue.connect_blocking(address, request_timeout_s=20) as q:
            for element in elements(n):
                q.enqueue(element)
        daemon.proc.send_signal(signal.SIGKILL)
        daemon.proc.wait(timeout=10)
    finally:
        assert not stop([daemon])
    return tmp_path / "data" / "entries" / "data-000000000000.page"


def test_a_torn_tail_is_cut_and_the_replay_makes_the_element_again(tmp_path: Path) -> None:
    address = f"{HOST}:{free_ports(1)[0]}"
    n = 50
    # No snapshot (1 MiB of log is not reached): every record is made again by the replay.
    page = fill_then_kill(tmp_path, address, 1 << 20, n)
    with page.open("r+b") as f:
        f.truncate(n * ELEMENT_BYTES - ELEMENT_BYTES // 2)  # mid-way through the last one
    daemon = start(tmp_path, address, 1 << 20, "restarted")
    try:
        wait_ready([daemon])
        with skueue.connect_blocking(address, request_timeout_s=20) as q:
            drained = q.dequeue_many(n + 10)
        assert drained == elements(n)  # all of them, in order, none altered
        assert "storage.torn_tail_cut" in daemon.stderr()
    finally:
        assert not stop([daemon])


def test_a_corrupt_element_that_a_snapshot_names_stops_the_start(tmp_path: Path) -> None:
    address = f"{HOST}:{free_ports(1)[0]}"
    # 4 KiB of log per snapshot: the first elements are named by one.
    page = fill_then_kill(tmp_path, address, 4096, 20)
    with page.open("r+b") as f:
        f.seek(ELEMENT_BYTES // 2)  # inside the first element
        byte = f.read(1)
        f.seek(ELEMENT_BYTES // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    daemon = start(tmp_path, address, 4096, "restarted")
    try:
        assert daemon.proc.wait(timeout=60) != 0
        err = daemon.stderr()
        assert "storage.corrupt_records" in err
        refusal = [line for line in err.splitlines() if "corrupt elements" in line]
        assert len(refusal) == 1 and "Traceback" not in err, err
    finally:
        assert not stop([daemon])
