"""deploy/netns_cluster.sh runs a 4-host cluster through a join, a leave and a kill/restart
while clients work, and nothing acknowledged is lost or delivered twice (issue 15 item 7).

Three durable hosts start as a static cluster; a fourth joins (``netns_cluster.sh
join``: ``skueued --join``).  A workload runs from inside the first host's namespace
(``tests/e2e/netns_workload.py``: one client on each of hosts 0, 1 and 3, unique
elements).  While it runs, host 2 leaves (``skueue leave``), then host 3 is killed with
SIGKILL and restarted from its data directory.  Then the workload stops and drains the
queue, and ``tests.e2e.oracle.assert_accounted`` checks that every acknowledged element
came out exactly once, nothing came out that went in nowhere, and operations whose outcome
the clients never learned are counted as indeterminate (with none, the history must also
pass the linearizability checkers).

The killed host is the one that joined: skueued today cannot restart a member started
with ``--peers`` once one of those peers has left (it waits for every one of them, and
refuses any other list; see deploy/README.md, "Rolling restart").  Skipped, with the
reason, where network namespaces cannot be made (see tests/e2e/test_netns.py).  Its own
namespace prefix keeps it apart from a cluster of test_netns.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skueue.check.history import read_jsonl
from skueue.cluster.launch import pid_alive
from tests.e2e.oracle import assert_accounted
from tests.e2e.test_netns import ROOT, SCRIPT, our_namespaces, run, why_unavailable

PREFIX = "skqlc"
ADDRESSES = [f"10.213.0.{10 + i}:7400" for i in range(4)]
STEP_OPS = 150  # operations the workload completes before each change, and after the last
PROGRESS_TIMEOUT_S = 30.0
WORKLOAD_DEADLINE_S = 100.0


def state_for(prefix: str, tmp_path: Path) -> Iterator[Path]:
    """A state directory for a netns cluster of ``prefix`` (skipped where namespaces
    cannot be made), torn down after the test whatever happened."""
    reason = why_unavailable(prefix)
    if reason is not None:
        pytest.skip(reason)
    path = tmp_path / "netns-state"
    try:
        yield path
    finally:
        if our_namespaces(prefix):  # the test failed half-way: tear down anyway
            run(SCRIPT, "stop", "--prefix", prefix, "--state-dir", path, "--timeout", "5")


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    yield from state_for(PREFIX, tmp_path)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Workload processes started by the test: killed after it, whatever happened."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def cluster(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(SCRIPT, *args, "--prefix", PREFIX, "--state-dir", state)


def wait_progress(progress: Path, at_least: int, proc: subprocess.Popen[str]) -> int:
    """Wait (bounded) until the workload has completed ``at_least`` operations."""
    deadline = time.monotonic() + PROGRESS_TIMEOUT_S
    done = 0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the workload ended early ({proc.returncode}):\n{proc.communicate()}")
        try:
            done = int(progress.read_text() or 0)
        except FileNotFoundError:
            done = 0
        if done >= at_least:
            return done
        time.sleep(0.1)
    pytest.fail(f"the workload completed {done} operations, not {at_least}, within "
                f"{PROGRESS_TIMEOUT_S:g} s")  # fmt: skip


def start_workload(
    prefix: str, state: Path, tmp_path: Path, nodes: list[str], *options: str,
    deadline_s: float = WORKLOAD_DEADLINE_S,
) -> tuple[subprocess.Popen[str], Path, Path, Path]:  # fmt: skip
    """tests/e2e/netns_workload.py from inside host 0's namespace, one client per node
    (with ``options``): the process, and its history, progress and stop files."""
    ca = state / "tls" / "ca.crt"
    history, progress, stop = (tmp_path / n for n in ("history.jsonl", "progress", "stop"))
    workload = subprocess.Popen(
        ["ip", "netns", "exec", f"{prefix}0", "env", f"SKUEUE_TLS_CA={ca}",
         sys.executable, "-m", "tests.e2e.netns_workload", *options, "--nodes", ",".join(nodes),
         "--history", str(history), "--progress", str(progress), "--stop-file", str(stop),
         "--deadline-s", str(deadline_s)],  # fmt: skip
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return workload, history, progress, stop


def finish(
    workload: subprocess.Popen[str], stop: Path, history: Path
) -> tuple[dict[str, Any], dict[str, int]]:
    """Stop the workload, let it drain, and check its history (assert_accounted): its
    summary, and the counts."""
    stop.touch()
    out, err = workload.communicate(timeout=WORKLOAD_DEADLINE_S)
    assert workload.returncode == 0, f"the workload failed:\n{err[-3000:]}"
    summary = json.loads(out.strip().splitlines()[-1])
    with history.open() as f:
        records = read_jsonl(f)
    return summary, assert_accounted(records, summary["unknown_inserts"],
                                     summary["unknown_removals"])  # fmt: skip


def logs(state: Path) -> dict[str, str]:
    return {f"{PREFIX}{i}": (state / f"{PREFIX}{i}.log").read_text() for i in range(4)}


def test_four_hosts_join_leave_kill_restart_lose_nothing(
    state: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    began = time.monotonic()
    started = cluster(state, "start", "3", "--durable")
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ADDRESSES[:3]
    joined = cluster(state, "join")
    assert joined.returncode == 0, joined.stderr
    assert joined.stdout.split() == [ADDRESSES[3]]
    status = cluster(state, "status")
    assert [line.split()[:3] for line in status.stdout.splitlines()] == [
        [f"{PREFIX}{i}", ADDRESSES[i], "alive"] for i in range(4)
    ], status.stdout
    pids = {
        f[0]: int(f[3].removeprefix("pid=")) for f in map(str.split, status.stdout.splitlines())
    }
    start_s = time.monotonic() - began

    nodes = [ADDRESSES[i] for i in (0, 1, 3)]
    workload, history, progress, stop = start_workload(PREFIX, state, tmp_path, nodes)
    processes.append(workload)
    done = wait_progress(progress, STEP_OPS, workload)

    left = cluster(state, "leave", "2")
    assert left.returncode == 0, left.stderr
    assert not pid_alive(pids[f"{PREFIX}2"]), "the daemon that left should have exited"
    done = wait_progress(progress, done + STEP_OPS, workload)

    killed = cluster(state, "kill", "3")
    assert killed.returncode == 0, killed.stderr
    assert not pid_alive(pids[f"{PREFIX}3"])
    assert cluster(state, "status").returncode == 1  # a member is dead
    restarted = cluster(state, "restart", "3")
    assert restarted.returncode == 0, restarted.stderr
    wait_progress(progress, done + STEP_OPS, workload)

    summary, counts = finish(workload, stop, history)
    assert counts["acknowledged"] >= STEP_OPS, counts  # the workload did work
    assert summary["drained"] > 0, "the drain found nothing: the check would be weak"

    status = cluster(state, "status")
    assert status.returncode == 0, status.stdout
    assert [line.split()[2] for line in status.stdout.splitlines()] == [
        "alive",
        "alive",
        "left",
        "alive",
    ], status.stdout
    stats = run("ip", "netns", "exec", f"{PREFIX}1", sys.executable, "-m", "skueue.cli.skueue",
                "stats", "--node", ADDRESSES[1], "--tls-ca", state / "tls" / "ca.crt")  # fmt: skip
    assert stats.returncode == 0, stats.stderr
    assert "processes: 3" in stats.stdout and "queue size: 0" in stats.stdout, stats.stdout
    text = logs(state)
    everything = "".join(text.values())
    assert "bug:" not in everything and "Traceback" not in everything, everything[-3000:]
    assert text[f"{PREFIX}3"].count("skueued ready: ") == 2  # its first start and the restart
    assert "replayed the input log" in text[f"{PREFIX}3"]

    stopped = cluster(state, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert "SIGKILL" not in stopped.stderr, stopped.stderr
    assert our_namespaces(PREFIX) == []
    assert not [ns for ns in pids if pid_alive(pids[ns])]
    assert not state.exists(), "stop should remove the state, logs and data directories"
    print(f"netns lifecycle: start+join {start_s:.1f} s, whole run "
          f"{time.monotonic() - began:.1f} s; workload {summary}; counts {counts}")  # fmt: skip
