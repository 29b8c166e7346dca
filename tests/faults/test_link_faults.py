"""Peer links that break under load lose nothing (issue 11, item 3: reliable links).

Four real ``skueued`` processes; every link between them runs through a proxy
(:mod:`tests.faults.chaos_proxy`) that resets a random connection every 20 to 150 ms while
8 clients run a mixed workload, cutting frames in the middle and throwing away what was in
flight.  The links must make up for it: numbered frames, resent after the reconnect,
taken once.  Then the faults stop, a drain empties the queue, and the history must pass
the checkers with every element removed exactly once: nothing lost, nothing twice,
nothing invented.

The clients talk to the daemons directly: this test is about the links between daemons.
(Before the links were reliable, a single reset lost the frames in flight and wedged the
cluster: requests timed out.)
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import anyio
import pytest
import trio

from skueue.cluster.loadgen import LoadConfig, LoadResult, drain, run_workload
from skueue.runtime.address import Address
from tests.e2e.daemons import HOST, Daemon, free_ports, spawn, stop, wait_ready
from tests.e2e.oracle import assert_history_ok
from tests.faults.chaos_proxy import ChaosProxy

LONG = os.environ.get("SKUEUE_FAULTS") == "long"
DAEMONS = 4
CLIENTS = 8
OPS = 50_000 if LONG else 6_000
FAULTS_MAX = 2_000 if LONG else 40
FAULT_GAP_S = (0.02, 0.15)
WORKLOAD_TIMEOUT_S = 600.0 if LONG else 90.0
SEED = int(os.environ.get("SKUEUE_FAULT_SEED", "11"))


@pytest.mark.trio
async def test_resets_of_peer_links_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    print(f"replay with SKUEUE_FAULT_SEED={SEED}")
    rng = random.Random(SEED)
    ports = free_ports(2 * DAEMONS)
    listen = [Address(HOST, p) for p in ports[:DAEMONS]]
    proxied = [Address(HOST, p) for p in ports[DAEMONS:]]
    proxy = ChaosProxy(rng)
    daemons: list[Daemon] = []
    try:
        async with trio.open_nursery() as nursery:
            for i in range(DAEMONS):
                await nursery.start(proxy.serve, proxied[i].port, listen[i])
            for i in range(DAEMONS):
                peers = ",".join(str(a) for j, a in enumerate(proxied) if j != i)
                args = ["--listen", str(listen[i]), "--advertise", str(proxied[i]),
                        "--peers", peers, "--log-level", "warning"]
                daemons.append(spawn(args, tmp_path, f"d{i}"))
            await trio.to_thread.run_sync(wait_ready, daemons)
            config = LoadConfig(
                nodes=tuple(d.address for d in daemons),
                clients=CLIENTS,
                ops=OPS,
                insert_ratio=0.55,
                value_bytes=32,
                seed=SEED,
                request_timeout_s=60.0,
            )
            result = await _workload_under_faults(config, proxy, rng)
            with anyio.fail_after(WORKLOAD_TIMEOUT_S):
                await drain(config, result)
            nursery.cancel_scope.cancel()
        print(f"{proxy.broken} connections reset; {len(result.records)} operations recorded")
        assert proxy.broken >= min(FAULTS_MAX, 10), "the proxy broke too few links to tell"
        assert_history_ok(result, config)
        warnings = "".join(d.stderr() for d in daemons)
        assert "lost the link to a peer; reconnecting" in warnings  # the faults were felt
        assert "bug:" not in warnings
    finally:
        problems = stop(daemons)
        assert not problems, problems


async def _workload_under_faults(
    config: LoadConfig, proxy: ChaosProxy, rng: random.Random
) -> LoadResult:
    async def faults(stop_faults: trio.CancelScope) -> None:
        with stop_faults:
            for _ in range(FAULTS_MAX):
                await trio.sleep(rng.uniform(*FAULT_GAP_S))
                proxy.break_one()

    stop_faults = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(faults, stop_faults)
        with anyio.fail_after(WORKLOAD_TIMEOUT_S):
            result = await run_workload(config)
        stop_faults.cancel()
    return result
