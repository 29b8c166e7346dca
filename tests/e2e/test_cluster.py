"""Real ``skueued`` clusters under a concurrent workload, and the daemon's life cycle.

Each workload test records a history from real clients, drains the structure, and holds
it to the checkers (linearizability by certificate, and sequential consistency), and to
the simplest oracle of all: every inserted element came out exactly once.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import attrs
import pytest
import trio

import skueue.client.api
from skueue.check.checker import check
from skueue.check.history import Record
from skueue.cluster.loadgen import LoadConfig, LoadResult, run_load
from tests.e2e.daemons import HOST, Cluster, free_ports, skueued_command, spawn, stop
from tests.e2e.oracle import assert_exactly_once, assert_history_ok

LOAD_TIMEOUT_S = 90.0
EXIT_TIMEOUT_S = 5.0

StartCluster = Callable[..., Cluster]


def assert_oracle_rejects_corruptions(records: list[Record]) -> None:
    """The oracle can fail: a real history with one removal lost, or with the results of
    the first and last removals swapped, does not pass."""
    removals = [i for i, r in enumerate(records) if not r.inserts and r.value is not None]
    assert len(removals) > 100
    first, last = removals[0], removals[-1]
    with pytest.raises(AssertionError, match="never removed"):
        assert_exactly_once(records[:first] + records[first + 1 :])
    swapped = list(records)
    swapped[first] = attrs.evolve(records[first], value=records[last].value)
    swapped[last] = attrs.evolve(records[last], value=records[first].value)
    for model in ("linearizable", "sc"):
        assert not check(swapped, model=model, method="certificate", drained=True).ok


def load_config(cluster: Cluster, ops: int, clients: int, seed: int) -> LoadConfig:
    return LoadConfig(
        nodes=tuple(cluster.addresses),
        clients=clients,
        ops=ops,
        insert_ratio=0.55,
        value_bytes=32,
        seed=seed,
        drain=True,
        structure=cluster.structure,
    )


async def run_bounded(config: LoadConfig) -> LoadResult:
    with anyio.fail_after(LOAD_TIMEOUT_S):
        return await run_load(config)


# -- workloads ---------------------------------------------------------------------------


@pytest.mark.trio
async def test_queue_cluster_trio_is_linearizable(skueued_cluster: StartCluster) -> None:
    """3 daemons, 4 concurrent trio clients, 2,000 mixed operations, then drain."""
    cluster = skueued_cluster(3, "queue")
    config = load_config(cluster, ops=2000, clients=4, seed=1)
    result = await run_bounded(config)
    assert_history_ok(result, config)
    assert_oracle_rejects_corruptions(result.records)
    assert any(r.op == "dequeue" and r.value is None for r in result.records)  # the drain's end


def test_queue_cluster_asyncio_is_linearizable(skueued_cluster: StartCluster) -> None:
    """The same workload from asyncio: the client is written against anyio."""
    cluster = skueued_cluster(3, "queue")

    config = load_config(cluster, ops=2000, clients=4, seed=2)

    async def main() -> LoadResult:
        assert anyio.get_current_task() is not None  # anyio sees the asyncio loop
        return await asyncio.wait_for(run_load(config), LOAD_TIMEOUT_S)

    result = asyncio.run(main())
    assert_history_ok(result, config)


@pytest.mark.trio
async def test_stack_cluster_is_linearizable(skueued_cluster: StartCluster) -> None:
    """A stack cluster (``--structure stack``): push/pop from 4 clients, then drain."""
    cluster = skueued_cluster(3, "stack")
    async with skueue.client.api.connect(cluster.addresses[0]) as q:
        assert q.structure == "stack"
    config = load_config(cluster, ops=2000, clients=4, seed=3)
    result = await run_bounded(config)
    assert {r.op for r in result.records} == {"push", "pop"}
    assert_history_ok(result, config)


@pytest.mark.trio
async def test_every_daemon_serves_and_stats_sum_up(skueued_cluster: StartCluster) -> None:
    """Elements enqueued at one daemon come out at another, in FIFO order for a single
    client; ``stats`` gathers every member's counters."""
    cluster = skueued_cluster(3, "queue")
    a, b, c = cluster.addresses
    values = [f"v{i}".encode() for i in range(50)]
    with trio.fail_after(30):
        async with skueue.client.api.connect(a) as qa, skueue.client.api.connect(b) as qb:
            await qa.enqueue_many(values)
            got = await qb.dequeue_many(60)
            assert got == values  # the elements only: the queue ran dry after 50
            assert await qb.dequeue_many(10) == []
        async with skueue.client.api.connect(c) as qc:
            stats = await qc.stats()
    assert stats["processes"] == 3 and stats["unreachable"] == []
    assert stats["totals"]["inserted"] == 50
    assert stats["totals"]["removed"] == 50
    assert stats["totals"]["empty"] == 20


