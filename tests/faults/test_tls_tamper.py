"""Forged frames on authenticated links (issue 13, tests): an attacker on the path between
members changes what a TLS peer link carries, and nothing of it is taken.

Four real ``skueued`` processes with mutual TLS and a cluster key; every peer link runs
through :mod:`tests.faults.chaos_proxy`, which now and then flips one bit of a chunk in
flight, or inserts a chunk the link carried before (a replay), in either direction.  TLS
authenticates every record (its MAC covers an implicit sequence number), so the
receiving daemon refuses the record and the link breaks; the daemons stay up, the links
reconnect (a new TLS session and key handshake) and send again what was not acknowledged
(:mod:`skueue.runtime.network.link_sender`).  8 clients run the mixed workload meanwhile, then a
drain, and the history must pass the checkers with every element removed exactly once.

Without TLS the same flips would reach the frame decoder or, worse, decode into a
different valid message: that is what this test shows TLS closes.
"""

from __future__ import annotations

import random
from pathlib import Path

import attrs
import pytest
import trio

from skueue.host.address import Address
from skueue.runtime.security.peer_auth import generate_key
from tests.e2e.certs import make_certs
from tests.e2e.daemons import HOST, Daemon, free_ports, spawn, stop, wait_ready
from tests.e2e.oracle import assert_history_ok
from tests.faults.chaos_proxy import ChaosProxy
from tests.faults.workload import DAEMONS, LONG, SEED, fault_load, under_faults

OPS = 30_000 if LONG else 4_000
TAMPERS_MAX = 1_000 if LONG else 30
TAMPER_GAP_S = (0.03, 0.2)
WORKLOAD_TIMEOUT_S = 600.0 if LONG else 120.0
# What OpenSSL says of a record that fails its check (a flipped bit usually breaks the
# MAC; one in a record's header can make its length or type wrong instead).
RECORD_REFUSED = ("BAD_RECORD_MAC", "DECRYPTION_FAILED", "RECORD", "LENGTH", "UNEXPECTED")


@pytest.mark.trio
@pytest.mark.parametrize(("how", "replicas"), [("flip", 1), ("replay", 1), ("flip", 3)])
async def test_tampered_tls_peer_links_are_reset_and_lose_nothing(
    tmp_path: Path, how: str, replicas: int
) -> None:
    """With ``--replicas 3`` (durable daemons) the tampered connections include the
    daemon channels that carry the replication messages."""
    print(f"replay with SKUEUE_FAULT_SEED={SEED}")
    rng = random.Random(SEED)
    certs = make_certs(tmp_path / "tls")
    key = tmp_path / "cluster.key"
    key.write_text(generate_key() + "\n")
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
                args = ["--listen", str(listen[i]), "--peers", peers, "--log-level", "warning",
                        "--advertise", str(proxied[i]), "--cluster-key", str(key),
                        *certs.daemon_args()]  # fmt: skip
                if replicas > 1:
                    args += ["--data-dir", str(tmp_path / f"data{i}"),
                             "--replicas", str(replicas)]  # fmt: skip
                daemons.append(spawn(args, tmp_path, f"d{i}"))
            await trio.to_thread.run_sync(wait_ready, daemons)
            config = fault_load([str(a) for a in listen], OPS)
            config = attrs.evolve(config, tls=certs.client())

            async def faults() -> None:
                for _ in range(TAMPERS_MAX):
                    await trio.sleep(rng.uniform(*TAMPER_GAP_S))
                    proxy.tamper_one(how)

            result = await under_faults(config, faults, WORKLOAD_TIMEOUT_S)
            nursery.cancel_scope.cancel()
        print(f"{how}, {replicas} replicas: {proxy.tampered} chunks tampered with; "
              f"{len(result.records)} operations")
        assert proxy.tampered >= min(TAMPERS_MAX, 10), "too few tampers to tell"
        assert_history_ok(result, config)
        for d in daemons:
            assert d.alive(), f"{d.address} died:\n{d.stderr()[-3000:]}"
        logs = "".join(d.stderr() for d in daemons)
        assert "Traceback" not in logs and "bug:" not in logs, logs[-3000:]
        # The tampering was felt, and refused by TLS: links broke on records that failed.
        refused = [
            line
            for line in logs.splitlines()
            if ("lost the link to a peer" in line or "a TLS connection failed" in line)
            and any(r in line.upper() for r in RECORD_REFUSED)
        ]
        assert refused, logs[-3000:]
        print(f"{len(refused)} log lines of links reset on a refused record")
    finally:
        problems = stop(daemons)
        assert not problems, problems
