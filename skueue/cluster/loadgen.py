"""A load generator over the real client: concurrent clients, a mixed workload, a history.

Each client connects to one daemon (round robin over ``nodes``) and issues its share of
the operations.  Two knobs shape how those operations travel:

- ``in_flight``: the client splits its share among that many *lanes*, concurrent loops
  that share its one connection (the client multiplexes requests by request id), so up
  to ``in_flight`` requests per connection are outstanding at once.
- ``batch``: every request carries that many operations: one ``insert`` of a list
  (enqueue_many) or one ``remove(batch)`` (dequeue_many); the last request of a lane may
  carry fewer.

The history (wall-clock seconds since the run started) stays checkable for
linearizability because of how records are named; see :func:`lane_name` and
:func:`records_of`.  Elements are unique (``c3.1-17:`` padded to ``value_bytes``).

Throughput counts operations; latency is measured per request (a batch of 100 is one
latency sample), so ``batch`` > 1 raises both.  With ``drain`` a last client removes
elements until the structure reports empty, so every element can be accounted for; its
records carry ``phase="drain"``: they are checked with the rest, but throughput and
latency describe the workload alone.
"""

from __future__ import annotations

import random
import ssl
import statistics
import time
from collections.abc import Callable, Sequence

import anyio
import attrs

from skueue.check.history import Record
from skueue.client.api import Client, Removed, connect
from skueue.core.ops import PRIORITIES_MAX
from skueue.sim.recorder import insert_level

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
    in_flight: int = 1
    """Requests each client keeps outstanding on its one connection."""
    batch: int = 1
    """Operations each request carries."""
    queues: tuple[str, ...] = ()
    """Named queues each request picks one of at random (empty: the default queue); the
    history names them, and the checkers check each on its own."""
    token: str | None = None
    """The clients' token (None: ``$SKUEUE_TOKEN``, if set)."""
    tls: bool | ssl.SSLContext | None = None
    """The clients' TLS (``connect(tls=...)``; None: ``$SKUEUE_TLS_CA``, if set)."""
    priorities: int = 1
    """Each insert request goes to a priority drawn at random from ``0..priorities-1``
    (1: none is sent).  The queues must have been made with levels (:func:`make_queues`);
    the history takes each insert's level from its position, as the daemon assigned it."""

    def __attrs_post_init__(self) -> None:
        if not self.nodes:
            raise ValueError("at least one node address is needed")
        if self.clients < 1 or self.ops < 0 or self.value_bytes < 16:
            raise ValueError("clients >= 1, ops >= 0 and value_bytes >= 16 are needed")
        if not 0.0 <= self.insert_ratio <= 1.0:
            raise ValueError("the enqueue ratio must be in [0, 1]")
        if self.in_flight < 1:
            raise ValueError(
                f"in_flight >= 1 is needed (requests in flight per client), got {self.in_flight}"
            )
        if self.batch < 1:
            raise ValueError(f"batch >= 1 is needed (operations per request), got {self.batch}")
        if not 1 <= self.priorities <= PRIORITIES_MAX:
            raise ValueError(f"priorities must be in 1..{PRIORITIES_MAX}, got {self.priorities}")


@attrs.frozen
class RequestTime:
    """One workload request: its kind (the op of every record it produced) and latency."""

    op: str
    ms: float


@attrs.define
class LoadResult:
    records: list[Record]
    workload_seconds: float
    workload_ops: int
    drained: int = 0
    requests: list[RequestTime] = attrs.Factory(list)
    """The workload's requests (the drain's left out); with ``batch`` > 1 there are fewer
    requests than records."""
    started: float = 0.0
    """``time.perf_counter()`` at the start: time 0 of the history."""
    stopped_early: bool = False
    """Asked to stop (``run_workload``'s ``stop``) before all its operations were done:
    ``workload_ops`` is what was done."""

    def clock(self) -> float:
        """Seconds since the start: the time of a record added now (by the drain)."""
        return time.perf_counter() - self.started

    @property
    def ops_per_second(self) -> float:
        return self.workload_ops / self.workload_seconds if self.workload_seconds else 0.0

    def latency_ms(self) -> dict[str, dict[str, float]]:
        """p50/p90/p99 latency in milliseconds per request, overall and per operation kind,
        of the workload (the drain left out: one request stands for many of its records)."""
        groups: dict[str, list[float]] = {"all": []}
        for r in self.requests:
            groups["all"].append(r.ms)
            groups.setdefault(r.op, []).append(r.ms)
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


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal whole shares, the larger ones first."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def request_sizes(ops: int, batch: int) -> list[int]:
    """``ops`` cut into requests of ``batch`` operations; the last one takes the rest."""
    full, rest = divmod(ops, batch)
    return [batch] * full + ([rest] if rest else [])


