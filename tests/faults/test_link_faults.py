"""Connections that break under load lose nothing (issue 11, items 3 and 5).

Four real ``skueued`` processes, 8 clients with a mixed workload, and a proxy
(:mod:`tests.faults.chaos_proxy`) that resets a random connection every 20 to 150 ms,
cutting frames in the middle and throwing away what was in flight:

- **peer links**: every link between daemons runs through the proxy (``--advertise``);
  the links must make up for it (numbered frames, resent after the reconnect, taken once);
- **client connections**: every client connects through the proxy; the clients reconnect
  and send their waiting requests again, and the daemons answer a retry with its first
  attempt's outcome (``host/retries.py``), so nothing is applied twice and no removed
  element is lost with a broken reply.

Then the faults stop, a drain empties the queue, and the history must pass the checkers
with every element removed exactly once: nothing lost, nothing twice, nothing invented.
(Before, a single reset of a peer link wedged the cluster, and a reset client connection
left its requests' outcome unknown.)
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import trio

from skueue.host.address import Address
from tests.e2e.daemons import HOST, Daemon, free_ports, spawn, stop, wait_ready
from tests.e2e.oracle import assert_history_ok
from tests.faults.chaos_proxy import ChaosProxy
from tests.faults.workload import DAEMONS, LONG, SEED, fault_load, under_faults

OPS = 50_000 if LONG else 6_000
FAULTS_MAX = 2_000 if LONG else 40
FAULT_GAP_S = (0.02, 0.15)
WORKLOAD_TIMEOUT_S = 600.0 if LONG else 240.0


@pytest.mark.trio
@pytest.mark.parametrize(
    ("broken", "replicas"),
    [("peer links", 1), ("client connections", 1), ("peer links", 3)],
)
async def test_connection_resets_lose_and_duplicate_nothing(
    tmp_path: Path, broken: str, replicas: int
) -> None:
    """With ``--replicas 3`` (durable daemons) the daemon channels, which carry the
    replication messages, go through the proxy too and are reset as often as the links."""
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
            through_proxy = broken == "peer links"
            for i in range(DAEMONS):
                members = proxied if through_proxy else listen
                peers = ",".join(str(a) for j, a in enumerate(members) if j != i)
                args = ["--listen", str(listen[i]), "--peers", peers, "--log-level", "warning"]
                if replicas > 1:
                    args += ["--data-dir", str(tmp_path / f"data{i}"),
                             "--replicas", str(replicas)]  # fmt: skip
                if through_proxy:
                    args += ["--advertise", str(proxied[i])]
                daemons.append(spawn(args, tmp_path, f"d{i}"))
            await trio.to_thread.run_sync(wait_ready, daemons)
            nodes = listen if through_proxy else proxied
            config = fault_load([str(a) for a in nodes], OPS)

            async def faults() -> None:
                for _ in range(FAULTS_MAX):
                    await trio.sleep(rng.uniform(*FAULT_GAP_S))
                    proxy.break_one()

            result = await under_faults(config, faults, WORKLOAD_TIMEOUT_S)
            nursery.cancel_scope.cancel()
        print(f"{broken}, {replicas} replicas: {proxy.broken} connections reset; "
              f"{len(result.records)} operations")
        assert proxy.broken >= min(FAULTS_MAX, 10), "the proxy broke too few connections to tell"
        assert_history_ok(result, config)
        logs = "".join(d.stderr() for d in daemons)
        if through_proxy:
            assert "lost the link to a peer; reconnecting" in logs  # the faults were felt
        assert "bug:" not in logs
    finally:
        problems = stop(daemons)
        assert not problems, problems

