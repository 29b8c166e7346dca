"""Priority levels: what they cost Skueue (P = 8 against P = 1 on one cluster), and Skueue
against RabbitMQ's priority queue, throughput and PEI measured the same way (issue 14).

    .venv/bin/python bench/priority_compare.py [--elements 3000] [--producers 4]
        [--consumers 4] [--levels 8] [--rounds 3] [--systems skueue,rabbitmq]
        [--json bench/results/priority_compare.json] [--smoke]

The workload is the same on every system.  ``--producers`` producers enqueue their share
of ``--elements`` elements (100 bytes, unique heads), one per request, each at a priority
drawn at random from ``0..P-1`` (0 the most urgent), each awaiting its reply;
``--consumers`` consumers dequeue one element per request until every element has come
out (after an empty answer a consumer pauses 2 ms).  Consumers start once a fifth of the
elements are in: with a backlog the order matters (seed 000's consumer lag).  Throughput
is elements in and out per second, ``2 * elements / seconds``, from the first enqueue's
start to the last element's dequeue reply; latency is per request, in ms.

Every operation's real-time interval is recorded, from just before its request is sent to
the arrival of its reply, so both systems give a history of the same form.  From the
intervals alone :func:`skueue.check.pei.pei_observed` gives every dequeue a lower bound of
its PEI (elements surely present and surely ahead of the one returned), the same way for
both.  Skueue's replies also carry ``ord``, so its exact PEI (:func:`pei_by_order`) and the
certificate's verdict come with them; RabbitMQ's history has no ``ord``, so its verdict is
the pattern checkers' (a violation is proof, a pass is not).

- Skueue: ``--daemons`` (4) durable ``skueued`` (the default ``--fsync batch``: synced
  before the reply) on loopback, clients round robin over them.  P = 8: a queue made with
  ``create_queue(name, priorities=8)``, enqueued with ``priority=``; P = 1: a plain queue.
  Rounds alternate P = 8, P = 1, P = 1, P = 8, ... on the same cluster (a fresh queue
  each), so both see the same noise.
- RabbitMQ: Debian's rabbitmq-server, started on free loopback ports as
  ``bench/durable_peers.py`` does; a durable classic queue with ``x-max-priority`` = P,
  persistent messages published under publisher confirms (the interval ends at the
  confirm, when the message is in the queue) with AMQP priority ``P - 1 - level``
  (RabbitMQ serves higher numbers first), and ``basic.get`` with auto-ack (the interval
  ends when get-ok or get-empty arrives; the broker removed the message when it answered).

``--smoke`` runs tiny (2 daemons, 80 elements, one round per P, Skueue only unless
``--systems`` says otherwise, no JSON unless ``--json``).  Exit 1 when a system could not
be measured, lost or duplicated an element, or Skueue's history fails its check or shows a
PEI above 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

import interrupts  # noqa: E402
from bench_support import command_line, first_line, package_version  # noqa: E402
from durable_peers_rows import head  # noqa: E402
from interrupts import no_interrupt, on_interrupt, run_async  # noqa: E402
from rabbitmq_node import Rabbit, RabbitMQ, measure_on_node, persistent  # noqa: E402

from skueue.check.checker import check  # noqa: E402
from skueue.check.history import Record  # noqa: E402
from skueue.check.pei import PeiSummary, pei_by_order, pei_observed  # noqa: E402
from skueue.client.api import connect  # noqa: E402
from skueue.cluster.launch import launch  # noqa: E402
from skueue.cluster.loadgen import element, percentiles, shares  # noqa: E402
from skueue.sim.recorder import insert_level  # noqa: E402

SYSTEMS = ("skueue", "rabbitmq")
VALUE_BYTES = 100
BACKLOG_FRACTION = 5  # consumers start once 1/5 of the elements are in
EMPTY_PAUSE_S = 0.002
ROUND_TIMEOUT_S = 600.0
DEFAULT_JSON = BENCH / "results" / "priority_compare.json"


@dataclass(frozen=True)
class Workload:
    elements: int = 3000
    producers: int = 4
    consumers: int = 4
    levels: int = 8
    rounds: int = 3
    daemons: int = 4
    seed: int = 14


@dataclass
class Round:
    """One run of the workload: its history (times in seconds from its start)."""

    system: str
    levels: int
    records: list[Record]
    seconds: float


Send = Callable[[bytes, int], Awaitable[tuple[int | None, int | None]]]
"""Enqueue one element at a level; its (position, ord) where the system says them."""
Take = Callable[[], Awaitable[tuple[bytes | None, int | None, int | None]]]
"""Dequeue one element: (value or None for empty, position, ord)."""


@dataclass
class Driver:
    """How one system's producers and consumers connect: each a context giving a call."""

    system: str
    levels: int
    queue: str
    producer: Callable[[int], Any]
    consumer: Callable[[int], Any]


