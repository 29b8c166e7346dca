"""The adversarial asynchronous scheduler: the paper's model of computation (§I-B).

Theory of operation
-------------------
At every step the scheduler picks one enabled action at random: deliver *any* message
in flight (not the oldest: messages overtake each other freely), run *any* process's
Timeout, or let a client submit its next operation.  Messages are never lost or
duplicated, and every choice comes from one seeded ``random.Random``, so a seed replays
a schedule exactly; property tests draw the seed (and the workload) with hypothesis.

To reach rare interleavings the scheduler switches, per seed, between a few delivery
moods: uniform, newest-first (overtaking), and starving a victim process whose messages
are held back for a while.  Time is the step counter; it is what histories record as
invoke and response.

A run ends when every client operation has completed.  With ``drain=True`` a drain
client then removes elements one at a time (each after the previous completed) until
the structure reports empty, so a test can check that every element came out exactly
once.  A run that needs more than ``max_steps`` steps raises :class:`SimStuck` naming
which nodes wait for what.
"""

from __future__ import annotations

import random

import attrs

from skueue.effects import Complete, Effect, Send
from skueue.history import Record
from skueue.ops import OpKind, Structure, insert_kind, remove_kind
from skueue.process import Process
from skueue.sim.cluster import build_cluster, process_ids
from skueue.sim.recorder import Recorder
from skueue.sim.rounds import SimStuck, diagnose


@attrs.frozen
class AsyncConfig:
    processes: int = 4
    structure: Structure = Structure.QUEUE
    operations: int = 50  # client operations, spread over random processes
    insert_ratio: float = 0.5
    seed: int = 0
    drain: bool = True
    max_steps: int = 2_000_000

    def __attrs_post_init__(self) -> None:
        if self.processes < 1:
            raise ValueError("processes must be at least 1")
        if not 0.0 <= self.insert_ratio <= 1.0:
            raise ValueError("the enqueue/push ratio must be in [0, 1]")


@attrs.define
class AsyncResult:
    config: AsyncConfig
    records: list[Record]
    steps: int
    messages: int
    drained: list[str]  # elements the drain client removed, in order


class AsyncSim:
    def __init__(self, config: AsyncConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.ids = process_ids(config.processes)
        self.processes = build_cluster(self.ids, config.structure)
        self.order = [self.processes[pid] for pid in self.ids]
        self.recorder = Recorder()
        self.in_flight: list[Send] = []
        self.steps = 0
        self.messages = 0
        # The client workload: for each process, the kinds of its operations in order.
        insert, remove = insert_kind(config.structure), remove_kind(config.structure)
        self.scripts: dict[str, list[OpKind]] = {pid: [] for pid in self.ids}
        for _ in range(config.operations):
            pid = self.ids[self.rng.randrange(len(self.ids))]
            kind = insert if self.rng.random() < config.insert_ratio else remove
            self.scripts[pid].append(kind)
        for script in self.scripts.values():
            script.reverse()  # pop() from the end takes them in order
        self.mood = self.rng.choice(("uniform", "newest", "starve"))
        self.victim = self.rng.choice(self.ids)
        self.drain_process = self.order[self.rng.randrange(len(self.order))]
        self.drain_op: int | None = None
        self.drained: list[str] = []
        self.drain_done = not config.drain

    # -- actions ----------------------------------------------------------------------

    def _apply(self, process: Process, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                self.in_flight.append(effect)
                self.messages += 1
            else:
                assert isinstance(effect, Complete)
                self._completed(process, effect)

    def _completed(self, process: Process, done: Complete) -> None:
        record = self.recorder.completed(process.process_id, done, self.steps)
        if process is self.drain_process and done.op_id == self.drain_op:
            self.drain_op = None
            if record.value is None:
                self.drain_done = True
            else:
                self.drained.append(record.value)

    def _submit(self, process: Process, kind: OpKind) -> int:
        value = f"{process.process_id}-{process.next_op_id}" if kind.inserts else None
        op = process.new_op(kind, value)
        self.recorder.invoked(process.process_id, op, self.steps)
        self._apply(process, process.submit(op))
        return op.op_id

    def _pick_message(self) -> Send:
        pool = self.in_flight
        i = len(pool) - 1
        if self.mood == "newest":
            i = len(pool) - 1 - min(len(pool) - 1, int(self.rng.expovariate(0.5)))
        elif self.mood == "starve" and self.rng.random() < 0.95:
            # Hold back messages to the victim: try a few times to find another one.
            for _ in range(4):
                i = self.rng.randrange(len(pool))
                if pool[i].to.process != self.victim:
                    break
        else:
            i = self.rng.randrange(len(pool))
        pool[i], pool[-1] = pool[-1], pool[i]
        return pool.pop()

    def step(self) -> None:
        self.steps += 1
        rng = self.rng
        waiting_clients = [pid for pid, s in self.scripts.items() if s]
        roll = rng.random()
        if waiting_clients and roll < 0.15:
            pid = rng.choice(waiting_clients)
            self._submit(self.processes[pid], self.scripts[pid].pop())
        elif self.in_flight and roll < 0.75:
            send = self._pick_message()
            process = self.processes[send.to.process]
            self._apply(process, process.handle(send.to, send.message))
        else:
            process = self.order[rng.randrange(len(self.order))]
            self._apply(process, process.tick())
        if rng.random() < 0.001:
            self.mood = rng.choice(("uniform", "newest", "starve"))
            self.victim = rng.choice(self.ids)
        self._maybe_drain()

    def _maybe_drain(self) -> None:
        workload_done = not any(self.scripts.values()) and self.recorder.pending == 0
        if self.drain_done or not workload_done or self.drain_op is not None:
            return
        remove = remove_kind(self.config.structure)
        self.drain_op = self._submit(self.drain_process, remove)

    def finished(self) -> bool:
        return not any(self.scripts.values()) and self.recorder.pending == 0 and self.drain_done

    def run(self) -> AsyncResult:
        while not self.finished():
            if self.steps >= self.config.max_steps:
                raise SimStuck(
                    f"seed {self.config.seed}: "
                    + diagnose(self.order, self.recorder.pending, self.steps)
                    + f"\n  {len(self.in_flight)} messages in flight"
                )
            self.step()
        return AsyncResult(
            self.config, self.recorder.records, self.steps, self.messages, self.drained
        )
