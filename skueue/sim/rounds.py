"""The synchronous-rounds simulator: the paper's evaluation model (SPEC §9, paper §VII).

Every message sent in round ``r`` is handled in round ``r + 1``; every process runs its
Timeout once a round.  A round is: deliver last round's messages, create this round's
requests, tick.  The metric is rounds from a request's creation to its completion.

Priorities (issue 14): with ``priorities`` P > 1 the requests go to a queue made with P
levels (:data:`PRIORITY_QUEUE`), and every enqueue draws a uniformly random level.  The
queue is made, and ``prefill`` elements are enqueued, before the first request round;
those records carry ``phase="setup"``: they belong to the history (a dequeue may take a
prefilled element) but not to the rounds per request.

Speed: a tick changes nothing unless a message or a request reached the process since
its last tick that did nothing (the stage-1 condition depends only on node state), so
only those processes are ticked.  ``tick_all=True`` ticks every process every round, and
a test holds both modes to the same history.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from skueue.check.history import Record
from skueue.core.effects import Complete, Effect, Send
from skueue.core.messages.stages import Message
from skueue.core.ops import (
    DEFAULT_QUEUE,
    PRIORITIES_MAX,
    OpKind,
    QueueSettings,
    Structure,
    insert_kind,
    remove_kind,
)
from skueue.core.process import Process
from skueue.sim.cluster import build_cluster, process_ids, tree_height
from skueue.sim.recorder import Recorder

PRIORITY_QUEUE = "pq"
"""The queue a run with ``priorities > 1`` uses."""
SETUP_PHASE = "setup"
"""``Record.phase`` of the operations that prepare a run (the create, the prefill)."""


class SimStuck(RuntimeError):
    """A run did not become quiescent within its bound; the message says who waits for what."""


@dataclass(frozen=True, slots=True)
class SyncConfig:
    processes: int = 16
    structure: Structure = Structure.QUEUE
    rounds: int = 1000  # rounds that create requests; then the run drains
    rate: int = 10  # requests per round, each to a random process (paper §VII-A)
    per_node_probability: float | None = None  # Figure 4: each process, each round
    insert_ratio: float = 0.5
    seed: int = 0
    drain_rounds_max: int = 100_000
    local_delivery: bool = True
    tick_all: bool = False
    priorities: int = 1  # levels of the queue requests go to; 1: the default queue
    prefill: int = 0  # elements enqueued before the first round

    def __post_init__(self) -> None:
        if self.processes < 1:
            raise ValueError("processes must be at least 1")
        if not 0.0 <= self.insert_ratio <= 1.0:
            raise ValueError("the enqueue/push ratio must be in [0, 1]")
        if self.rounds < 0 or self.rate < 0:
            raise ValueError("rounds and rate must not be negative")
        if not 1 <= self.priorities <= PRIORITIES_MAX:
            raise ValueError(f"priorities must be 1 to {PRIORITIES_MAX}")
        if self.priorities > 1 and self.structure is not Structure.QUEUE:
            raise ValueError("only a queue has priority levels")
        if self.prefill < 0:
            raise ValueError("prefill must not be negative")
        p = self.per_node_probability
        if p is not None and not 0.0 <= p <= 1.0:
            raise ValueError("the per-node request probability must be in [0, 1]")


@dataclass(slots=True)
class SyncResult:
    config: SyncConfig
    records: list[Record]
    rounds_run: int
    network_messages: int
    tree_height: int
    largest_batch: int
    entries_per_process: list[int]  # at the end of the request phase


class SyncSim:
    def __init__(self, config: SyncConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.ids = process_ids(config.processes)
        self.processes = build_cluster(
            self.ids, config.structure, local_delivery=config.local_delivery
        )
        self.order = [self.processes[pid] for pid in self.ids]
        self.index = {pid: i for i, pid in enumerate(self.ids)}
        self.recorder = Recorder()
        self.inbox: list[Send] = []
        self.round = 0
        self.network_messages = 0
        self.dirty: set[int] = set(range(len(self.order)))
        self.insert = insert_kind(config.structure)
        self.remove = remove_kind(config.structure)
        self.queue = PRIORITY_QUEUE if config.priorities > 1 else DEFAULT_QUEUE
        self.on_round: Callable[[int], None] | None = None

    # -- one round --------------------------------------------------------------------

    def _apply(self, process: Process, effects: list[Effect], outbox: list[Send]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                outbox.append(effect)
            else:
                assert isinstance(effect, Complete)
                self.recorder.completed(process.process_id, effect, self.round)

    def submit(self, process: Process, kind: OpKind, outbox: list[Send]) -> None:
        value = f"{process.process_id}-{process.next_op_id}" if kind.inserts else None
        levels = self.config.priorities
        # Drawn only with levels, so a run without them keeps its random stream.
        priority = self.rng.randrange(levels) if kind.inserts and levels > 1 else 0
        op = process.new_op(kind, value, queue=self.queue, priority=priority)
        self.recorder.invoked(process.process_id, op, self.round)
        self._apply(process, process.submit(op), outbox)
        self.dirty.add(self.index[process.process_id])

    def _generate(self, outbox: list[Send]) -> None:
        cfg = self.config
        rng = self.rng
        if cfg.per_node_probability is not None:
            targets = [p for p in self.order if rng.random() < cfg.per_node_probability]
        else:
            targets = [self.order[rng.randrange(len(self.order))] for _ in range(cfg.rate)]
        for p in targets:
            kind = self.insert if rng.random() < cfg.insert_ratio else self.remove
            self.submit(p, kind, outbox)

    def add_process(self, process: Process, effects: list[Effect]) -> None:
        """A process that joins during the run; ``effects`` are its first ones (its join
        requests), sent this round."""
        self.index[process.process_id] = len(self.order)
        self.order.append(process)
        self.processes[process.process_id] = process
        self.dirty.add(len(self.order) - 1)
        self.inbox.extend(e for e in effects if isinstance(e, Send))

    def step(self, generate: bool) -> None:
        """Run one round."""
        self.round += 1
        outbox: list[Send] = []
        delivering, self.inbox = self.inbox, []
        for send in delivering:
            i = self.index[send.to.process]
            process = self.order[i]
            self._apply(process, process.handle(send.to, _message(send)), outbox)
            self.dirty.add(i)
        if generate:
            self._generate(outbox)
        to_tick = range(len(self.order)) if self.config.tick_all else sorted(self.dirty)
        still = set()
        for i in to_tick:
            process = self.order[i]
            effects = process.tick()
            if process.last_tick_fired:
                still.add(i)
            self._apply(process, effects, outbox)
        self.dirty = still
        self.network_messages += len(outbox)
        self.inbox = outbox
        if self.on_round is not None:
            self.on_round(self.round)

    # -- a whole run ------------------------------------------------------------------

    def setup(self) -> None:
        """Make the queue with its levels, then enqueue ``prefill`` elements at random
        processes; both complete before the first request round, and their records
        carry ``phase="setup"``."""
        cfg = self.config
        self.recorder.phase = SETUP_PHASE
        if cfg.priorities > 1:
            first = self.order[0]
            made = first.new_op(
                OpKind.CREATE, queue=self.queue, settings=QueueSettings(priorities=cfg.priorities)
            )
            self.recorder.invoked(first.process_id, made, self.round)
            outbox: list[Send] = []
            self._apply(first, first.submit(made), outbox)
            self.dirty.add(0)
            self.inbox.extend(outbox)
            self.drain()
        if cfg.prefill:
            outbox = []
            for _ in range(cfg.prefill):
                self.submit(self.order[self.rng.randrange(len(self.order))], self.insert, outbox)
            self.inbox.extend(outbox)
            self.drain()
        self.recorder.phase = None

    def run(self) -> SyncResult:
        cfg = self.config
        height = tree_height(self.processes)
        if cfg.priorities > 1 or cfg.prefill:
            self.setup()
        for _ in range(cfg.rounds):
            self.step(generate=True)
        entries = [p.entries() for p in self.order]
        self.drain()
        largest = max(n.batching.largest_batch for p in self.order for n in p.nodes.values())
        return SyncResult(
            cfg, self.recorder.records, self.round, self.network_messages, height, largest, entries
        )

    def drain(self) -> None:
        """Run rounds without new requests until every request has completed."""
        limit = self.round + self.config.drain_rounds_max
        while self.recorder.pending:
            if self.round >= limit:
                raise SimStuck(diagnose(self.order, self.recorder.pending, self.round))
            self.step(generate=False)


def _message(send: Send) -> Message:
    return send.message


def diagnose(processes: list[Process], pending: int, when: int) -> str:
    lines = [f"not quiescent at step {when}: {pending} operations incomplete"]
    for p in processes:
        for node in p.nodes.values():
            why = node.waiting_for()
            if why:
                lines.append(f"  {node.me.describe()} waits for {why}")
    return "\n".join(lines[:60])