async def run_round(d: Driver, w: Workload, index: int) -> Round:
    records: list[Record] = []
    start = time.perf_counter()
    backlog, state = anyio.Event(), {"in": 0, "out": 0, "last": 0.0}

    def clock() -> float:
        return time.perf_counter() - start

    async def producer(i: int, count: int) -> None:
        rng = random.Random(f"{w.seed}/{index}/{d.levels}/{i}")
        async with d.producer(i) as send:
            for k in range(count):
                level = rng.randrange(d.levels)
                value = element(f"p{i}", k, VALUE_BYTES)
                invoke = clock()
                position, order = await send(value, level)
                response = clock()
                if position is not None:  # Skueue: the level the daemon assigned
                    level = insert_level(position) or 0
                records.append(
                    Record(
                        f"p{i}",
                        k,
                        "enqueue",
                        head(value),
                        invoke,
                        response,
                        position,
                        order,
                        queue=d.queue,
                        priority=level or None,
                    )
                )
                state["in"] += 1
                if state["in"] >= w.elements // BACKLOG_FRACTION:
                    backlog.set()

    async def consumer(j: int) -> None:
        await backlog.wait()
        async with d.consumer(j) as take:
            seq = 0
            while state["out"] < w.elements:
                invoke = clock()
                value, position, order = await take()
                response = clock()
                records.append(Record(f"c{j}", seq, "dequeue", None if value is None
                                      else head(value), invoke, response, position, order,
                                      queue=d.queue))  # fmt: skip
                seq += 1
                if value is None:
                    await anyio.sleep(EMPTY_PAUSE_S)
                else:
                    state["out"] += 1
                    state["last"] = max(state["last"], response)

    if w.elements < BACKLOG_FRACTION:
        backlog.set()
    with anyio.fail_after(ROUND_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            for i, count in enumerate(shares(w.elements, w.producers)):
                tg.start_soon(producer, i, count)
            for j in range(w.consumers):
                tg.start_soon(consumer, j)
    return Round(d.system, d.levels, records, state["last"])


# -- Skueue ------------------------------------------------------------------------------


def skueue_driver(addresses: Sequence[str], levels: int, queue: str, w: Workload) -> Driver:
    def at(k: int) -> str:
        return addresses[k % len(addresses)]

    @asynccontextmanager
    async def producer(i: int) -> AsyncIterator[Send]:
        async with connect(at(i)) as q:

            async def send(value: bytes, level: int) -> tuple[int | None, int | None]:
                (got,) = await q.insert([value], queue=queue,
                                        priority=level if levels > 1 else None)  # fmt: skip
                return got.position, got.ord

            yield send

    @asynccontextmanager
    async def consumer(j: int) -> AsyncIterator[Take]:
        async with connect(at(w.producers + j)) as q:

            async def take() -> tuple[bytes | None, int | None, int | None]:
                (got,) = await q.remove(1, queue=queue)
                return got.value, got.position, got.ord

            yield take

    return Driver("skueue", levels, queue, producer, consumer)


async def skueue_rounds(addresses: Sequence[str], w: Workload) -> list[Round]:
    # ABBA order: P, 1, 1, P, P, 1, ... so both see the same drift in the machine's load.
    order = [(w.levels, 1) if r % 2 == 0 else (1, w.levels) for r in range(w.rounds)]
    rounds = []
    for r, pair in enumerate(order):
        for levels in pair:
            name = f"p{levels}-r{r}"
            async with connect(addresses[0]) as q:
                await q.create_queue(name, priorities=levels if levels > 1 else None)
            rounds.append(await run_round(skueue_driver(addresses, levels, name, w), w, r))
            progress(rounds[-1])
    return rounds


def measure_skueue(w: Workload) -> tuple[list[Round], str]:
    commit = first_line(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], "")
    # One replica, as the README's figures were taken (3 is skueued's default).
    cluster = launch(w.daemons, replicas=1)
    try:
        rounds = run_async(skueue_rounds, cluster.addresses, w)
    finally:
        with no_interrupt():
            cluster.stop()
    return rounds, f"skueue {package_version('skueue')} ({commit}), {w.daemons} skueued"


