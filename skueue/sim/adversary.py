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

Churn: ``joins`` new processes join (through the drain client's process, which never
leaves) and ``leaves`` processes leave, at random moments among the client operations;
the scheduler never lets the last process leave.  Client operations go to random
processes that are not leaving.

Crashes and restarts are not this scheduler's: the hosts simulator
(skueue/sim/hosts.py) crashes the daemon's whole host, its clients' retries and its
durable record included, with the same delivery moods.

Leases (``lease_ratio``): that share of the removes take a lease of 20, 100 or 500 steps
(the step counter is the lease clock, given to the process just before a leased remove,
as the daemon does, and to random processes now and then, which expires leases).  At
random moments a random live lease is acked or nacked; before the drain every lease
still held is nacked.  The run's ``lease_events`` go to :func:`skueue.check.leases.
check_leases`.  With ``lease_ratio=0`` nothing of this draws a random number.

A run ends when every client operation has completed and every join and leave has gone
through.  With ``drain=True`` a drain client then removes elements one at a time (each
after the previous completed) until the structure reports empty, so a test can check
that every element came out exactly once.  A run that needs more than ``max_steps``
steps raises :class:`SimStuck` naming which nodes wait for what.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial

from skueue.check.history import REMOVE_OPS, Record
from skueue.check.leases import LeaseEvent
from skueue.core.effects import Complete, Effect, Send
from skueue.core.ops import (
    DEFAULT_QUEUE,
    OpKind,
    Structure,
    dead_letter_queue,
    insert_kind,
    remove_kind,
)
from skueue.core.parts.membership_state import HANDOVER_BYTES_MAX
from skueue.core.process import Process
from skueue.overlay.labels import Kind
from skueue.sim.cluster import build_cluster, process_ids
from skueue.sim.recorder import Recorder
from skueue.sim.rounds import SimStuck, diagnose


@dataclass(frozen=True, slots=True)
class AsyncConfig:
    processes: int = 4
    structure: Structure = Structure.QUEUE
    operations: int = 50  # client operations, spread over random processes
    insert_ratio: float = 0.5
    seed: int = 0
    drain: bool = True
    max_steps: int = 2_000_000
    joins: int = 0  # processes that join during the run
    leaves: int = 0  # processes that leave during the run
    # Ids for the joining processes, in order (then j0, j1, ...): lets a test place a
    # joiner left of the anchor.
    join_ids: tuple[str, ...] = ()
    leave_anchor: bool = False  # every leave takes the anchor's process if it can
    # Elements are padded to this many characters (0: as short as they come), and the
    # processes split handovers at this many bytes (None: the core's default).
    value_bytes: int = 0
    handover_bytes_max: int | None = None
    lease_ratio: float = 0.0  # removes that take a lease (skueue/core/leases.py)
    max_deliveries: int = 0  # a leased remove's delivery limit (0: none)
    # Operations per client event, all of its kind and to one process (as enqueue_many
    # and dequeue_many send them): their positions come in runs (docs/dht_blocks.md).
    burst: int = 1

    def __post_init__(self) -> None:
        if self.burst < 1:
            raise ValueError("burst must be at least 1")
        if self.processes < 1:
            raise ValueError("processes must be at least 1")
        if not 0.0 <= self.insert_ratio <= 1.0:
            raise ValueError("the enqueue/push ratio must be in [0, 1]")


@dataclass(slots=True)
class AsyncResult:
    config: AsyncConfig
    records: list[Record]
    steps: int
    messages: int
    drained: list[str]  # elements the drain client removed, in order
    lease_events: list[LeaseEvent]  # what the consumers did (skueue/check/leases.py)
    taken: list[str]  # elements the clients removed without a lease (not the drain's)
    dead: list[str]  # the dead letters the drain took after the queue


class AsyncSim:
    def __init__(self, config: AsyncConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.ids = process_ids(config.processes)
        self.handover_bytes_max = config.handover_bytes_max or HANDOVER_BYTES_MAX
        # Hurry hints on, as in the daemon: the adversary delays and reorders them too.
        self.processes = build_cluster(
            self.ids, config.structure, handover_bytes_max=self.handover_bytes_max, hurry=True
        )
        self.order = [self.processes[pid] for pid in self.ids]
        self.recorder = Recorder()
        self.in_flight: list[Send] = []
        self.steps = 0
        self.messages = 0
        # The client workload (each operation goes to a random process when it is issued)
        # and the churn events, shuffled together.
        insert, remove = insert_kind(config.structure), remove_kind(config.structure)
        self.script: list[OpKind | str] = [
            insert if self.rng.random() < config.insert_ratio else remove
            for _ in range(config.operations)
        ]
        self.script += ["join"] * config.joins + ["leave"] * config.leaves
        self.rng.shuffle(self.script)
        self.script.reverse()  # pop() from the end takes them in order
        self.mood = self.rng.choice(("uniform", "newest", "starve"))
        self.victim = self.rng.choice(self.ids)
        self.drain_process = self.order[self.rng.randrange(len(self.order))]
        anchor_process = self.anchor_process()
        if config.leave_anchor and config.processes > 1:
            others = [p for p in self.order if p is not anchor_process]
            self.drain_process = others[self.rng.randrange(len(others))]
        self.joined = 0
        self.drain_op: int | None = None
        self.drained: list[str] = []
        self.drain_done = not config.drain
        # Leases: the leased removes waiting (their invoke and length), the live leases
        # by (process, lease id) with their element, and the events for the checker.
        self.leased_ops: dict[tuple[str, int], tuple[int, int]] = {}
        self.live: dict[tuple[str, int], str] = {}
        self.lease_events: list[LeaseEvent] = []
        self.taken: list[str] = []
        # With a delivery limit, the drain takes the dead letters too, after the queue.
        self.dead: list[str] = []
        self.dead_op: int | None = None
        self.dead_done = not (config.drain and config.lease_ratio and config.max_deliveries)
        self.create_joining = partial(
            Process.create_joining,
            structure=config.structure,
            handover_bytes_max=self.handover_bytes_max,
            hurry=True,
        )

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
        if process is self.drain_process and done.op_id in (self.drain_op, self.dead_op):
            self._drain_answer(done.op_id == self.dead_op, record.value)
            return
        leased = self.leased_ops.pop((process.process_id, done.op_id), None)
        # (A leased remove still on its way when its process left got no lease.)
        lease = None if leased is None else process.leases.get(done.op_id)
        if leased is not None and lease is not None and record.value is not None:
            invoke, length = leased
            self.live[(process.process_id, done.op_id)] = record.value
            self.lease_events.append(LeaseEvent(
                process.process_id, "lease", invoke, self.steps, record.value, done.op_id,
                lease.deliveries, length,
            ))  # fmt: skip
        elif record.op in REMOVE_OPS and record.value is not None:
            self.taken.append(record.value)

    def _drain_answer(self, dead: bool, value: str | None) -> None:
        """An answer of the drain: of the queue, or (``dead``) of its dead letters."""
        if dead:
            self.dead_op, self.dead_done, out = None, value is None, self.dead
        else:
            self.drain_op, self.drain_done, out = None, value is None, self.drained
        if value is not None:
            out.append(value)

    def _submit(
        self,
        process: Process,
        kind: OpKind,
        may_lease: bool = True,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
    ) -> int:
        value = None
        lease_ms = 0
        if kind.inserts:
            value = f"{process.process_id}-{process.next_op_id}".ljust(self.config.value_bytes, ".")
        elif may_lease and self.config.lease_ratio and self.rng.random() < self.config.lease_ratio:
            lease_ms = self.rng.choice((20, 100, 500))
            self._apply(process, process.clock(self.steps))  # its lease starts now
            self.leased_ops[(process.process_id, process.next_op_id)] = (self.steps, lease_ms)
        limit = self.config.max_deliveries if lease_ms else 0
        op = process.new_op(kind, value, queue, lease_ms=lease_ms, max_deliveries=limit,
                            priority=priority)  # fmt: skip
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

    def _next_event(self) -> None:
        rng = self.rng
        event = self.script.pop()
        if event == "join":
            ids = self.config.join_ids
            pid = ids[self.joined] if self.joined < len(ids) else f"j{self.joined}"
            self.joined += 1
            contact = self.drain_process.nodes[Kind.LEFT].me
            process = self.create_joining(pid, contact)
            self.processes[pid] = process
            self.order.append(process)
            self._apply(process, process.join())
            return
        staying = [p for p in self.order if p.joined and not p.leaving]
        if event == "leave":
            candidates = [p for p in staying if p is not self.drain_process]
            anchor = self.anchor_process()
            leaving = None
            if self.config.leave_anchor and anchor in candidates:
                leaving = anchor
            elif candidates:
                leaving = rng.choice(candidates)
            if leaving is not None:
                self._leave(leaving)
            return
        assert isinstance(event, OpKind)
        clients = [p for p in self.order if not p.leaving and not p.departed]
        client = rng.choice(clients)
        for _ in range(self.config.burst):
            self._submit(client, event)

    def step(self) -> None:
        self.steps += 1
        rng = self.rng
        roll = rng.random()
        if self.script and roll < 0.15:
            self._next_event()
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
        if self.config.lease_ratio:
            self._lease_moves()
        self._maybe_drain()

    def _leave(self, process: Process) -> None:
        """A process leaves: its leases go back (for the lease checker, its consumers'
        leases end here, as when a daemon's connections close)."""
        if self.config.lease_ratio:
            pid = process.process_id
            self.lease_events.append(LeaseEvent(pid, "close", self.steps, self.steps))
            for key in [k for k in self.live if k[0] == pid]:
                del self.live[key]  # returned by the leave: nobody acks them any more
        self._apply(process, process.leave())

    def _lease_moves(self) -> None:
        """Now and then a process's clock moves on (leases expire), or a consumer acks or
        nacks one of its leases."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.05:
            holders = [p for p in self.order if not p.departed and p.leases.needs_clock()]
            if holders:
                process = rng.choice(holders)
                self._apply(process, process.clock(self.steps))
        elif roll < 0.08 and self.live:
            key = rng.choice(sorted(self.live))
            self._end_lease(key, "ack" if rng.random() < 0.7 else "nack")

    def _end_lease(self, key: tuple[str, int], how: str) -> None:
        pid, lease_id = key
        value = self.live.pop(key)
        process = self.processes[pid]
        ok = process.leases.get(lease_id) is not None  # False: it expired, or went at a leave
        self.lease_events.append(
            LeaseEvent(pid, how, self.steps, self.steps, value, lease_id, ok=ok)
        )
        if process.departed:
            return
        if how == "ack":
            process.leases.ack(lease_id)
        else:
            self._apply(process, process.release(lease_id, how) or [])

    def _leases_settled(self) -> bool:
        """Every lease still held is nacked; True once none is held and no returned
        element is still on its way back in (then the drain may start)."""
        for key in sorted(self.live):
            self._end_lease(key, "nack")
        return not any(
            p.leases.table.leases or p.leases.returning for p in self.order if not p.departed
        )

    def anchor_process(self) -> Process | None:
        """The process whose left node holds the anchor's counters (the driver's view);
        None while the counters travel to a new minimum node."""
        for p in self.order:
            if not p.departed and p.nodes[Kind.LEFT].seat.policy is not None:
                return p
        return None

    def settled(self) -> bool:
        """Every join and leave has gone through and no update phase runs."""
        for p in self.order:
            if p.departed:
                continue
            if not p.joined or p.leaving:
                return False
            if any(n.member.phase is not None for n in p.nodes.values()):
                return False
        return True

    def _maybe_drain(self) -> None:
        workload_done = not self.script and self.recorder.pending == 0 and self.settled()
        if self.drain_done and not self.dead_done and self.dead_op is None:
            dead = dead_letter_queue(DEFAULT_QUEUE)
            self.dead_op = self._submit(self.drain_process, OpKind.DEQUEUE, False, dead)
            return
        if self.drain_done or not workload_done or self.drain_op is not None:
            return
        if self.config.lease_ratio and not self._leases_settled():
            return
        remove = remove_kind(self.config.structure)
        self.drain_op = self._submit(self.drain_process, remove, may_lease=False)

    def finished(self) -> bool:
        return (
            not self.script
            and self.recorder.pending == 0
            and self.drain_done
            and self.dead_done
            and self.settled()
        )

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
            self.config, self.recorder.records, self.steps, self.messages, self.drained,
            self.lease_events, self.taken, self.dead,
        )  # fmt: skip
