"""Leases: an element handed to a consumer and held for it until the consumer acks it,
returns it (nack), or the lease's deadline passes (issue 12; seeds 000 and 003:
commit/abort with a timeout, at-least-once).

Theory of operation
-------------------
A leased remove is an ordinary Dequeue (or Pop): it is linearized by the anchor like
any other, and its Get takes the element out of the DHT.  What changes is what happens
when the element reaches the remove's process: instead of being forgotten once it is
handed over, it is kept here, in the :class:`LeaseTable` of the process that served
the consumer, until the lease ends.  That process is the one that stores the element
from then on, and, in a durable daemon, the input log that makes the rest of its state
durable makes the lease durable too (every lease input below is logged and replayed).

A lease ends in one of three ways:

- **ack**: the element is gone for good;
- **return** (a nack, the deadline passing, the consumer's connection closing, the
  daemon restarting or leaving): the element goes in again **at the tail**, as a new
  insertion at the moment it is returned, carrying its delivery count and the reason
  (:class:`~skueue.core.ops.Redelivered`).  So the queue stays a queue for every
  checker: a returned element is one more Enqueue, ordered among the others by the
  anchor like any Enqueue.  (Keeping its old place, as SQS FIFO does, would need the
  anchor to hand out positions it had already passed.)
- **dead letter**: a return of an element delivered ``max_deliveries`` times already
  sends it to its queue's dead-letter queue (:func:`~skueue.core.ops.dead_letter_queue`)
  instead, with its count and reason.  (In a queue with priority levels, a returned
  element goes back at its own level, read off the position it was taken from.)  The
  limit is the queue's, set when it was made
  (``QueueSettings``, sent down with the remove's grants), or the remove's own, if that
  is smaller.

Time comes in as an input: the driver calls :meth:`Process.clock
<skueue.core.process.Process.clock>` with its clock in milliseconds, a lease's deadline
is that clock when the element arrived plus the lease's length, and a lease expires at
the first clock input past it.  The core stays deterministic: a replay of the same
inputs, clock values included, ends the same leases at the same points.

Lease ids are the remove operation's id: unique in the process and the same in a replay.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from skueue.core.effects import Complete, Effect
from skueue.core.errors import ProtocolError
from skueue.core.levels import level_of
from skueue.core.ops import (
    Element,
    Item,
    Op,
    OpKind,
    Redelivered,
    Structure,
    dead_letter_problem,
    dead_letter_queue,
    insert_kind,
)


@dataclass(slots=True)
class Lease:
    lease_id: int
    queue: str
    stack: bool
    value: Element
    deliveries: int  # this one included: 1 for the first delivery
    deadline_ms: int  # on the driver's clock
    max_deliveries: int  # 0: never dead-lettered
    reason: str  # why it came back the last time ("" for its first delivery)
    holder: int = -1  # the driver's mark of who holds it (a daemon: the connection); unread here
    priority: int = 0  # its level in a queue with priorities: it goes back there

    @property
    def dead_letter(self) -> bool:
        """Returned now, it goes to the dead letters: it was delivered as often as allowed."""
        return 0 < self.max_deliveries <= self.deliveries


@dataclass(slots=True)
class LeaseTable:
    leases: dict[int, Lease] = field(default_factory=dict)
    # (deadline, lease id), soonest first; an entry whose lease ended or moved is skipped.
    deadlines: list[tuple[int, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.leases)

    def add(self, lease: Lease) -> None:
        self.leases[lease.lease_id] = lease
        heapq.heappush(self.deadlines, (lease.deadline_ms, lease.lease_id))

    def end(self, lease_id: int) -> Lease | None:
        """Take the lease out (None: no such lease, or it ended already)."""
        lease = self.leases.pop(lease_id, None)
        if lease is not None and len(self.deadlines) > 64 + 2 * len(self.leases):
            self.deadlines = [d for d in self.deadlines if d[1] in self.leases]
            heapq.heapify(self.deadlines)
        return lease

    def end_all(self) -> list[Lease]:
        """Every lease, taken out, in id order."""
        out = [self.leases[i] for i in sorted(self.leases)]
        self.leases.clear()
        self.deadlines.clear()
        return out

    def extend(self, lease_id: int, deadline_ms: int) -> bool:
        lease = self.leases.get(lease_id)
        if lease is None:
            return False
        lease.deadline_ms = deadline_ms
        heapq.heappush(self.deadlines, (deadline_ms, lease_id))
        return True

    def due(self, now_ms: int) -> list[Lease]:
        """The leases whose deadline passed by ``now_ms``, taken out, soonest first."""
        out = []
        while self.deadlines and self.deadlines[0][0] <= now_ms:
            deadline, lease_id = heapq.heappop(self.deadlines)
            lease = self.leases.get(lease_id)
            if lease is not None and lease.deadline_ms == deadline:
                out.append(self.leases.pop(lease_id))
        return out

    def next_deadline(self) -> int | None:
        """The soonest deadline of a live lease (None: no lease)."""
        while self.deadlines:
            deadline, lease_id = self.deadlines[0]
            lease = self.leases.get(lease_id)
            if lease is not None and lease.deadline_ms == deadline:
                return deadline
            heapq.heappop(self.deadlines)
        return None


MakeOp = Callable[..., Op]  # Process.new_op
KEEP = "keep"
"""A return that is no delivery: the element goes back with the count and reason it had."""


@dataclass(slots=True)
class Leases:
    """A process's lease part: the table, the driver's clock as last given, the leased
    removes still waiting for their element, and the inserts that return elements (their
    Completes are the process's own business, not a client's)."""

    table: LeaseTable = field(default_factory=LeaseTable)
    now_ms: int = 0
    leasing: dict[int, Op] = field(default_factory=dict)
    returning: dict[int, tuple[Lease, str]] = field(default_factory=dict)
    expired: list[Lease] = field(default_factory=list)  # by the last clock input
    # Of the returning inserts, those that go to a dead-letter queue (by op id), and the
    # dead-letter queues they reached since the driver last took them (an insert into
    # NAME.dlq that the driver counts like a client's: issue 28 item 11).
    to_dead_letters: set[int] = field(default_factory=set)
    landed: list[str] = field(default_factory=list)

    def needs_clock(self) -> bool:
        """Leases are held, or leased removes wait for their element."""
        return bool(self.table.leases) or bool(self.leasing)

    def get(self, lease_id: int) -> Lease | None:
        return self.table.leases.get(lease_id)

    def ack(self, lease_id: int) -> bool:
        """The consumer is done with the element: it is gone for good.  False: no such
        lease (it ended already: the element went back, or was acked before)."""
        return self.table.end(lease_id) is not None

    def extend(self, lease_id: int, lease_ms: int) -> int | None:
        """Move the deadline to ``lease_ms`` after the last clock: the new deadline, or
        None: no such lease."""
        deadline = self.now_ms + lease_ms
        return deadline if self.table.extend(lease_id, deadline) else None

    def expect(self, op: Op) -> None:
        """A leased remove was submitted: its element, when it comes, is leased."""
        if op.kind.inserts or op.lease_ms < 0:
            raise ProtocolError(f"{op.describe()}: only a remove takes a lease")
        if op.max_deliveries and dead_letter_problem(op.queue):
            raise ProtocolError(f"{op.describe()}: {dead_letter_problem(op.queue)}")
        self.leasing[op.op_id] = op

    def due(self, now_ms: int) -> list[Lease]:
        self.now_ms = now_ms
        self.expired = self.table.due(now_ms)
        return self.expired

    def return_op(self, lease: Lease, reason: str, new_op: MakeOp, dead: bool | None = None) -> Op:
        """The insert that puts an ended lease's element back: at its queue's tail, or
        its dead letters' once delivered ``max_deliveries`` times (``dead`` overrides).
        ``KEEP`` puts it back as it was before this delivery (a look, not a delivery:
        ``skueue dlq`` lists dead letters so)."""
        item: Item = Redelivered(lease.value, lease.deliveries, reason)
        if reason == KEEP:
            dead = False
            before = lease.deliveries - 1
            item = Redelivered(lease.value, before, lease.reason) if before else lease.value
        letter = lease.dead_letter if dead is None else dead
        if letter:
            queue, kind = dead_letter_queue(lease.queue), OpKind.ENQUEUE
        else:
            structure = Structure.STACK if lease.stack else Structure.QUEUE
            queue, kind = lease.queue, insert_kind(structure)
        op: Op = new_op(kind, item, queue, priority=lease.priority)
        self.returning[op.op_id] = (lease, reason)
        if letter:
            self.to_dead_letters.add(op.op_id)
        return op

    def take_landed(self) -> list[str]:
        """The dead-letter queues that took an element since the last call, one entry
        per element."""
        landed, self.landed = self.landed, []
        return landed

    def step(self, effects: list[Effect]) -> tuple[list[Effect], list[tuple[Lease, str]]]:
        """Grant the leases of the leased removes that got their element, and keep the
        Completes of returning inserts from the driver.  Also returns the returns the
        anchor refused: only a dead-letter queue can (another structure already has its
        name, or the cluster is full of queues), and they go to their own queue."""
        out: list[Effect] = []
        refused: list[tuple[Lease, str]] = []
        for effect in effects:
            if type(effect) is Complete:
                op = self.leasing.pop(effect.op_id, None)
                if op is not None and effect.value is not None:
                    self._grant(op, effect.value, effect.max_deliveries, effect.position)
                returned = self.returning.pop(effect.op_id, None)
                if returned is not None:
                    if effect.op_id in self.to_dead_letters:
                        self.to_dead_letters.discard(effect.op_id)
                        if effect.error is None:
                            self.landed.append(dead_letter_queue(returned[0].queue))
                    if effect.error is not None:
                        if not returned[0].dead_letter:  # its own queue exists, as it is
                            raise ProtocolError(f"a lease's return was refused: {effect.error}")
                        refused.append(returned)
                    continue
            out.append(effect)
        return out, refused

    def _grant(self, op: Op, item: Item, queue_limit: int, position: int | None) -> None:
        """Lease ``item`` to ``op``'s consumer; it goes to the dead letters past the
        smaller of its queue's delivery limit and the one the remove asked for."""
        limit = min((x for x in (op.max_deliveries, queue_limit) if x), default=0)
        before, reason, value = 0, "", item
        if type(item) is Redelivered:
            before, reason, value = item.deliveries, item.reason, item.value
        deadline = self.now_ms + op.lease_ms
        self.table.add(
            Lease(op.op_id, op.queue, op.key[1], value, before + 1, deadline,  # type: ignore[arg-type]
                  limit, reason, priority=level_of(position or 0))
        )  # fmt: skip
