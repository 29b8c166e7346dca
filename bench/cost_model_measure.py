"""bench/cost_model.py's measurement: a static cluster run in synchronous rounds under a
closed-loop load, every message that crosses processes counted by kind, sender, receiver
and bytes on the wire."""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter
from collections.abc import Sequence

import msgpack
from cost_model_points import Point

from skueue.core.effects import Complete, Effect, Send
from skueue.core.ops import OpKind, Structure
from skueue.core.process import Process
from skueue.overlay.labels import LABEL_SPACE
from skueue.sim.cluster import build_cluster, process_ids, tree_height
from skueue.wire.framing import HEADER_BYTES
from skueue.wire.peer import encode_message

ROUNDS_PER_CYCLE_MAX = 100_000  # a cycle longer than this is a stuck protocol, not load


class Stuck(RuntimeError):
    """A cycle did not complete within its bound."""


def wire_bytes(send: Send) -> int:
    """The frame a daemon sends for this message (Host._apply, then framing.pack)."""
    frame = ["msg", int(send.to.kind), encode_message(send.message)]
    return HEADER_BYTES + len(msgpack.packb(frame, use_bin_type=True))


class Driver:
    """Synchronous rounds over a static cluster, counting every message that crosses
    processes (SyncSim's round, with the sender of every Send known)."""

    def __init__(self, n: int, seed: int) -> None:
        self.ids = process_ids(n)
        processes = build_cluster(self.ids, Structure.QUEUE)
        self.height = tree_height(processes)
        self.order: list[Process] = [processes[pid] for pid in self.ids]
        self.index = {pid: i for i, pid in enumerate(self.ids)}
        self.rng = random.Random(seed)
        self.inbox: list[Send] = []
        self.dirty: set[int] = set(range(n))
        self.pending = 0  # operations submitted and not completed
        self.counting = False
        self.round = 0
        self.sent = [0] * n
        self.received = [0] * n
        self.kind_messages: Counter[str] = Counter()
        self.kind_bytes: Counter[str] = Counter()
        self.process_kind: Counter[tuple[int, str]] = Counter()

    def _apply(self, i: int, effects: list[Effect], outbox: list[Send]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                outbox.append(effect)
                if self.counting:
                    self._count(i, effect)
            else:
                assert isinstance(effect, Complete)
                self.pending -= 1

    def _count(self, i: int, send: Send) -> None:
        j = self.index[send.to.process]
        kind = type(send.message).__name__
        self.sent[i] += 1
        self.received[j] += 1
        self.kind_messages[kind] += 1
        self.kind_bytes[kind] += wire_bytes(send)
        self.process_kind[(i, kind)] += 1
        self.process_kind[(j, kind)] += 1

    def submit_cycle(self, ops_per_process: int, grouped: bool = False) -> None:
        """Every process submits its operations for this cycle (sent with this round's):
        shuffled, or (``grouped``) all its enqueues and then all its dequeues, as one
        ``enqueue_many`` and one ``dequeue_many`` would."""
        enqueues = ops_per_process // 2
        kinds = [OpKind.ENQUEUE] * enqueues + [OpKind.DEQUEUE] * (ops_per_process - enqueues)
        outbox: list[Send] = []
        for i, process in enumerate(self.order):
            if not grouped:
                self.rng.shuffle(kinds)
            for kind in kinds:
                value = f"{process.process_id}-{process.next_op_id}" if kind.inserts else None
                op = process.new_op(kind, value)
                self.pending += 1
                self._apply(i, process.submit(op), outbox)
            self.dirty.add(i)
        self.inbox.extend(outbox)

    def step(self) -> None:
        self.round += 1
        outbox: list[Send] = []
        delivering, self.inbox = self.inbox, []
        for send in delivering:
            i = self.index[send.to.process]
            self._apply(i, self.order[i].handle(send.to, send.message), outbox)
            self.dirty.add(i)
        still: set[int] = set()
        for i in sorted(self.dirty):
            process = self.order[i]
            effects = process.tick()
            if process.last_tick_fired:
                still.add(i)
            self._apply(i, effects, outbox)
        self.dirty = still
        self.inbox = outbox

    def run_cycle(self, ops_per_process: int, grouped: bool = False) -> int:
        """One closed-loop cycle; the rounds it took."""
        start = self.round
        self.submit_cycle(ops_per_process, grouped)
        while self.pending:
            if self.round - start >= ROUNDS_PER_CYCLE_MAX:
                raise Stuck(f"{self.pending} operations incomplete after {ROUNDS_PER_CYCLE_MAX} "
                            f"rounds of one cycle (n={len(self.order)})")
            self.step()
        return self.round - start

    def interval_over_even(self, i: int) -> float:
        owned = sum(
            (node.ring.view.succ.label - node.ring.view.me.label) % LABEL_SPACE
            for node in self.order[i].nodes.values()
        )
        return owned / LABEL_SPACE * len(self.order)

    def tree_kids_elsewhere(self, i: int) -> int:
        process = self.order[i]
        return sum(
            1
            for node in process.nodes.values()
            for kid in node.ring.kids
            if kid.process != process.process_id
        )


def measure(
    n: int,
    *,
    ops_per_process: int = 2,
    cycles: int = 10,
    warmup_cycles: int = 1,
    seed: int = 0,
    grouped: bool = False,
) -> Point:
    if n < 2:
        raise ValueError("n must be at least 2: one process sends no messages")
    if ops_per_process < 1 or cycles < 1 or warmup_cycles < 0:
        raise ValueError("ops per process and cycles must be positive, warm-up not negative")
    began = time.perf_counter()
    driver = Driver(n, seed)
    for _ in range(warmup_cycles):
        driver.run_cycle(ops_per_process, grouped)
    driver.counting = True
    rounds = sum(driver.run_cycle(ops_per_process, grouped) for _ in range(cycles))
    ops = n * ops_per_process * cycles
    per_process = [s + r for s, r in zip(driver.sent, driver.received, strict=True)]
    busiest = max(range(n), key=per_process.__getitem__)
    messages = sum(driver.sent)
    return Point(
        n=n,
        ops_per_process=ops_per_process,
        cycles=cycles,
        warmup_cycles=warmup_cycles,
        seed=seed,
        tree_height=driver.height,
        ops_submitted=ops,
        ops_completed=ops - driver.pending,  # every cycle waits for all its operations
        rounds=rounds,
        messages=messages,
        bytes=sum(driver.kind_bytes.values()),
        by_kind={
            kind: {"messages": count, "bytes": driver.kind_bytes[kind]}
            for kind, count in sorted(driver.kind_messages.items())
        },
        busiest=driver.ids[busiest],
        busiest_messages=per_process[busiest],
        busiest_is_anchor=driver.order[busiest].stats().anchor,
        busiest_tree_kids=driver.tree_kids_elsewhere(busiest),
        busiest_interval_over_even=driver.interval_over_even(busiest),
        busiest_by_kind={
            kind: c for (i, kind), c in sorted(driver.process_kind.items()) if i == busiest
        },
        load_interval_correlation=_correlation(
            per_process, [driver.interval_over_even(i) for i in range(n)]
        ),
        least_messages=min(per_process),
        wall_seconds=time.perf_counter() - began,
        per_process=per_process,
    )


def _correlation(xs: Sequence[float], ys: Sequence[float]) -> float:
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:  # a constant series
        return float("nan")