# -- RabbitMQ ----------------------------------------------------------------------------


def rabbitmq_driver(node: Rabbit, levels: int, queue: str) -> Driver:
    @asynccontextmanager
    async def producer(i: int) -> AsyncIterator[Send]:
        import aio_pika

        exchange = (await node.channel(publisher_confirms=True)).default_exchange

        async def send(value: bytes, level: int) -> tuple[int | None, int | None]:
            message = persistent(value)
            message.priority = levels - 1 - level  # RabbitMQ: the higher, the sooner
            assert isinstance(message, aio_pika.Message)
            await exchange.publish(message, routing_key=queue)  # returns at the confirm
            return None, None

        yield send

    @asynccontextmanager
    async def consumer(j: int) -> AsyncIterator[Take]:
        channel = await node.channel()
        q = await channel.get_queue(queue, ensure=False)

        async def take() -> tuple[bytes | None, int | None, int | None]:
            got = await q.get(no_ack=True, fail=False)  # basic.get, auto-ack
            return (None if got is None else bytes(got.body)), None, None

        yield take

    return Driver("rabbitmq", levels, queue, producer, consumer)


async def rabbitmq_rounds(server: RabbitMQ, w: Workload) -> list[Round]:
    rounds = []
    for r in range(w.rounds):
        node = Rabbit(server.port)
        name = f"p{w.levels}-r{r}"
        try:
            setup = await node.channel()
            await setup.queue_delete(name)
            await setup.declare_queue(name, durable=True,
                                      arguments={"x-max-priority": w.levels})  # fmt: skip
            rounds.append(await run_round(rabbitmq_driver(node, w.levels, name), w, r))
            await setup.queue_delete(name)
        finally:
            await node.close()
        progress(rounds[-1])
    return rounds


def measure_rabbitmq(w: Workload) -> tuple[list[Round], str]:
    return measure_on_node(rabbitmq_rounds, w)


# -- what a round shows ------------------------------------------------------------------


def summary(values: Sequence[int]) -> dict[str, Any]:
    s = PeiSummary.of(values)
    return {"count": s.count, "median": s.median, "mean": s.mean, "p90": s.p90, "p99": s.p99,
            "max": s.max}  # fmt: skip