# -- life cycle --------------------------------------------------------------------------


def test_sigterm_exits_zero_promptly_and_leaves_nothing(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(3, "queue")

    async def touch() -> None:
        for address in cluster.addresses:
            async with skueue.client.api.connect(address) as q:
                await q.enqueue(b"x")
                assert await q.dequeue() == b"x"

    trio.run(touch)
    for daemon in cluster.daemons:
        t0 = time.monotonic()
        problems = stop([daemon], timeout_s=EXIT_TIMEOUT_S)
        elapsed = time.monotonic() - t0
        assert not problems, f"{problems} stderr:\n{daemon.stderr()}"
        assert daemon.proc.returncode == 0, daemon.stderr()
        assert elapsed < EXIT_TIMEOUT_S
        assert "Traceback" not in daemon.stderr(), daemon.stderr()
        assert "SIGTERM, shutting down" in daemon.stderr()


def test_port_in_use_exits_nonzero_with_one_clear_line(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((HOST, 0))
        taken.listen()
        address = f"{HOST}:{taken.getsockname()[1]}"
        daemon = spawn(["--listen", address], tmp_path, "taken")
        try:
            daemon.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            stop([daemon])
            pytest.fail(f"skueued kept running on a port in use: {daemon.stderr()}")
    assert daemon.proc.returncode not in (0, None)
    err = [ln for ln in daemon.stderr().splitlines() if ln.strip()]
    assert len(err) == 1, err
    assert err[0].startswith("skueued: error: cannot listen on"), err
    assert address in err[0]
    assert "READY" not in daemon.stdout().upper()


def test_unreachable_peer_never_ready_and_sigterm_stops_it(tmp_path: Path) -> None:
    """The daemon retries its peer for ``connect_timeout_s`` (30 s); we only check that it
    does not claim to be ready meanwhile and that SIGTERM ends it at once."""
    listen, nobody = free_ports(2)
    daemon = spawn(
        ["--listen", f"{HOST}:{listen}", "--peers", f"{HOST}:{nobody}"], tmp_path, "lonely"
    )
    try:
        time.sleep(1.0)
        assert daemon.alive(), daemon.stderr()
        assert "ready" not in daemon.stdout(), daemon.stdout()
    finally:
        t0 = time.monotonic()
        problems = stop([daemon], timeout_s=EXIT_TIMEOUT_S)
    assert not problems, problems
    assert time.monotonic() - t0 < EXIT_TIMEOUT_S
    assert daemon.proc.returncode in (0, -signal.SIGTERM), daemon.stderr()
    assert "Traceback" not in daemon.stderr(), daemon.stderr()


def test_skueued_command_is_runnable() -> None:
    """The fixture's command line is a real daemon: ``--help`` works and exits 0."""
    out = subprocess.run(
        [*skueued_command(), "--help"], capture_output=True, timeout=30, check=False
    )
    assert out.returncode == 0 and b"--listen" in out.stdout
