"""Client intake: a node's own buffer of new operations, with the stack's local combining.

Theory of operation
-------------------
Operations of one process enter one buffer in issue order, which is what gives program
order (SPEC §6).  When the node starts a new batch it freezes the buffer; when the grants
for that batch come back, :meth:`OwnBuffer.assign` hands each operation its position,
rank (``ord``) and ticket.

Queue: the buffer is the Definition-5 batch, one operation after another.

Delete and create (issue 12), peek (issue 14), configure (issue 28): the anchor applies
a cycle's deletes of a queue after the cycle's runs of it, its peeks after those, and its
creates and configures before them.  So that program order holds, operations on a queue
issued after its delete or after a peek at it (but further peeks) wait for the next batch
(``deferred``), and so does a create or configure issued after other operations on its
queue (or another create or configure of it).  Once one
operation on a queue waits, every later one on it waits too.

Stack (SPEC §7, paper §VI): a Pop that arrives while the buffer holds an unmatched Push
takes the last such Push at once: the pair never needs the anchor or the DHT.  So the
unmatched operations always have the form (pops, pushes), and the batch sent up is
``(0, pops, pushes)`` of constant size (Theorem 20).  The matched pairs still get ranks
in program order (the batch's ``slots``), and they complete when the grants arrive,
after the anchor has serialized everything before them: that keeps the stack
linearizable, not only sequentially consistent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from skueue.core.batch import (
    Batch,
    Creates,
    Deletes,
    Limit,
    Peeks,
    QueueKey,
    Refusal,
    RunGrant,
    Section,
    SectionGrants,
)
from skueue.core.creates_deletes import Creation, Deletion
from skueue.core.levels import clamp
from skueue.core.ops import CONFIGURE_LEVELS, Item, Op, OpKind, Structure
from skueue.core.peeks import Peeked


@dataclass(frozen=True, slots=True)
class Assignment:
    """What one own operation got from the anchor."""

    op: Op
    ord: int
    position: int | None  # None: an empty remove, or a locally combined operation
    ticket: int = 0
    # For a locally combined Pop: the element of the Push it was matched with.
    combined_value: Item | None = None
    combined: bool = False
    refused: int = 0  # why the anchor refused the operation's queue (ops.REFUSALS), or 0
    # A delete's: the queue it retired and the positions it removes (none for every
    # delete of the queue in the cycle but the first).
    deleted: Deletion | None = None
    created: Creation | None = None  # a create's: what the anchor did
    # A remove's: the delivery limit of its queue (0: none), for its lease.
    limit: int = 0


@dataclass(slots=True)
class OwnBuffer:
    structure: Structure
    ops: list[Op] = field(default_factory=list)
    # Stack only: index of each matched op -> index of its partner; unmatched pushes in order.
    partner: dict[int, int] = field(default_factory=dict)
    open_pushes: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ops)

    def add(self, op: Op) -> None:
        index = len(self.ops)
        self.ops.append(op)
        if self.structure is not Structure.STACK:
            return
        if op.kind.inserts:
            self.open_pushes.append(index)
        elif self.open_pushes:
            push = self.open_pushes.pop()
            self.partner[index] = push
            self.partner[push] = index

    def _split(self) -> int:
        """Stack: index of the first unmatched Push; ops before it form the Pop run."""
        return self.open_pushes[0] if self.open_pushes else len(self.ops)

    def batch(self) -> Batch:
        if not self.ops:
            return Batch()
        if self.structure is Structure.QUEUE:
            inserts = (op.kind.inserts for op in self.ops)
            if any(op.priority for op in self.ops):
                return Batch.of_order(inserts, [op.priority for op in self.ops])
            return Batch.of_order(inserts)
        split = self._split()
        pops = sum(1 for i in range(split) if i not in self.partner)
        pushes = len(self.open_pushes)
        return Batch((0, pops, pushes), (0, split, len(self.ops) - split))

    def assign(self, grants: tuple[RunGrant, ...]) -> list[Assignment]:
        if self.structure is Structure.QUEUE:
            return self._assign_queue(grants)
        return self._assign_stack(grants)

    def _assign_queue(self, grants: tuple[RunGrant, ...]) -> list[Assignment]:
        out = []
        run, offset = -1, 0
        taken: list[int] = []  # an insert run of a queue with levels: positions per level
        for op in self.ops:
            wanted_run_parity = 0 if op.kind.inserts else 1
            if run < 0 or run % 2 != wanted_run_parity:
                run = wanted_run_parity if run < 0 else run + 1
                offset = 0
                taken = [0] * len(grants[run].levels)
            g = grants[run]
            if taken and op.kind.inserts:  # at its own level, in issue order there
                level = clamp(op.priority, len(taken))
                position: int | None = g.levels[level][0] + taken[level]
                taken[level] += 1
            else:
                position = g.position(offset) if offset < g.available else None
            out.append(Assignment(op, g.ord_first + offset, position))
            offset += 1
        return out

    def _assign_stack(self, grants: tuple[RunGrant, ...]) -> list[Assignment]:
        out = []
        split = self._split()
        taken = [0, 0]  # positions used in the pop run and the push run
        for index, op in enumerate(self.ops):
            run = 1 if index < split else 2
            g = grants[run]
            rank = g.ord_first + (index if run == 1 else index - split)
            if index in self.partner:
                partner_value = self.ops[self.partner[index]].value
                value = None if op.kind.inserts else partner_value
                out.append(Assignment(op, rank, None, combined_value=value, combined=True))
                continue
            k = taken[run - 1]
            taken[run - 1] += 1
            if k < g.available:
                out.append(Assignment(op, rank, g.position(k), g.ticket_of(k)))
            else:
                out.append(Assignment(op, rank, None))
        return out


CREATE_KINDS = (OpKind.CREATE, OpKind.CONFIGURE)


def create_key(op: Op) -> tuple[str, bool, int, int]:
    """A create's queue and settings, or a configure's queue and limit, as batches carry
    them (``batch.CreateKey``)."""
    s = op.settings
    assert s is not None
    if op.kind is OpKind.CONFIGURE:
        return (op.queue, False, s.max_deliveries, CONFIGURE_LEVELS)
    return (op.queue, s.stack, s.max_deliveries, s.priorities)


@dataclass(slots=True)
class OwnBuffers:
    """A node's own new operations, one :class:`OwnBuffer` per queue they are on; each
    queue's batch is built from its own buffer alone (queues are independent objects)."""

    queues: dict[QueueKey, OwnBuffer] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)  # all of them, in issue order
    patient: int = 0  # how many of them are blocking dequeues' attempts
    deletes: dict[str, Op] = field(default_factory=dict)  # by queue name (one each)
    # Creates and configures, by queue name (one each).
    creates: dict[str, Op] = field(default_factory=dict)
    peeks: dict[str, list[Op]] = field(default_factory=dict)  # by queue name, in order
    # Operations that go in the next batch (see the module doc).
    deferred: list[Op] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ops) + len(self.deferred)

    def add(self, op: Op) -> None:
        name, kind = op.queue, op.kind
        if (
            name in self.deletes
            or (name in self.peeks and kind is not OpKind.PEEK)
            or (kind in CREATE_KINDS and self._uses(name))
            or any(waiting.queue == name for waiting in self.deferred)
        ):
            self.deferred.append(op)
            return
        self.ops.append(op)
        if kind is OpKind.DELETE:
            self.deletes[name] = op
            return
        if kind in CREATE_KINDS:
            self.creates[name] = op
            return
        if kind is OpKind.PEEK:
            self.peeks.setdefault(name, []).append(op)
            return
        key = op.key
        buffer = self.queues.get(key)
        if buffer is None:
            buffer = self.queues[key] = OwnBuffer(Structure.STACK if key[1] else Structure.QUEUE)
        buffer.add(op)
        self.patient += op.patient

    def _uses(self, queue: str) -> bool:
        """An operation on ``queue`` is here already."""
        return queue in self.creates or any(name == queue for name, _ in self.queues)

    def next_buffer(self) -> OwnBuffers:
        """The buffer that follows this one when its batch goes: the deferred operations."""
        following = OwnBuffers()
        for op in self.deferred:
            following.add(op)
        return following

    def all_ops(self) -> list[Op]:
        """Every operation here, in issue order (the deferred ones came last)."""
        return [*self.ops, *self.deferred]

    @property
    def urgent(self) -> bool:
        """An operation here should not wait for the idle pace."""
        return len(self.ops) > self.patient or bool(self.deferred)

    def sections(self) -> tuple[Section, ...]:
        return tuple(sorted((key, buffer.batch()) for key, buffer in self.queues.items()))

    def deletions(self) -> Deletes:
        return tuple(sorted((name, 1) for name in self.deletes))

    def creations(self) -> Creates:
        return tuple(sorted((create_key(op), 1) for op in self.creates.values()))

    def peekings(self) -> Peeks:
        return tuple(sorted((name, len(ops)) for name, ops in self.peeks.items()))

    def assign(
        self,
        grants: tuple[SectionGrants, ...],
        refused: tuple[Refusal, ...] = (),
        deleted: tuple[Deletion, ...] = (),
        created: tuple[Creation, ...] = (),
        limits: tuple[Limit, ...] = (),
        peeked: tuple[Peeked, ...] = (),
    ) -> list[Assignment]:
        """The creates, each with what the anchor did; each queue's operations, with
        what the anchor gave that queue (and its delivery limit), or why it refused it;
        then the deletes, after every run of their queue; then the peeks, each with the
        head and its own rank, or why the anchor refused it."""
        out = [Assignment(self.creates[c[0][0]], -1, None, created=c) for c in created]
        limit_of = dict(limits)
        for key, runs in grants:
            assigned = self.queues[key].assign(runs)
            limit = limit_of.get(key, 0)
            if limit:
                assigned = [replace(a, limit=limit) for a in assigned]
            out.extend(assigned)
        for key, why in refused:
            out.extend(Assignment(op, -1, None, refused=why) for op in self.queues[key].ops)
        out.extend(
            Assignment(self.deletes[key[0]], g.ord_first, None, deleted=(key, g, found))
            for key, g, found in deleted
        )
        for (name, _), g, why in peeked:
            head = g.first if g.available else None
            out.extend(
                Assignment(op, -1 if why else g.ord_first + i, head, refused=why)
                for i, op in enumerate(self.peeks[name])
            )
        return out