def round_row(r: Round) -> dict[str, Any]:
    """Throughput, latency, PEI and verdict of one round."""
    ins = [x for x in r.records if x.op == "enqueue"]
    outs = [x for x in r.records if x.op == "dequeue" and x.value is not None]
    empties = len(r.records) - len(ins) - len(outs)
    inserted = {x.value for x in ins}
    taken = [x.value for x in outs]
    counts = {
        "elements": len(ins),
        "lost": len(inserted - set(taken)),
        "duplicated": len(taken) - len(set(taken)),
        "empty_dequeues": empties,
    }
    ms = {
        "enqueue": percentiles([(x.response - x.invoke) * 1000 for x in ins]),
        "dequeue": percentiles([(x.response - x.invoke) * 1000 for x in outs]),
    }
    exact = bool(r.records) and all(x.ord is not None for x in r.records)
    verdict = check(r.records, model="linearizable", drained=True)
    return {
        "system": r.system,
        "levels": r.levels,
        "seconds": r.seconds,
        "ops_per_second": (len(ins) + len(outs)) / r.seconds if r.seconds else 0.0,
        "latency_ms": ms,
        **counts,
        "pei_observed": summary(pei_observed(r.records)),
        "pei_by_order": summary(pei_by_order(r.records)) if exact else None,
        "verdict": verdict.describe(),
        "linearizable": verdict.ok,
    }


def progress(r: Round) -> None:
    row = round_row(r)
    print(f"{r.system} P={r.levels}: {row['ops_per_second']:.0f} ops/s, PEI observed max "
          f"{row['pei_observed']['max']}, lost {row['lost']}, dup {row['duplicated']}; "
          f"{row['verdict'][:100]}", file=sys.stderr, flush=True)  # fmt: skip


