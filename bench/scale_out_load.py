"""One load process of bench/scale_out.py: its clients, against Skueue or Redis, for one row.

The parent starts ``--load-procs`` of these (multiprocessing, spawn) and hands each a
:class:`Job`.  A process pins itself (when told to), opens its clients, says it is ready,
waits for the parent's common start time, runs its lanes until start + ``seconds``,
then sends back its operations, latencies, CPU and (Skueue) history.

Every lane is sequential and alternates an insert and a removal, so that the queue stays
short and a dequeue mostly finds an element; one-at-a-time lanes carry one operation
per request, batched lanes ``batch``.  Skueue's lanes use the public client API:
``enqueue`` / ``insert`` (enqueue_many) for inserts and ``remove(1)`` / ``remove(batch)``
for removals (what ``dequeue`` and ``dequeue_many`` send, keeping each removal's rank and
position, and the empty ones, for the history).  Redis lanes run redis-py's asyncio
client: RPUSH / LPOP (the same FIFO as LPUSH / RPOP), pipelines of ``batch`` without
MULTI when batched, as bench/redis_compare.py sends them; a redis-py client cannot keep
two requests in flight on one connection, so its lanes share one ``Redis`` whose pool
gives each lane its own connection.

Times: every record and the row's start and end are ``time.monotonic()`` seconds (the
system-wide CLOCK_MONOTONIC) less the parent's start time, so the histories of all load
processes and the parent's drain are on one clock for the checker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from bench_support import cpu_seconds, pin
from redis_compare import redis_request

from skueue.check.history import Record
from skueue.client.api import Client, connect
from skueue.cluster.loadgen import Outcome, as_text, element, records_of, removal

HOST = "127.0.0.1"
# How long a process may take to open its clients and report ready.
READY_TIMEOUT_S = 60.0
# Past the row's end a request may still be in flight; it gets this long to come back.
REQUEST_TIMEOUT_S = 30.0

# Set in each process by :func:`init` (multiprocessing queues cannot travel in a task).
_to_parent: Any = None
_from_parent: Any = None


@dataclass(frozen=True)
class Job:
    """One load process's part of a row."""

    row: int  # the row's number: messages of another row are not this one's
    system: str  # "skueue" or "redis"
    mode: str  # "one" or "batch"
    index: int  # the process's number in the row: its lanes are named p<index>...
    addresses: tuple[str, ...]  # the daemons (clients round robin), or Redis' host:port
    clients: int
    in_flight: int
    batch: int
    value_bytes: int
    seconds: float
    cores: tuple[int, ...] | None  # pin to these; None: unpinned
    redis_key: str = "skueue-scale-out"


@dataclass
class LoadReport:
    """What one load process sends back."""

    index: int
    ops: int = 0
    end: float = 0.0  # when its last request came back, on the row's clock
    cpu_s: float = 0.0  # its own CPU from the start to its end
    latencies_ms: list[float] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    error: str | None = None
    said: list[str] = field(default_factory=list)  # "ready", "done": told the parent


def init(to_parent: Any, from_parent: Any) -> None:
    """A pool process's start: the two queues to the parent; Ctrl-C is the parent's to
    handle (it stops this process), so the process itself ignores SIGINT."""
    global _to_parent, _from_parent
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _to_parent, _from_parent = to_parent, from_parent


def run(job: Job) -> LoadReport:
    """The process's whole part of a row; errors come back in the report, not raised."""
    if job.cores is not None:
        # The whole process: a pool process may have run another index's job before, and
        # its queue's feeder thread was pinned with it.
        pin(os.getpid(), job.cores)
    report = LoadReport(job.index)
    try:
        anyio.run(_run, job, report, backend="asyncio")
    except Exception as e:  # reported by the parent, which fails the row
        report.error = f"{type(e).__name__}: {e}"
    finally:
        # Never leave the parent waiting: a process that failed early still says it is
        # ready and done (each message said once, whatever happened).
        for step in ("ready", "done"):
            if step not in report.said:
                _say(job, report, step)
    return report


def _say(job: Job, report: LoadReport, step: str) -> None:
    report.said.append(step)
    _to_parent.put((step, job.row, job.index))


