"""bench/durable_peers.py's Skueue rows: 4 durable ``skueued`` driven by the project's
load generator, producers then consumers, both phases checked as one history."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
from bench_support import first_line
from durable_peers_rows import DAEMONS, CpuMeter, Phase, Workload, make_row, progress, tally
from interrupts import no_interrupt, run_async

from skueue.check.checker import check
from skueue.cluster.launch import LaunchedCluster, launch, skueued_command
from skueue.cluster.loadgen import LoadConfig, LoadResult, drain, run_workload

ROOT = Path(__file__).resolve().parent.parent

# What Skueue is told for each durability.
SKUEUE_FSYNC = {"always": "batch", "everysec": "interval=1000"}


def skueue_config(cluster: LaunchedCluster, mode: str, w: Workload, ratio: float) -> LoadConfig:
    batch, in_flight = (w.window, 1) if mode == "batch" else (1, w.window)
    return LoadConfig(
        tuple(cluster.addresses),
        w.clients,
        w.messages,
        ratio,
        w.value_bytes,
        seed=w.clients,
        drain=False,
        in_flight=in_flight,
        batch=batch,
    )


def one_history(produce: LoadResult, consume: LoadResult) -> list[Any]:
    """Both phases as one history: processes renamed apart (each phase names its lanes
    from c0), the consumers' times moved onto the producers' clock."""
    shift = consume.started - produce.started
    return [attrs.evolve(r, process=f"P{r.process}") for r in produce.records] + [
        attrs.evolve(
            r, process=f"C{r.process}", invoke=r.invoke + shift, response=r.response + shift
        )
        for r in consume.records
    ]


async def skueue_row(cluster: LaunchedCluster, durability: str, mode: str, w: Workload) -> dict:
    meter = CpuMeter(cluster.pids)
    with anyio.fail_after(w.timeout_s):
        produce = await run_workload(skueue_config(cluster, mode, w, 1.0))
    consumers = skueue_config(cluster, mode, w, 0.0)
    with anyio.fail_after(w.timeout_s):
        consume = await run_workload(consumers)
    cpu = meter.used()
    # Whatever the consumers left (nothing, unless something is wrong) is drained outside
    # the measurement, so that the next row starts empty and the history is complete.
    with anyio.fail_after(w.timeout_s):
        await drain(consumers, consume)
    sent = [r.value for r in produce.records if r.value is not None]
    got = [r.value for r in consume.records if r.phase != "drain" and r.value is not None]
    row = make_row(
        "skueue",
        durability,
        mode,
        w,
        Phase(produce.workload_seconds, [q.ms for q in produce.requests]),
        Phase(consume.workload_seconds, [q.ms for q in consume.requests]),
        cpu,
        tally(sent, got, consume.drained),
    )
    verdict = check(one_history(produce, consume), model="linearizable", drained=True)
    row.update(
        history=verdict.describe(),
        linearizable=verdict.ok,
        history_method=verdict.method,
        daemons=len(cluster.pids),
    )
    return row


def measure_skueue(durability: str, modes: Sequence[str], w: Workload) -> list[dict]:
    command = [*skueued_command(), "--fsync", SKUEUE_FSYNC[durability]]
    rows = []
    commit = first_line(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], "")
    # One replica, as the README's figures were taken (3 is skueued's default).
    cluster = launch(DAEMONS, command=command, replicas=1)
    try:
        for mode in modes:
            row = run_async(skueue_row, cluster, durability, mode, w)
            rows.append({**row, "server": f"skueue {commit}"})
            progress(rows[-1])
    finally:
        with no_interrupt():
            cluster.stop()
    return rows
