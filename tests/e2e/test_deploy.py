"""The local cluster launcher (deploy/local_cluster.py), as a script and as a library.

Every cluster runs on 127.0.0.1 on free ports; every test stops what it started, also when
it fails, and checks that no daemon is left.  The client workload runs in a subprocess
with a timeout, so a stalled cluster fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

import skueue
from deploy.local_cluster import load_state
from skueue.cluster.launch import (
    ClusterError,
    LaunchedCluster,
    Member,
    PortInUse,
    launch,
    pid_alive,
    stop_members,
)
from skueue.runtime.security.peer_auth import generate_key
from tests.e2e.certs import make_certs
from tests.e2e.daemons import Cluster

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "local_cluster.py"
SCRIPT_TIMEOUT_S = 60.0
WORKLOAD_TIMEOUT_S = 60.0
WORKLOAD_ELEMENTS = 300

# Enqueue COUNT distinct elements, one at a time, round-robin over one client per daemon,
# then dequeue round-robin: every enqueue completed before the first dequeue, so exactly
# those elements must come out, each once, in enqueue order for a queue (reverse order
# for a stack) since every operation ran alone; one more dequeue must find it empty.
WORKLOAD = r"""
import contextlib, json, sys, time
import skueue
addresses, count = sys.argv[1].split(","), int(sys.argv[2])
started = time.monotonic()
with contextlib.ExitStack() as stack:
    clients = [stack.enter_context(skueue.connect_blocking(a, timeout_s=10)) for a in addresses]
    sent = [b"e2e-%d" % i for i in range(count)]
    for i, value in enumerate(sent):
        clients[i % len(clients)].enqueue(value)
    got = [clients[i % len(clients)].dequeue() for i in range(count)]
    after = clients[0].dequeue()
    structure = clients[0].structure
    stats = clients[-1].stats()
