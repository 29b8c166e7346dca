"""A host cut off from the others for 20 s under load, with ``--replicas 3 --failover``
(issue 31): it acknowledges nothing alone, the others keep serving, and after the heal
nothing is lost or duplicated.

Five durable hosts in network namespaces (deploy/netns_cluster.sh, with TLS and a
cluster key), a workload from inside host 0's namespace (tests/e2e/netns_workload.py:
one client per host, each with every host as its seed list).  Host 2's port on the
bridge goes down (``netns_cluster.sh cut``): its daemon runs on and hears nothing.  Its
process is taken over by a host that keeps a copy of it; its own group steps down for
want of a majority (CheckQuorum) and it holds what it stepped alone.  The workload must
go on meanwhile.  After the heal the cut host is a backup of its process, and the
workload goes on.  Then the drain, and ``tests.e2e.oracle.assert_accounted``: every
acknowledged element out exactly once, nothing invented; operations whose outcome a
client never learned are counted as indeterminate (with none, the history must also
pass the linearizability checkers).  Skipped, with the reason, where network namespaces
cannot be made (tests/e2e/test_netns.py).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_netns import SCRIPT, run
from tests.e2e.test_netns_lifecycle import (
    finish,
    processes,
    start_workload,
    state_for,
    wait_progress,
)

__all__ = ["processes"]  # the fixture: the workloads this test starts, killed after it

PREFIX = "skqpt"
HOSTS = 5
ADDRESSES = [f"10.213.0.{10 + i}:7400" for i in range(HOSTS)]
CUT = 2
CUT_S = 20.0
STEP_OPS = 150
WORKLOAD_DEADLINE_S = 200.0


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    yield from state_for(PREFIX, tmp_path)


def cluster(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(SCRIPT, *args, "--prefix", PREFIX, "--state-dir", state)


def test_a_host_cut_off_for_20_s_acknowledges_nothing_alone(
    state: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    started = cluster(state, "start", str(HOSTS), "--durable", "--replicas", "3",
                      "--failover", "--timeout", "60")  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ADDRESSES
    workload, history, progress, stop = start_workload(
        PREFIX, state, tmp_path, ADDRESSES, "--seed-lists", "--timeout-s", "60",
        deadline_s=WORKLOAD_DEADLINE_S)  # fmt: skip
    processes.append(workload)
    done = wait_progress(progress, STEP_OPS, workload)

    cut = cluster(state, "cut", str(CUT))
    assert cut.returncode == 0, cut.stderr
    cut_at = time.monotonic()
    # The others serve while it is cut off (after the failure timeout and the takeover).
    done = wait_progress(progress, done + STEP_OPS, workload)
    served_while_cut = time.monotonic() - cut_at
    assert served_while_cut < CUT_S, f"the others served {STEP_OPS} more only after the heal"
    time.sleep(max(0.0, CUT_S - (time.monotonic() - cut_at)))
    healed = cluster(state, "heal", str(CUT))
    assert healed.returncode == 0, healed.stderr
    done = wait_progress(progress, done + STEP_OPS, workload)

    summary, counts = finish(workload, stop, history)
    print(f"partition: {STEP_OPS} operations done {served_while_cut:.1f} s into the cut; "
          f"{json.dumps(counts)}")
    assert summary["drained"] > 0, "the drain found nothing: the check would be weak"
    logs = {i: (state / f"{PREFIX}{i}.log").read_text() for i in range(HOSTS)}
    assert "led by another replica now" in logs[CUT], logs[CUT][-3000:]
    assert any("stands in for a member" in logs[i] for i in range(HOSTS) if i != CUT)
    status = cluster(state, "status")
    assert status.returncode == 0, status.stdout  # every daemon alive, the cut one too
    stopped = cluster(state, "stop")
    assert stopped.returncode == 0, stopped.stderr
