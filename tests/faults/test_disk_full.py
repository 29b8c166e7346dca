"""A durable daemon on a small disk (a tmpfs the test mounts): it neither crashes with a
traceback nor loses an acknowledged element (runtime/durability/disk_space.py).

- Under its reserve it refuses enqueues, retryably and with the figures, serves the
  dequeues, and takes enqueues again once they freed the space.
- With no reserve, a write that fails for want of space stops it with one line; on a
  larger disk, a restart with the same directory gives back every acknowledged element,
  and nothing else than the one enqueue whose outcome was unknown.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import skueue.client.blocking
from skueue.client.errors import NodeUnavailable, SkueueError
from tests.e2e.daemons import HOST, Daemon, free_ports, spawn, stop, wait_ready

MIB = 1024 * 1024
BATCH = 1000  # elements per enqueue request, of VALUE_BYTES each
VALUE_BYTES = 1000
BATCHES_MAX = 600  # bounds the fill: 600 MB, more than any disk here holds
FREED_WITHIN_S = 15.0


def why_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (mounting a small tmpfs needs CAP_SYS_ADMIN)"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "needs mount and umount on PATH"
    return None


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    reason = why_unavailable()
    if reason is not None:
        pytest.skip(reason)
    mounted = tmp_path / "disk"
    mounted.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mounted)], check=True)
    try:
        yield mounted
    finally:
        subprocess.run(["umount", "-l", str(mounted)], check=False)


def resize(disk: Path, mib: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={mib}m", str(disk)], check=True)


def batch(number: int) -> list[bytes]:
    return [f"{number:05}-{k:04}-".encode().ljust(VALUE_BYTES, b"x") for k in range(BATCH)]


def start(disk: Path, tmp_path: Path, name: str, port: int, *options: str) -> Daemon:
    args = ["--listen", f"{HOST}:{port}", "--data-dir", str(disk / "data"), *options]
    daemon = spawn(args, tmp_path, name)
    wait_ready([daemon])
    return daemon


def drain(address: str) -> list[bytes]:
    got: list[bytes] = []
    with skueue.client.blocking.connect_blocking(address) as q:
        while taken := q.dequeue_many(BATCH):
            got.extend(taken)
    return got


def test_under_its_reserve_a_daemon_refuses_enqueues_serves_dequeues_and_recovers(
    small_disk: Path, tmp_path: Path
) -> None:
    # The default reserve (256 MiB) on a disk twice that size: the drain must fit in the
    # reserve too, as the retry window takes the results (up to 64 MiB of elements, in
    # each snapshot) before the dequeued records are freed.
    resize(small_disk, 512)
    (port,) = free_ports(1)
    address = f"{HOST}:{port}"
    daemon = start(small_disk, tmp_path, "reserve", port)
    try:
        acknowledged: list[bytes] = []
        refusal = None
        with skueue.client.blocking.connect_blocking(address) as q:
            for number in range(BATCHES_MAX):
                try:
                    q.enqueue_many(batch(number))
                except NodeUnavailable as e:
                    refusal = str(e)
                    break
                acknowledged.extend(batch(number))
        assert refusal is not None, "the disk never reached the reserve"
        assert "disk_free_min_bytes" in refusal and "MiB free" in refusal, refusal
        assert acknowledged and daemon.alive()
        got = drain(address)
        assert sorted(got) == sorted(acknowledged)  # nothing lost, nothing twice
        deadline = time.monotonic() + FREED_WITHIN_S
        with skueue.client.blocking.connect_blocking(address) as q:
            while True:  # dequeues freed the space: enqueues go again, by themselves
                try:
                    q.enqueue(b"after")
                    break
                except NodeUnavailable as e:
                    assert time.monotonic() < deadline, f"still refused: {e}"
                    time.sleep(0.5)
            assert q.dequeue() == b"after"
        said = daemon.stderr()
        assert "Traceback" not in said and "bug:" not in said, said[-3000:]
    finally:
        problems = stop([daemon])
        assert not problems, problems


def test_a_full_disk_stops_the_daemon_with_one_line_and_a_restart_loses_nothing(
    small_disk: Path, tmp_path: Path
) -> None:
    (port,) = free_ports(1)
    address = f"{HOST}:{port}"
    no_reserve = ("--disk-free-min", "0", "--snapshot-bytes", str(MIB))
    daemon = start(small_disk, tmp_path, "no-reserve", port, *no_reserve)
    again = None
    try:
        acknowledged: list[bytes] = []
        unknown: list[bytes] = []
        with skueue.client.blocking.connect_blocking(address, request_timeout_s=10) as q:
            for number in range(BATCHES_MAX):
                try:
                    q.enqueue_many(batch(number))
                except SkueueError:
                    unknown = batch(number)  # its outcome was never learned
                    break
                acknowledged.extend(batch(number))
        assert unknown, "the disk never filled"
        code = daemon.proc.wait(timeout=30)
        said = daemon.stderr()
        assert code == 1 and "the disk refused a write: No space left on device" in said, said
        assert "Traceback" not in said, said[-3000:]
        resize(small_disk, 512)
        again = start(small_disk, tmp_path, "restarted", port, *no_reserve)
        got = drain(address)
        extra = set(got) - set(acknowledged)
        assert len(got) == len(set(got)), "an element came back twice"
        assert set(acknowledged) <= set(got), f"{len(set(acknowledged) - set(got))} lost"
        assert extra <= set(unknown), f"{len(extra - set(unknown))} elements nobody enqueued"
    finally:
        problems = stop([d for d in (daemon, again) if d is not None and d.alive()])
        assert not problems, problems