print(json.dumps({
    "sent": [v.decode() for v in sent],
    "got": [None if v is None else v.decode() for v in got],
    "after": None if after is None else after.decode(),
    "structure": structure,
    "processes": stats.get("processes"),
    "seconds": time.monotonic() - started,
}))
"""


def run_workload(
    prefix: Sequence[str], python: str, addresses: Sequence[str], count: int
) -> dict[str, object]:
    """Run WORKLOAD with ``python`` (after ``prefix``, e.g. ``ip netns exec skq0``) and
    check its result: every element out exactly once, in the order the structure owes."""
    argv = [*prefix, python, "-c", WORKLOAD, ",".join(addresses), str(count)]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=WORKLOAD_TIMEOUT_S, cwd=ROOT, check=False
    )
    assert done.returncode == 0, f"workload failed ({done.returncode}):\n{done.stderr[-3000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    sent, got = result["sent"], result["got"]
    assert len(sent) == count
    missing = set(sent) - set(got)
    duplicates = {v for v in got if got.count(v) > 1}
    assert not missing and not duplicates and None not in got, (
        f"missing {sorted(missing)[:10]}, duplicated {sorted(duplicates, key=str)[:10]}, "
        f"empty dequeues {got.count(None)}"
    )
    expected = sent if result["structure"] == "queue" else sent[::-1]
    assert got == expected, f"{result['structure']} order broken"
    assert result["after"] is None, "the structure should be empty after the workload"
    assert result["processes"] == len(addresses)
    return result


def script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        cwd=ROOT,
        check=False,
    )


def assert_all_gone(members: Sequence[Member]) -> None:
    left = [m.describe() for m in members if pid_alive(m.pid, m.start_time)]
    assert not left, f"still running: {left}"


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """A state directory whose daemons are stopped after the test, whatever happened."""
    path = tmp_path / "cluster"
    yield path
    members = load_state(path)
    if members:
        stop_members(members, timeout_s=5.0)
        assert_all_gone(members)


def test_script_start_status_stop(state_dir: Path, tmp_path: Path) -> None:
    began = time.monotonic()
    started = script("start", "3", "--base-port", "0", "--state-dir", str(state_dir))
    assert started.returncode == 0, started.stderr
    addresses = started.stdout.split()
    assert len(addresses) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
    members = load_state(state_dir)
    assert members is not None and [m.address for m in members] == addresses
    for m in members:
        assert m.log_path.is_file() and m.log_path.name == f"{m.port}.log"

    run_workload([], sys.executable, addresses, WORKLOAD_ELEMENTS)

    status = script("status", "--state-dir", str(state_dir))
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [[a, "alive"] for a in addresses]

    # The same ports again (from another state directory): refused, nothing disturbed.
    first_port = addresses[0].rpartition(":")[2]
    other = tmp_path / "other"
    again = script("start", "3", "--base-port", first_port, "--state-dir", str(other))
    assert again.returncode == 1
    assert f"port {first_port} on 127.0.0.1 is in use" in again.stderr
    assert load_state(other) is None
    # The same state directory while its cluster runs: refused too.
    twice = script("start", "3", "--base-port", "0", "--state-dir", str(state_dir))
    assert twice.returncode == 1 and "already running" in twice.stderr
    assert all(m.alive() for m in members)

    stopped = script("stop", "--state-dir", str(state_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert "needed SIGKILL" not in stopped.stderr
    assert_all_gone(members)
    assert not state_dir.exists(), "stop should remove the state directory"
    gone = script("status", "--state-dir", str(state_dir))
    assert gone.returncode == 2 and "no cluster" in gone.stderr
    assert time.monotonic() - began < 60


def test_launch_serves_and_stops_everything() -> None:
    with launch(3, structure="stack") as cluster:
        assert len(cluster.addresses) == 3 and all(cluster.alive())
        log_dir = cluster.log_dir
        assert log_dir is not None and log_dir.is_dir()
        run_workload([], sys.executable, cluster.addresses, WORKLOAD_ELEMENTS)
        members = list(cluster.members)
    assert_all_gone(members)
    assert cluster.exit_codes() == [0, 0, 0], "SIGTERM exits 0"
    assert not log_dir.exists(), "a temporary log directory is removed on stop"
    cluster.stop()  # idempotent


def test_launch_keeps_logs_in_a_given_directory(tmp_path: Path) -> None:
    cluster = launch(2, log_dir=tmp_path, log_format="json")
    try:
        ports = [int(a.rpartition(":")[2]) for a in cluster.addresses]
    finally:
        cluster.stop()
    assert_all_gone(cluster.members)
    for port in ports:
        text = (tmp_path / f"{port}.log").read_text()
        assert "skueued ready:" in text and '"event"' in text


def test_launch_on_a_port_in_use_names_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUse, match=f"port {port} on 127.0.0.1 is in use"):
            launch(2, base_port=port)


def test_a_daemon_that_dies_is_named_with_its_log() -> None:
    command = [sys.executable, "-c", "import sys; print('boom: bad config'); sys.exit(3)"]
    with pytest.raises(ClusterError, match=r"exited with status 3 before it was ready") as e:
        LaunchedCluster(2, command=command).start()
    assert "boom: bad config" in str(e.value)


def test_a_daemon_that_never_gets_ready_times_out_and_is_stopped() -> None:
    command = [sys.executable, "-c", "import time; print('starting', flush=True); time.sleep(60)"]
    cluster = LaunchedCluster(2, command=command, ready_timeout_s=1.0)
    began = time.monotonic()
    with pytest.raises(ClusterError, match=r"not ready within 1 s") as e:
        cluster.start()
    assert "starting" in str(e.value)
    assert time.monotonic() - began < 20
    assert_all_gone(cluster.members)


def test_the_units_execstop_leaves_only_when_asked(
    skueued_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """deploy/skueued-stop (the unit's ExecStop), run as systemd would, against a real
    two-member cluster with TLS and client tokens: SKUEUE_LEAVE_ON_STOP unset, or set
    while systemd reports no main process, does nothing; a bad value is refused; "yes"
    makes the member leave with the admin token of client.tokens, and its daemon exits 0."""
    etc = tmp_path / "etc"
    certs = make_certs(etc / "tls")
    admin = generate_key()
    tokens = etc / "client.tokens"
    tokens.write_text(f"# who may use the queue\nclient {generate_key()}\nadmin {admin}\n")
    tokens.chmod(0o600)
    cluster = skueued_cluster(
        2, "queue", (*certs.daemon_args(), "--client-tokens", str(tokens), "--in-memory")
    )
    going, staying = cluster.daemons
    bin_dir = Path(sys.executable).parent

    def exec_stop(**env: str) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("SKUEUE_")}
        clean.pop("MAINPID", None)
        base = {"SKUEUE_ETC": str(etc), "SKUEUE_BIN": str(bin_dir), "SKUEUE_LISTEN": going.address}
        return subprocess.run(
            [str(ROOT / "deploy" / "skueued-stop")], env={**clean, **base, **env},
            capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S, check=False,
        )  # fmt: skip

    running = {"MAINPID": str(going.pid)}
    quiet_cases = (
        running,  # the default: no
        {**running, "SKUEUE_LEAVE_ON_STOP": "no"},
        {"SKUEUE_LEAVE_ON_STOP": "yes"},  # no MAINPID: the daemon crashed or exited
    )
    for quiet in quiet_cases:
        done = exec_stop(**quiet)
        time.sleep(0.5)  # a leave would make the daemon exit at once
        assert done.returncode == 0 and going.alive(), (quiet, done)
    bad = exec_stop(SKUEUE_LEAVE_ON_STOP="maybe", MAINPID=str(going.pid))
    assert bad.returncode == 2 and "yes or no" in bad.stderr and going.alive()

    left = exec_stop(SKUEUE_LEAVE_ON_STOP="yes", MAINPID=str(going.pid))
    assert left.returncode == 0, left.stderr
    assert going.proc.wait(timeout=30) == 0, going.stderr()[-2000:]
    with skueue.connect_blocking(staying.address, token=admin, tls=certs.client()) as q:
        assert q.stats()["processes"] == 1