async def _wait_for_start(job: Job, report: LoadReport) -> float:
    """Tell the parent we are ready; return the common start time it sends (a start
    left over from an earlier row, whose process failed before reading it, is dropped)."""
    _say(job, report, "ready")
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        left = max(0.0, deadline - time.monotonic())
        row, start = await anyio.to_thread.run_sync(_from_parent.get, True, left)
        if row == job.row:
            break
    await anyio.sleep(max(0.0, start - time.monotonic()))
    return float(start)


async def _run(job: Job, report: LoadReport) -> None:
    if job.system == "skueue":
        await _skueue(job, report)
    else:
        await _redis(job, report)


def lane_names(job: Job) -> list[tuple[int, str]]:
    """(client, lane name) of every lane: unique over the row's processes, and never a
    loadgen drain's ``c<N>``."""
    return [(c, f"p{job.index}.c{c}.{k}") for c in range(job.clients) for k in range(job.in_flight)]


async def _skueue(job: Job, report: LoadReport) -> None:
    async def lane(q: Client, name: str, end: float) -> None:
        seq, inserting = 0, job.index % 2 == 0  # half the processes start with a removal
        while time.monotonic() - start < end:
            invoke = time.monotonic() - start
            if inserting:
                values = [element(name, seq + k, job.value_bytes) for k in range(job.batch)]
                if job.batch == 1:
                    receipts = [await q.enqueue(values[0])]
                else:
                    receipts = await q.enqueue_many(values)
                outcomes = [
                    Outcome(as_text(v), r.position, r.ord)
                    for v, r in zip(values, receipts, strict=True)
                ]
            else:
                outcomes = [removal(g) for g in await q.remove(job.batch)]
            response = time.monotonic() - start
            op = "enqueue" if inserting else "dequeue"
            report.records.extend(records_of(name, seq, op, outcomes, invoke, response))
            report.latencies_ms.append((response - invoke) * 1000)
            report.ops += len(outcomes)
            report.end = max(report.end, response)
            seq += len(outcomes)
            inserting = not inserting

    start = 0.0
    async with contextlib.AsyncExitStack() as stack:
        first = job.index * job.clients  # clients spread round robin over the daemons
        clients = [
            await stack.enter_async_context(
                connect(
                    job.addresses[(first + c) % len(job.addresses)],
                    request_timeout_s=REQUEST_TIMEOUT_S,
                )
            )
            for c in range(job.clients)
        ]
        start = await _wait_for_start(job, report)
        await _lanes(job, report, lane, clients)


async def _lanes(job: Job, report: LoadReport, lane: Any, clients: list[Any]) -> None:
    """Every lane until the row's end; then the process's CPU, and "done" to the parent
    (before the clients close: closing is not measured)."""
    cpu_before = cpu_seconds([os.getpid()])
    async with anyio.create_task_group() as tg:
        for c, name in lane_names(job):
            tg.start_soon(lane, clients[c], name, job.seconds)
    report.cpu_s = cpu_seconds([os.getpid()]) - cpu_before
    _say(job, report, "done")


async def _redis(job: Job, report: LoadReport) -> None:
    import redis.asyncio as aioredis

    async def lane(r: Any, name: str, end: float) -> None:
        seq, inserting = 0, job.index % 2 == 0
        while time.monotonic() - start < end:
            values = (
                [element(name, seq + k, job.value_bytes) for k in range(job.batch)]
                if inserting
                else []
            )
            invoke = time.monotonic()
            await redis_request(r, job.redis_key, values, job.batch)
            response = time.monotonic() - start
            report.latencies_ms.append((response - (invoke - start)) * 1000)
            report.ops += job.batch
            report.end = max(report.end, response)
            seq += job.batch
            inserting = not inserting

    host, _, port = job.addresses[0].rpartition(":")
    clients = [
        aioredis.Redis(host=host, port=int(port), max_connections=job.in_flight)
        for _ in range(job.clients)
    ]
    start = 0.0
    try:
        # Every connection opened before the start, as Skueue's clients are.
        await _open_pools(clients, job.in_flight)
        start = await _wait_for_start(job, report)
        await _lanes(job, report, lane, clients)
    finally:
        for r in clients:
            await r.aclose()


async def _open_pools(clients: list[Any], per_client: int) -> None:
    """Each client's pool filled with ``per_client`` open connections (PINGs in flight at
    once open them), so that connecting is not measured."""
    async with anyio.create_task_group() as tg:
        for r in clients:
            for _ in range(per_client):
                tg.start_soon(r.ping)