def combine(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The rounds of one (system, P): median throughput, pooled latency and PEI."""
    return {
        "system": rows[0]["system"],
        "levels": rows[0]["levels"],
        "rounds": len(rows),
        "ops_per_second": statistics.median(r["ops_per_second"] for r in rows),
        "ops_per_second_each": [round(r["ops_per_second"], 1) for r in rows],
        "lost": sum(r["lost"] for r in rows),
        "duplicated": sum(r["duplicated"] for r in rows),
        "linearizable": all(r["linearizable"] for r in rows),
        "verdicts": sorted({r["verdict"] for r in rows}),
    }


def pooled(rounds: Sequence[Round]) -> dict[str, Any]:
    """Latency and PEI over every round of one (system, P), as if one run."""
    ins = [(x.response - x.invoke) * 1000 for r in rounds for x in r.records if x.op == "enqueue"]
    outs = [(x.response - x.invoke) * 1000 for r in rounds for x in r.records
            if x.op == "dequeue" and x.value is not None]  # fmt: skip
    observed = [p for r in rounds for p in pei_observed(r.records)]
    exact = all(x.ord is not None for r in rounds for x in r.records)
    return {
        "latency_ms": {"enqueue": percentiles(ins), "dequeue": percentiles(outs)},
        "pei_observed": summary(observed),
        "pei_by_order": summary([p for r in rounds for p in pei_by_order(r.records)])
        if exact else None,
    }  # fmt: skip


def table(results: Sequence[dict[str, Any]]) -> str:
    def pei(s: dict[str, Any] | None) -> str:
        if s is None:
            return "n/a (no ord)"
        return f"{s['median']:g} / {s['mean']:.3g} / {s['p90']:g} / {s['p99']:g} (max {s['max']})"

    lines = [
        "| system | P | ops/s (median of rounds) | enqueue p50/p99 ms | dequeue p50/p99 ms "
        "| PEI observed median/mean/p90/p99 | PEI at ord median/mean/p90/p99 | history |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lat = r["latency_ms"]
        verdict = "; ".join(v.split(":", 1)[0] + (": ok" if r["linearizable"] else ": VIOLATION")
                            for v in r["verdicts"][:1])  # fmt: skip
        lines.append(
            f"| {r['system']} | {r['levels']} | {r['ops_per_second']:.0f} "
            f"({', '.join(f'{x:.0f}' for x in r['ops_per_second_each'])}) "
            f"| {lat['enqueue']['p50']:.2f} / {lat['enqueue']['p99']:.2f} "
            f"| {lat['dequeue']['p50']:.2f} / {lat['dequeue']['p99']:.2f} "
            f"| {pei(r['pei_observed'])} | {pei(r['pei_by_order'])} | {verdict} |"
        )
    return "\n".join(lines)


def row_ok(r: dict[str, Any]) -> bool:
    if r["lost"] or r["duplicated"]:
        return False
    if r["system"] != "skueue":
        return True
    return r["linearizable"] and r["pei_by_order"] is not None and r["pei_by_order"]["max"] == 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    w = Workload()
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--elements", type=int, default=w.elements, help="per round")
    p.add_argument("--producers", type=int, default=w.producers)
    p.add_argument("--consumers", type=int, default=w.consumers)
    p.add_argument("--levels", type=int, default=w.levels, help="P of the priority queues")
    p.add_argument("--rounds", type=int, default=w.rounds, help="per system and P")
    p.add_argument("--daemons", type=int, default=w.daemons)
    p.add_argument("--systems", default=None, help=f"from {','.join(SYSTEMS)} (default all)")
    p.add_argument("--json", type=Path, default=None, help=f"default {DEFAULT_JSON}")
    p.add_argument("--smoke", action="store_true", help="tiny: 2 daemons, 80 elements")
    args = p.parse_args(argv)
    if args.smoke:
        args.elements, args.rounds, args.daemons = 80, 1, 2
        args.producers, args.consumers = 2, 2
    systems = (args.systems or ("skueue" if args.smoke else ",".join(SYSTEMS))).split(",")
    if not systems or set(systems) - set(SYSTEMS):
        p.error(f"--systems: choose from {','.join(SYSTEMS)}")
    args.systems = [s for s in SYSTEMS if s in systems]
    if min(args.elements, args.producers, args.consumers, args.rounds, args.daemons) < 1:
        p.error("--elements, --producers, --consumers, --rounds and --daemons must be >= 1")
    if not 2 <= args.levels <= 16:
        p.error("--levels: 2 to 16 (Skueue's PRIORITIES_MAX)")
    if args.json is None and not args.smoke:
        args.json = DEFAULT_JSON
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, on_interrupt)  # cancels the measurement; then exit 130
    w = Workload(args.elements, args.producers, args.consumers, args.levels, args.rounds,
                 args.daemons)  # fmt: skip
    print(command_line(), file=sys.stderr, flush=True)
    measure = {"skueue": measure_skueue, "rabbitmq": measure_rabbitmq}
    results, servers, failures = [], {}, []
    for system in args.systems:
        try:
            rounds, servers[system] = measure[system](w)
        except (Exception, SystemExit) as e:  # one system failing does not stop the other
            if interrupts.INTERRUPTED[0]:
                raise KeyboardInterrupt from e
            failures.append(f"{system}: {type(e).__name__}: {e}")
            print(f"{system} not measured: {failures[-1]}", file=sys.stderr, flush=True)
            continue
        for levels in sorted({r.levels for r in rounds}, reverse=True):
            mine = [r for r in rounds if r.levels == levels]
            results.append({**combine([round_row(r) for r in mine]), **pooled(mine)})
    cores = os.cpu_count()
    report = {
        "command": command_line(),
        "machine": {
            "description": f"{platform.machine()}, {cores} cores, Python "
            f"{platform.python_version()}",
            "cores": cores,
            "load_average_at_end": os.getloadavg(),
        },
        "servers": servers,
        "workload": {**asdict(w), "value_bytes": VALUE_BYTES,
                     "consumers_start_after": f"1/{BACKLOG_FRACTION} of the elements"},
        "results": results,
        "failures": failures,
    }  # fmt: skip
    print("\n" + table(results))
    for f in failures:
        print(f"- not measured: {f}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    ok = not failures and all(row_ok(r) for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # every process started here was stopped on the way out
        sys.exit(130)