def lane_name(client: int, lane: int, in_flight: int) -> str:
    """The history's process name of one lane.

    A process in a history must be sequential: the checkers order its records by ``seq``
    (program order).  A lane awaits each request before sending the next, so it is
    sequential; lanes of one client overlap, so each needs its own name.  With one lane
    per client the name stays ``c3``, as histories of earlier runs have it."""
    return f"c{client}" if in_flight == 1 else f"c{client}.{lane}"


def element(lane: str, seq: int, size: int) -> bytes:
    head = f"{lane}-{seq}:".encode()
    return head + b"x" * max(0, size - len(head))


def as_text(value: bytes | None) -> str | None:
    """History values are strings: the unique head of the element (padding dropped)."""
    if value is None:
        return None
    return value.split(b":", 1)[0].decode("utf-8", errors="backslashreplace")


@attrs.frozen
class Outcome:
    """One operation's result as the history records it."""

    value: str | None
    position: int | None
    ord: int | None


def removal(got: Removed) -> Outcome:
    return Outcome(as_text(got.value), got.position, got.ord)


def records_of(
    lane: str,
    first_seq: int,
    op: str,
    outcomes: Sequence[Outcome],
    invoke: float,
    response: float,
    phase: str | None = None,
    queue: str | None = None,
) -> list[Record]:
    """The records of one request: one per operation, consecutive ``seq`` in the lane.

    Every operation of a request gets the request's invoke and response times, and all
    stay in the request's lane in list order.  That is what the client promises (a call's
    inserts and removals take effect in list order), so the checkers' program order
    holds the daemon to it.  Equal times within one process are fine for the checkers:
    they order a process by ``seq`` alone and apply real time only where one record
    responded strictly before another was invoked.  (One process per operation would also
    be valid, but weaker, and it would multiply the exact search's lanes.)"""
    return [
        Record(lane, first_seq + k, op, o.value, invoke, response, o.position, o.ord, phase,
               queue, insert_level(o.position) if op == "enqueue" else None)  # fmt: skip
        for k, o in enumerate(outcomes)
    ]


def op_names(structure: str) -> tuple[str, str]:
    """The insert and the remove operation of ``structure``, as histories name them."""
    return ("enqueue", "dequeue") if structure == "queue" else ("push", "pop")


def lane_rng(seed: int, lane: str) -> random.Random:
    """A lane's own random choices, so a run repeats with its seed whatever the timing."""
    return random.Random(f"{seed}/{lane}")


async def make_queues(config: LoadConfig) -> list[str]:
    """Make the workload's named queues with its priority levels, before it starts; the
    names of those this call made.  A queue of levels must be made so: its first
    operation would make it without.  One made already with these settings is used as
    it is; with others, ``create_queue`` raises ``RequestRejected`` saying which."""
    if config.priorities <= 1 or not config.queues:
        return []
    made = []
    async with connect(
        config.nodes[0], request_timeout_s=config.request_timeout_s, token=config.token,
        tls=config.tls,
    ) as q:  # fmt: skip
        for name in config.queues:
            if await q.create_queue(name, priorities=config.priorities):
                made.append(name)
    return made


async def run_load(
    config: LoadConfig, progress: Callable[[int, int], None] | None = None
) -> LoadResult:
    """The workload, then (with ``config.drain``) the drain."""
    result = await run_workload(config, progress)
    if config.drain:
        await drain(config, result)
    return result


