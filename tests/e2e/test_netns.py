"""deploy/netns_cluster.sh: three daemons as three "hosts" in network namespaces.

Skipped (with the reason) unless we are root on Linux with iproute2 and the kernel lets us
create namespaces, bridges and veth pairs (a container without CAP_SYS_ADMIN does not).
The cluster's subnet lives only on a bridge inside a namespace of its own; the test checks
that the root namespace got nothing and that the hosts have no route out, runs the client
workload from inside one namespace, stops, and checks that every namespace and daemon is
gone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skueue.cluster.launch import pid_alive
from tests.e2e.test_deploy import WORKLOAD_ELEMENTS, run_workload

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "netns_cluster.sh"
PREFIX = "skq"
HOSTS = 3
ADDRESSES = [f"10.213.0.{10 + i}:7400" for i in range(HOSTS)]
SCRIPT_TIMEOUT_S = 90.0


def run(*argv: str | Path, timeout_s: float = SCRIPT_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
        check=False,
    )


def our_namespaces(prefix: str = PREFIX) -> list[str]:
    listed = run("ip", "netns", "list").stdout.split("\n")
    names = [line.split()[0] for line in listed if line.strip()]
    return [n for n in names if n == f"{prefix}hub" or n.removeprefix(prefix).isdigit()]


def why_unavailable(prefix: str = PREFIX) -> str | None:
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux-only"
    if os.geteuid() != 0:
        return "needs root (creating network namespaces needs CAP_SYS_ADMIN)"
    for tool in ("ip", "setsid"):
        if shutil.which(tool) is None:
            return f"needs `{tool}` on PATH"
    probe = f"skqprobe{os.getpid()}"
    added = run("ip", "netns", "add", probe, timeout_s=10)
    if added.returncode != 0:
        return f"`ip netns add` failed here: {added.stderr.strip()}"
    try:
        for what in (["bridge"], ["veth", "peer", "name", "probeb"]):
            made = run("ip", "-n", probe, "link", "add", "probea", "type", *what, timeout_s=10)
            if made.returncode != 0:
                return f"cannot create a {what[0]} in a namespace: {made.stderr.strip()}"
            run("ip", "-n", probe, "link", "del", "probea", timeout_s=10)
    finally:
        run("ip", "netns", "del", probe, timeout_s=10)
    if our_namespaces(prefix):
        return f"namespaces {our_namespaces(prefix)} exist: a netns cluster runs here, left alone"
    return None


@pytest.fixture
def netns_state(tmp_path: Path) -> Iterator[Path]:
    reason = why_unavailable()
    if reason is not None:
        pytest.skip(reason)
    state = tmp_path / "netns-state"
    try:
        yield state
    finally:
        if our_namespaces():  # the test failed half-way: tear down anyway
            run(SCRIPT, "stop", "--state-dir", state, "--timeout", "5")


def daemon_pids(state: Path) -> dict[str, int]:
    lines = (state / "daemons").read_text().splitlines()
    return {line.split()[0]: int(line.split()[1]) for line in lines}


def test_netns_cluster_serves_and_leaves_nothing(netns_state: Path) -> None:
    began = time.monotonic()
    started = run(SCRIPT, "start", str(HOSTS), "--state-dir", netns_state)
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ADDRESSES
    pids = daemon_pids(netns_state)
    assert sorted(pids) == [f"{PREFIX}{i}" for i in range(HOSTS)]
    assert sorted(our_namespaces()) == sorted([*pids, f"{PREFIX}hub"])
    start_s = time.monotonic() - began

    status = run(SCRIPT, "status", "--state-dir", netns_state)
    assert status.returncode == 0, status.stderr
    assert [line.split()[:3] for line in status.stdout.splitlines()] == [
        [f"{PREFIX}{i}", ADDRESSES[i], "alive"] for i in range(HOSTS)
    ]

    # Isolation: nothing of the cluster in the root namespace; no way out of a host.
    assert "10.213." not in run("ip", "-o", "addr").stdout
    assert not run("ip", "route", "show", "10.213.0.0/24").stdout.strip()
    assert "skqbr" not in run("ip", "-o", "link").stdout
    routes = run("ip", "-n", f"{PREFIX}0", "route").stdout.strip().splitlines()
    assert routes and all(r.startswith("10.213.0.0/24 dev eth0") for r in routes), routes
    out = run("ip", "-n", f"{PREFIX}0", "route", "get", "192.0.2.1")
    assert out.returncode != 0 and "unreachable" in out.stderr.lower(), out

    workload_began = time.monotonic()
    # The hosts speak TLS only (issue 13): the client trusts the CA the script made.
    ca = netns_state / "tls" / "ca.crt"
    in_host = ["ip", "netns", "exec", f"{PREFIX}0", "env", f"SKUEUE_TLS_CA={ca}"]
    run_workload(in_host, sys.executable, ADDRESSES, WORKLOAD_ELEMENTS)
    plain = run("ip", "netns", "exec", f"{PREFIX}0", sys.executable, "-m", "skueue.cli.skueue",
                "stats", "--node", ADDRESSES[1])  # fmt: skip
    assert plain.returncode == 1 and "speaks TLS only" in plain.stderr, plain.stderr
    workload_s = time.monotonic() - workload_began
    # The hosts' links prove the cluster key the script made (issue 13).
    assert (netns_state / "cluster.key").stat().st_mode & 0o077 == 0
    logs = "".join((netns_state / f"{PREFIX}{i}.log").read_text() for i in range(HOSTS))
    assert "without a cluster key" not in logs, logs[-2000:]
    assert "TLS without --tls-ca" not in logs, logs[-2000:]  # peer links are mutual TLS
    assert logs.count("this daemon speaks TLS only") == 1, logs[-2000:]  # the plaintext try

    stopped = run(SCRIPT, "stop", "--state-dir", netns_state)
    assert stopped.returncode == 0, stopped.stderr
    assert "SIGKILL" not in stopped.stderr, stopped.stderr
    assert our_namespaces() == []
    left = [ns for ns, pid in pids.items() if pid_alive(pid)]
    assert not left, f"daemons still running: {left}"
    assert not netns_state.exists()
    gone = run(SCRIPT, "status", "--state-dir", netns_state)
    assert gone.returncode == 2
    print(f"netns: start {start_s:.1f} s, workload {workload_s:.1f} s")


def test_netns_cluster_refuses_to_start_twice(netns_state: Path) -> None:
    first = run(SCRIPT, "start", "1", "--state-dir", netns_state)
    assert first.returncode == 0, first.stderr
    again = run(SCRIPT, "start", "2", "--state-dir", netns_state.with_name("other"))
    assert again.returncode == 1 and "exist already" in again.stderr
    assert run(SCRIPT, "stop", "--state-dir", netns_state).returncode == 0
    assert our_namespaces() == []


def test_netns_start_failure_names_the_daemon_and_tears_down(
    netns_state: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "fake-skueued"
    fake.write_text('#!/bin/sh\necho "boom: $*"\nexit 3\n')
    fake.chmod(0o755)
    failed = run(SCRIPT, "start", "2", "--skueued", fake, "--state-dir", netns_state)
    assert failed.returncode == 1
    assert re.search(
        r"daemon skq[01] \(10\.213\.0\.1[01]:7400\) exited before it was ready", failed.stderr
    ), failed.stderr
    assert "boom: --listen 10.213.0.1" in failed.stderr
    assert our_namespaces() == []
    run(SCRIPT, "stop", "--state-dir", netns_state)  # the kept logs
    assert not netns_state.exists()
