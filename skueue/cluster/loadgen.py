"""A load generator over the real client: concurrent clients, a mixed workload, a history.

Each client connects to one daemon (round robin over ``nodes``) and issues its share of
the operations one at a time, so its own operations never overlap and the history it
records (wall-clock seconds since the run started) can be checked for linearizability.
Elements are unique (``c3-17:`` padded to ``value_bytes``).  With ``drain`` a last client
removes elements until the structure reports empty, so every element can be accounted for;
its records carry ``phase="drain"``: they are checked with the rest, but throughput and
latency describe the workload alone.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

import anyio
import attrs

from skueue.check.history import Record
from skueue.client.api import connect

DRAIN_BATCH = 200
PROGRESS_INTERVAL_S = 0.2


@attrs.frozen
class LoadConfig:
    nodes: tuple[str, ...]
    clients: int = 4
    ops: int = 2000
    insert_ratio: float = 0.5
    value_bytes: int = 100
    seed: int = 0
    drain: bool = True
    structure: str = "queue"
    request_timeout_s: float | None = None  # None: the client's default

    def __attrs_post_init__(self) -> None:
        if not self.nodes:
            raise ValueError("at least one node address is needed")
        if self.clients < 1 or self.ops < 0 or self.value_bytes < 16:
            raise ValueError("clients >= 1, ops >= 0 and value_bytes >= 16 are needed")
        if not 0.0 <= self.insert_ratio <= 1.0:
            raise ValueError("the enqueue ratio must be in [0, 1]")


@attrs.define
class LoadResult:
    records: list[Record]
    workload_seconds: float
    workload_ops: int
    drained: int = 0

    @property
    def ops_per_second(self) -> float:
        return self.workload_ops / self.workload_seconds if self.workload_seconds else 0.0

    def latency_ms(self) -> dict[str, dict[str, float]]:
        """p50/p90/p99 latency in milliseconds, overall and per operation kind, of the
        workload (the drain's records left out: one request stands for many of them)."""
        groups: dict[str, list[float]] = {"all": []}
        for r in self.records:
            if r.phase == "drain":
                continue
            ms = (float(r.response) - float(r.invoke)) * 1000
            groups["all"].append(ms)
            groups.setdefault(r.op, []).append(ms)
        return {k: percentiles(v) for k, v in groups.items() if v}


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {
        "p50": at(0.50),
        "p90": at(0.90),
        "p99": at(0.99),
        "mean": round(statistics.fmean(ordered), 3),
    }


def element(client: int, seq: int, size: int) -> bytes:
    head = f"c{client}-{seq}:".encode()
    return head + b"x" * max(0, size - len(head))


def as_text(value: bytes | None) -> str | None:
    """History values are strings: the unique head of the element (padding dropped)."""
    if value is None:
        return None
    return value.split(b":", 1)[0].decode("utf-8", errors="backslashreplace")


async def run_load(
    config: LoadConfig, progress: Callable[[int, int], None] | None = None
) -> LoadResult:
    insert_op, remove_op = (
        ("enqueue", "dequeue") if config.structure == "queue" else ("push", "pop")
    )
    records: list[Record] = []
    done = 0
    start = time.perf_counter()

    def now() -> float:
        return time.perf_counter() - start

    async def one_client(index: int, count: int) -> None:
        nonlocal done
        rng = random.Random(config.seed * 1_000_003 + index)
        node = config.nodes[index % len(config.nodes)]
        async with connect(node, request_timeout_s=config.request_timeout_s) as q:
            for seq in range(count):
                if rng.random() < config.insert_ratio:
                    invoke = now()
                    receipt = (await q.insert([element(index, seq, config.value_bytes)]))[0]
                    records.append(
                        Record(
                            f"c{index}",
                            seq,
                            insert_op,
                            f"c{index}-{seq}",
                            invoke,
                            now(),
                            receipt.position,
                            receipt.ord,
                        )
                    )
                else:
                    invoke = now()
                    got = (await q.remove(1))[0]
                    records.append(
                        Record(
                            f"c{index}",
                            seq,
                            remove_op,
                            as_text(got.value),
                            invoke,
                            now(),
                            got.position,
                            got.ord,
                        )
                    )
                done += 1

    async def report() -> None:
        while True:
            if progress is not None:
                progress(done, config.ops)
            await anyio.sleep(PROGRESS_INTERVAL_S)

    shares = [
        config.ops // config.clients + (1 if i < config.ops % config.clients else 0)
        for i in range(config.clients)
    ]
    async with anyio.create_task_group() as tg:
        tg.start_soon(report)
        async with anyio.create_task_group() as clients:
            for i, share in enumerate(shares):
                clients.start_soon(one_client, i, share)
        tg.cancel_scope.cancel()
    if progress is not None:
        progress(done, config.ops)
    workload_seconds = now()
    result = LoadResult(records, workload_seconds, config.ops)
    if config.drain:
        result.drained = await drain(config, records, now, remove_op)
    return result


async def drain(
    config: LoadConfig, records: list[Record], now: Callable[[], float], remove_op: str
) -> int:
    """Remove until empty; every removal is recorded under the drain client's name."""
    name, seq, drained = f"c{config.clients}", 0, 0
    async with connect(config.nodes[0], request_timeout_s=config.request_timeout_s) as q:
        while True:
            invoke = now()
            batch = await q.remove(DRAIN_BATCH)
            response = now()
            for got in batch:
                records.append(
                    Record(
                        name,
                        seq,
                        remove_op,
                        as_text(got.value),
                        invoke,
                        response,
                        got.position,
                        got.ord,
                        phase="drain",
                    )
                )
                seq += 1
            values = [g.value for g in batch if g.value is not None]
            drained += len(values)
            if len(values) < len(batch):
                return drained