async def run_workload(
    config: LoadConfig,
    progress: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> LoadResult:
    """The workload alone: a caller that measures it (CPU, say) may :func:`drain` after.
    Once ``stop()`` says so, no lane starts another request (those running finish)."""
    insert_op, remove_op = op_names(config.structure)
    result = LoadResult([], 0.0, config.ops, started=time.perf_counter())
    now = result.clock
    done = 0

    async def insert(
        q: Client, lane: str, seq: int, size: int, queue: str | None, priority: int | None
    ) -> list[Outcome]:
        values = [element(lane, seq + k, config.value_bytes) for k in range(size)]
        receipts = await q.insert(values, queue=queue, priority=priority)
        pairs = zip(values, receipts, strict=True)
        return [Outcome(as_text(v), r.position, r.ord) for v, r in pairs]

    async def remove(q: Client, size: int, queue: str | None) -> list[Outcome]:
        return [removal(g) for g in await q.remove(size, queue=queue)]

    async def one_lane(q: Client, lane: str, count: int) -> None:
        nonlocal done
        rng, seq = lane_rng(config.seed, lane), 0
        for size in request_sizes(count, config.batch):
            if stop is not None and stop():
                return
            inserting = rng.random() < config.insert_ratio
            queue = rng.choice(config.queues) if config.queues else None
            # Drawn only with levels, so a run without them repeats earlier runs' choices.
            priority = (rng.randrange(config.priorities)
                        if inserting and config.priorities > 1 else None)  # fmt: skip
            op = insert_op if inserting else remove_op
            invoke = now()
            outcomes = await (
                insert(q, lane, seq, size, queue, priority) if inserting else remove(q, size, queue)
            )
            response = now()
            result.records.extend(
                records_of(lane, seq, op, outcomes, invoke, response, queue=queue)
            )
            result.requests.append(RequestTime(op, (response - invoke) * 1000))
            seq += len(outcomes)
            done += len(outcomes)

    async def one_client(index: int, count: int) -> None:
        node = config.nodes[index % len(config.nodes)]
        async with (
            connect(
                node, request_timeout_s=config.request_timeout_s, token=config.token,
                tls=config.tls,
            ) as q,  # fmt: skip
            anyio.create_task_group() as lanes,
        ):
            for lane, share in enumerate(shares(count, config.in_flight)):
                lanes.start_soon(one_lane, q, lane_name(index, lane, config.in_flight), share)

    async def report() -> None:
        while True:
            if progress is not None:
                progress(done, config.ops)
            await anyio.sleep(PROGRESS_INTERVAL_S)

    async with anyio.create_task_group() as tg:
        tg.start_soon(report)
        async with anyio.create_task_group() as clients:
            for i, share in enumerate(shares(config.ops, config.clients)):
                clients.start_soon(one_client, i, share)
        tg.cancel_scope.cancel()
    if progress is not None:
        progress(done, config.ops)
    result.workload_seconds = now()
    result.stopped_early = done < config.ops
    result.workload_ops = done
    return result


async def drain(config: LoadConfig, result: LoadResult) -> None:
    """Remove until empty (every queue of the workload in turn), on the workload's clock;
    every removal is recorded under the drain client's name, and ``result.drained``
    counts the elements it took."""
    remove_op = op_names(config.structure)[1]
    name, seq = f"c{config.clients}", 0
    async with connect(
        config.nodes[0], request_timeout_s=config.request_timeout_s, token=config.token,
        tls=config.tls,
    ) as q:  # fmt: skip
        for queue in config.queues or (None,):
            while True:
                invoke = result.clock()
                batch = await q.remove(DRAIN_BATCH, queue=queue)
                response = result.clock()
                outcomes = [removal(g) for g in batch]
                result.records.extend(
                    records_of(name, seq, remove_op, outcomes, invoke, response, "drain", queue)
                )
                seq += len(batch)
                values = [g.value for g in batch if g.value is not None]
                result.drained += len(values)
                if len(values) < len(batch):
                    break
