"""A healthy start says nothing alarming (issue 28, item 13), on real daemons.

Every member of a static cluster is often given the same ``--peers`` list, its own
address included.  The daemon's connection to itself (how it tells that address is its
own) used to leave three false alarms: ``peer is down`` naming the daemon itself, a
``skueue_peer_up`` series for itself, and, under TLS, ``a TLS connection failed``.  And a
joiner with another cluster key showed on the seed as a generic TLS failure (or, without
TLS, as nothing), not as what it is: a peer that failed the cluster-key check.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import skueue.client.blocking
from skueue.runtime.security.peer_auth import generate_key
from tests.e2e.certs import Certs, make_certs
from tests.e2e.daemons import HOST, Cluster, Daemon, free_ports, refused, spawn, stop, wait_ready
from tests.e2e.test_metrics import scrape

SETTLE_S = 1.0  # the self-connection's close comes within milliseconds of the start


def events(d: Daemon) -> list[dict[str, Any]]:
    return [json.loads(line) for line in d.stderr().splitlines() if line.startswith("{")]


def key_file(path: Path) -> Path:
    path.write_text(generate_key() + "\n")
    return path


def start_listing_everyone(tmp_path: Path, n: int, extra: tuple[str, ...]) -> list[Daemon]:
    """``n`` daemons, each started with every address in ``--peers`` (its own too)."""
    addresses = [f"{HOST}:{p}" for p in free_ports(n)]
    everyone = ",".join(addresses)
    daemons = [
        spawn(["--listen", a, "--peers", everyone, "--in-memory", "--log-format", "json",
               "--metrics", f"{HOST}:0", *extra], tmp_path, f"d{i}")  # fmt: skip
        for i, a in enumerate(addresses)
    ]
    wait_ready(daemons)
    return daemons


@pytest.mark.parametrize("secured", [False, True], ids=["plaintext", "tls-and-key"])
def test_a_daemon_in_its_own_peers_starts_without_false_alarms(
    tmp_path: Path, secured: bool
) -> None:
    extra: tuple[str, ...] = ()
    client_tls = None
    if secured:
        certs = make_certs(tmp_path / "tls")
        extra = ("--cluster-key", str(key_file(tmp_path / "cluster.key")), *certs.daemon_args())
        client_tls = certs.client()
    daemons: list[Daemon] = []
    try:
        daemons = start_listing_everyone(tmp_path, 2, extra)
        with skueue.client.blocking.connect_blocking(daemons[0].address, tls=client_tls) as q:
            q.enqueue(b"one")
            assert q.dequeue() == b"one"
        time.sleep(SETTLE_S)
        for d in daemons:
            said = events(d)
            loud = [e for e in said if e["level"] in ("warning", "error", "critical")]
            assert not loud, loud
            own = [e for e in said if e.get("peer") == d.address]
            assert not own, own  # neither down nor back: it is no peer of its own
            # A static member does not join: "joined" is for daemons that did.
            assert "joined" not in {e["event"] for e in said}, said
            (served,) = [e["address"] for e in said if e["event"] == "serving metrics"]
            up = {s[1]["peer"] for s in scrape(served) if s[0] == "skueue_peer_up"}
            others = {o.address for o in daemons if o is not d}
            assert up == others, up
    finally:
        assert not stop(daemons)


@pytest.mark.parametrize("secured", [False, True], ids=["plaintext", "tls"])
def test_the_seed_logs_that_a_joiner_failed_the_cluster_key_check(
    skueued_cluster: Any, tmp_path: Path, secured: bool
) -> None:
    tls: tuple[str, ...] = ()
    if secured:
        tls = Certs(make_certs(tmp_path / "tls").dir).daemon_args()
    key = key_file(tmp_path / "cluster.key")
    cluster: Cluster = skueued_cluster(
        1, "queue", ("--cluster-key", str(key), "--in-memory", "--log-format", "json", *tls)
    )
    (port,) = free_ports(1)
    joiner = f"{HOST}:{port}"
    args = ["--listen", joiner, "--join", cluster.addresses[0], "--in-memory",
            "--cluster-key", str(key_file(tmp_path / "other.key")), *tls]  # fmt: skip
    code, err = refused(args, tmp_path, "joiner")
    assert code == 1 and "failed the cluster-key check" in err, err
    seed = cluster.daemons[0]
    deadline = time.monotonic() + 5
    while not [e for e in events(seed) if e["level"] == "warning"]:
        assert time.monotonic() < deadline, seed.stderr()
        time.sleep(0.05)
    warnings = [e for e in events(seed) if e["level"] == "warning"]
    assert len(warnings) == 1, warnings
    (warning,) = warnings
    assert "failed the cluster-key check" in warning["event"], warning
    assert warning["claimed"] == joiner, warning
