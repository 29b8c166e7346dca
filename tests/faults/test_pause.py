"""SIGSTOP and SIGCONT under load: a paused member is a slow member, not a lost one.

Four durable ``skueued`` processes, 8 clients with the mixed workload.  One daemon at a
time is stopped with SIGSTOP and continued with SIGCONT, each in turn: short pauses
(0.2 to 2 s), and one that outlasts ``peer_ack_timeout_s``, so that the others find
their links to it stuck (open, but carrying no acks), end them and connect again
(runtime/network/link_sender.py, watch_acks).  Then the drain, and the history must pass the
checkers with every element removed exactly once.  Operations whose outcome a client
never learned count as indeterminate.
"""

from __future__ import annotations

import random
import signal
import subprocess
from pathlib import Path

import pytest
import trio

from skueue.runtime.limits import Limits
from tests.e2e.daemons import stop
from tests.e2e.oracle import assert_history_ok
from tests.faults.test_crash_restart import Cluster, config
from tests.faults.workload import DAEMONS, LONG, SEED, under_faults

OPS = 60_000 if LONG else 8_000
SHORT_PAUSES = 20 if LONG else 4
SHORT_PAUSE_S = (0.2, 2.0)
GAP_S = (0.5, 2.0)
# The long pause: past the ack timeout, so the watchdog must have ended a link.
LONG_PAUSE_S = Limits().peer_ack_timeout_s + 3.0
TIMEOUT_S = 900.0 if LONG else 180.0


@pytest.mark.trio
@pytest.mark.parametrize("replicas", [1, 3])
async def test_paused_members_resume_and_nothing_is_lost(tmp_path: Path, replicas: int) -> None:
    """With ``--replicas 3`` a paused member is also a follower of two other groups,
    which commit without it, and a leader that may step down for want of a majority
    while its followers could not hear it."""
    print(f"replay with SKUEUE_FAULT_SEED={SEED}")
    rng = random.Random(SEED)
    cluster = Cluster(tmp_path, replicas)
    pauses: list[tuple[int, float]] = []

    async def pause(victim: int, seconds: float) -> None:
        await paused_for(cluster.daemons[victim].proc, seconds)
        pauses.append((victim, round(seconds, 1)))

    async def faults() -> None:
        order = list(range(DAEMONS))
        rng.shuffle(order)
        long_one = rng.randrange(SHORT_PAUSES + 1)
        for k in range(SHORT_PAUSES + 1):
            await trio.sleep(rng.uniform(*GAP_S))
            seconds = LONG_PAUSE_S if k == long_one else rng.uniform(*SHORT_PAUSE_S)
            await pause(order[k % DAEMONS], seconds)

    try:
        cluster.start()
        load = config(cluster, OPS)
        result = await under_faults(load, faults, TIMEOUT_S)
        print(f"pauses (daemon, s): {pauses}; {len(result.records)} operations")
        assert any(s == round(LONG_PAUSE_S, 1) for _, s in pauses), "no long pause happened"
        assert_history_ok(result, load)
        for d in cluster.daemons:
            assert d.alive(), f"{d.address} died:\n{d.stderr()[-3000:]}"
        logs = cluster.logs()
        assert "Traceback" not in logs and "bug:" not in logs, logs[-3000:]
        assert "nothing acknowledged for" in logs, "no link to the paused member was ended"
    finally:
        problems = stop_all(cluster)
        assert not problems, problems


async def paused_for(proc: subprocess.Popen[bytes], seconds: float) -> None:
    """SIGSTOP ``proc`` for ``seconds``, then SIGCONT (also when cancelled first)."""
    proc.send_signal(signal.SIGSTOP)
    try:
        await trio.sleep(seconds)
    finally:
        proc.send_signal(signal.SIGCONT)  # also when the workload ends first


def stop_all(cluster: Cluster) -> list[str]:
    for d in cluster.daemons:  # a stopped process would never see the SIGTERM
        if d.alive():
            d.proc.send_signal(signal.SIGCONT)
    return stop(cluster.daemons)
