"""What the daemon logs: batch sizes at debug for ``skueue analyze`` (issue 8, item 20);
at info, its lifecycle and nothing per operation (issue 15, item 4)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

import skueue
from tests.e2e.daemons import (
    HOST,
    Cluster,
    Daemon,
    free_ports,
    refused,
    skueued_command,
    spawn,
    stop,
    wait_ready,
)

LOAD_CLIENTS = 8
LOAD_REQUESTS = 400  # enqueues, and as many dequeues


def test_debug_logs_carry_the_size_of_every_batch_with_operations(
    skueued_cluster: Callable[..., Cluster],
) -> None:
    cluster = skueued_cluster(2, extra_args=("--log-level", "debug", "--log-format", "json"))

    async def main() -> None:
        with trio.fail_after(30):
            async with skueue.connect(cluster.addresses[0]) as q:
                await q.enqueue_many([b"a", b"b", b"c"])
                assert await q.dequeue_many(3) == [b"a", b"b", b"c"]

    trio.run(main)
    events = [
        json.loads(line)
        for line in cluster.daemons[0].stderr().splitlines()
        if line.startswith("{") and '"batch up"' in line
    ]
    assert events, "no 'batch up' event in the debug log"
    assert all(e["batch_ops"] > 0 and e["node"] in ("left", "middle", "right") for e in events)
    assert sum(e["batch_ops"] for e in events if e["node"] == "left") >= 6  # 3 in, 3 out


def info_events(d: Daemon) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in d.stderr().splitlines() if ln.startswith("{")]


def test_info_stays_small_under_load_and_names_each_step_of_the_lifecycle(
    skueued_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """Issue 15, item 4: no line per operation at info; start, ready, peer down and
    back, and recovery with its duration are there."""
    cluster = skueued_cluster(2, extra_args=("--log-format", "json"))
    first, second = cluster.daemons
    before = len(info_events(first))

    async def load() -> None:
        async def client(i: int) -> None:
            async with skueue.connect(cluster.addresses[i % 2]) as q:
                for j in range(LOAD_REQUESTS // LOAD_CLIENTS):
                    await q.enqueue(b"%d-%d" % (i, j))
                    await q.dequeue()

        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                for i in range(LOAD_CLIENTS):
                    nursery.start_soon(client, i)

    trio.run(load)
    during = info_events(first)[before:]
    assert len(during) <= 2, during  # the load's 2 * LOAD_REQUESTS requests: no line each
    started = [e["event"] for e in info_events(first)[:before]]
    assert started[0] == "starting" and "ready" in started

    restart_args = second.proc.args[len(skueued_command()) :]
    second.proc.terminate()
    assert second.proc.wait(timeout=10) == 0
    again = spawn(list(restart_args), tmp_path, "again")
    try:
        wait_ready([again])
        deadline = time.monotonic() + 20
        while not any(e["event"] == "peer is back" for e in info_events(first)):
            assert time.monotonic() < deadline, "no 'peer is back' line"
            time.sleep(0.1)
        events = {e["event"]: e for e in info_events(first)[before:]}
        assert events["peer is down"]["peer"] == second.address
        assert events["peer is back"]["down_s"] >= 0
        recovered = {e["event"]: e for e in info_events(again)}["recovery done"]
        assert recovered["seconds"] >= 0 and recovered["records"] > 0
        assert "ready" in {e["event"] for e in info_events(again)}
    finally:
        assert not stop([again]), again.stderr()


def test_in_json_mode_every_line_is_json_down_to_the_shutdown(tmp_path: Path) -> None:
    """Issue 28, item 14: with ``--log-format json`` the SIGTERM line is a JSON event
    too, so that ``skueue analyze`` of the log finds no malformed line."""
    (port,) = free_ports(1)
    daemon = spawn(
        ["--listen", f"{HOST}:{port}", "--in-memory", "--log-format", "json"], tmp_path, "json"
    )
    try:
        wait_ready([daemon])
    finally:
        assert not stop([daemon]), daemon.stderr()
    assert daemon.proc.returncode == 0, daemon.stderr()
    lines = daemon.stderr().splitlines()
    assert lines, "nothing logged"
    for line in lines:
        json.loads(line)  # each line on its own is one JSON object
    events = [json.loads(line) for line in lines]
    assert events[-1]["event"] == "shutting down" and events[-1]["signal"] == "SIGTERM", events


def test_a_start_up_error_in_json_mode_is_one_json_line(tmp_path: Path) -> None:
    """A daemon that cannot start says why in the format it was asked for."""
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        address = f"{HOST}:{taken.getsockname()[1]}"
        code, err = refused(["--listen", address, "--in-memory", "--log-format", "json"],
                            tmp_path, "taken")  # fmt: skip
    assert code == 1, err
    (line,) = err.splitlines()
    event = json.loads(line)
    assert event["level"] == "error" and "cannot listen" in event["event"], event
