"""TLS on real daemons (issue 13, item 2): a cluster with mutual TLS on its peer links,
the cluster key inside it and TLS clients serves a linearizable workload; client
certificates stand in for tokens, with their roles; a member or client that speaks
plaintext to a TLS daemon, or TLS to a plaintext one, gets one clear line and the
daemons serve on; TLS handshakes that never finish are strangers like any other
(``hello_pending_per_source_max``); a daemon listening beyond loopback without TLS
refuses to start unless ``--plaintext`` says so."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

import skueue.client.api
import skueue.client.blocking
from skueue.client.errors import NodeUnreachable, RequestRejected
from skueue.cluster.loadgen import LoadConfig, run_load
from skueue.runtime.limits import Limits
from skueue.runtime.security.peer_auth import generate_key
from tests.e2e.certs import Certs, make_certs
from tests.e2e.daemons import HOST, Cluster, free_ports, refused, skueued_command
from tests.e2e.oracle import assert_history_ok

StartCluster = Callable[..., Cluster]
TIMEOUT_S = 120.0


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "tls")


def keyed(tmp_path: Path) -> tuple[str, ...]:
    key = tmp_path / "cluster.key"
    key.write_text(generate_key() + "\n")
    return ("--cluster-key", str(key), "--in-memory")


@pytest.mark.trio
async def test_a_cluster_with_mutual_tls_and_a_key_serves_a_linearizable_workload(
    skueued_cluster: StartCluster, tmp_path: Path, certs: Certs
) -> None:
    cluster = skueued_cluster(3, "queue", (*keyed(tmp_path), *certs.daemon_args()))
    config = LoadConfig(
        nodes=tuple(cluster.addresses), clients=4, ops=600, insert_ratio=0.6, value_bytes=16,
        seed=7, drain=True, structure="queue", tls=certs.client(),
    )  # fmt: skip
    with anyio.fail_after(TIMEOUT_S):
        result = await run_load(config)
    assert_history_ok(result, config)
    with pytest.raises(NodeUnreachable, match="speaks TLS only"):
        async with skueue.client.api.connect(cluster.addresses[0], tls=False):
            pass
    assert "Traceback" not in cluster.stderr()


def test_client_certificates_stand_in_for_tokens_with_their_roles(
    skueued_cluster: StartCluster, tmp_path: Path, certs: Certs
) -> None:
    cluster = skueued_cluster(2, "queue", (*keyed(tmp_path), *certs.daemon_args(client_ca=True)))
    node, other = cluster.addresses
    with pytest.raises(RequestRejected, match="serves only clients with a TLS client cert"):
        skueue.client.blocking.connect_blocking(node, tls=certs.client())
    with skueue.client.blocking.connect_blocking(node, tls=certs.client("alice")) as q:
        q.enqueue(b"by certificate")
        assert q.dequeue() == b"by certificate"
        with pytest.raises(RequestRejected, match="need an admin token"):
            q.leave()
    # The command line, with the admin certificate from the environment: it may make a
    # daemon leave (the daemon then exits 0).
    crt, key = certs.pair("ops")
    env = {**os.environ, "SKUEUE_TLS_CA": str(certs.ca), "SKUEUE_TLS_CERT": str(crt),
           "SKUEUE_TLS_KEY": str(key)}  # fmt: skip
    cli = [sys.executable, "-m", "skueue.cli.skueue", "leave", "--node", other]
    left = subprocess.run(cli, capture_output=True, text=True, timeout=90, env=env, check=False)
    assert left.returncode == 0, left.stderr
    assert cluster.daemons[1].proc.wait(timeout=30) == 0


def test_a_client_checks_the_daemons_certificate_against_the_address_it_dials(
    skueued_cluster: StartCluster, certs: Certs
) -> None:
    cluster = skueued_cluster(1, "queue", ("--in-memory", *certs.daemon_args("localhost-only")))
    with pytest.raises(NodeUnreachable, match="CERTIFICATE_VERIFY_FAILED"):
        skueue.client.blocking.connect_blocking(cluster.addresses[0], tls=certs.client())
    cli = [sys.executable, "-m", "skueue.cli.skueue", "stats", "--node", cluster.addresses[0],
           "--tls-ca", str(certs.ca)]  # fmt: skip
    shown = subprocess.run(cli, capture_output=True, text=True, timeout=30, check=False)
    assert shown.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in shown.stderr
    assert len(shown.stderr.strip().splitlines()) == 1, shown.stderr


@pytest.mark.parametrize("joiner_tls", [False, True], ids=["plaintext-to-tls", "tls-to-plaintext"])
def test_a_member_without_tls_and_one_with_it_refuse_each_other_in_one_line(
    skueued_cluster: StartCluster, tmp_path: Path, certs: Certs, joiner_tls: bool
) -> None:
    seed_args = () if joiner_tls else certs.daemon_args()
    cluster = skueued_cluster(1, "queue", ("--in-memory", *seed_args))
    port = free_ports(1)[0]
    args = ["--listen", f"{HOST}:{port}", "--join", cluster.addresses[0], "--in-memory"]
    if joiner_tls:
        args += certs.daemon_args()
    code, err = refused(args, tmp_path, f"joiner-{port}")
    says = "does not speak TLS" if joiner_tls else "speaks TLS only"
    assert code == 1 and says in err and "Traceback" not in err, err
    seed_log = cluster.stderr()
    assert "Traceback" not in seed_log
    if joiner_tls:
        assert "this connection speaks TLS and this daemon does not" in seed_log
    else:
        assert seed_log.count("this daemon speaks TLS only") == 1, seed_log
    with skueue.client.blocking.connect_blocking(
        cluster.addresses[0], tls=certs.client() if not joiner_tls else False
    ) as q:
        q.enqueue(b"still serving")
        assert q.dequeue() == b"still serving"


def test_a_certificate_that_is_not_a_members_cannot_join(
    skueued_cluster: StartCluster, tmp_path: Path, certs: Certs
) -> None:
    """Signed by the cluster's CA, but a client's (OU=client): refused as a member."""
    cluster = skueued_cluster(1, "queue", ("--in-memory", *certs.daemon_args()))
    port = free_ports(1)[0]
    args = ["--listen", f"{HOST}:{port}", "--join", cluster.addresses[0], "--in-memory",
            *certs.daemon_args("alice")]  # fmt: skip
    code, err = refused(args, tmp_path, f"joiner-{port}")
    assert code == 1 and "not a member's (no OU=peer)" in err and "Traceback" not in err, err


def test_tls_handshakes_that_never_finish_are_strangers_and_garbage_is_refused(
    skueued_cluster: StartCluster, certs: Certs
) -> None:
    """Connections that start a TLS handshake and stall count against the connections
    that have not said who they are: past ``hello_pending_per_source_max`` from one
    address the oldest are closed, long before ``handshake_timeout_s``.  Connections reset
    before or during a handshake, and a "ClientHello" of random bytes, fail with at most a
    warning each.  The daemon serves on."""
    cluster = skueued_cluster(1, "queue", ("--in-memory", *certs.daemon_args()))
    host, port = cluster.addresses[0].rsplit(":", 1)
    per_source = Limits().hello_pending_per_source_max
    stalled = []
    try:
        for _ in range(per_source + 8):
            s = socket.create_connection((host, int(port)), timeout=5)
            s.sendall(b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello, no more
            stalled.append(s)
        t0 = time.monotonic()
        closed = 0
        for s in stalled[:8]:
            s.settimeout(5)
            try:
                closed += s.recv(1) == b""
            except (ConnectionResetError, TimeoutError):
                closed += 1
        assert closed == 8 and time.monotonic() - t0 < Limits().handshake_timeout_s
        for i in range(200):  # reset at once, or after a byte of a handshake
            s = socket.create_connection((host, int(port)), timeout=5)
            if i % 2:
                s.sendall(b"\x16")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(b"\x16\x03\x01\x00\x20" + os.urandom(32))
            s.settimeout(5)
            try:
                while s.recv(4096):
                    pass
            except ConnectionResetError:
                pass
        with skueue.client.blocking.connect_blocking(cluster.addresses[0], tls=certs.client()) as q:
            q.enqueue(b"served")
            assert q.dequeue() == b"served"
    finally:
        for s in stalled:
            s.close()
    err = cluster.stderr()
    assert "a TLS handshake failed" in err and "Traceback" not in err, err


def test_a_tls_handshake_that_stalls_is_closed_at_the_handshake_deadline(
    skueued_cluster: StartCluster, certs: Certs
) -> None:
    """``handshake_timeout_s`` (10 s) covers the TLS handshake: a connection that starts
    one and says no more is closed then, with one warning."""
    cluster = skueued_cluster(1, "queue", ("--in-memory", *certs.daemon_args()))
    host, port = cluster.addresses[0].rsplit(":", 1)
    deadline_s = Limits().handshake_timeout_s
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"\x16\x03\x01\x02\x00\x01")
        s.settimeout(deadline_s + 10)
        t0 = time.monotonic()
        with contextlib.suppress(ConnectionResetError):
            assert s.recv(1) == b""
        waited = time.monotonic() - t0
    assert deadline_s - 1 < waited < deadline_s + 5, waited
    assert "no TLS handshake in time" in cluster.stderr()


def test_listening_beyond_loopback_needs_tls_or_an_explicit_plaintext(tmp_path: Path) -> None:
    """Refused before it binds anything: nothing listens beyond loopback in this test."""
    run = subprocess.run(
        [*skueued_command(), "--listen", "0.0.0.0:0", "--in-memory"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "without TLS" in lines[0] and "--plaintext" in lines[0], lines
