"""One frozen dataclass per message kind (never subclassed); the wire derives its codec from them.

Messages are addressed by the driver (``Send.to``); a message carries its sender only
where the receiver needs it.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated

from skueue.core.batch import Batches, RunGrant
from skueue.core.messages.field_types import (
    DEFAULT_QUEUE_REF,
    CreateKey,
    DeliveryLimit,
    Items,
    KeyOwner,
    Position,
    PriorityLevels,
    QueueRef,
    Range,
)
from skueue.core.ops import CREATE_OUTCOMES, DELIVERY_LIMIT_MAX, Item
from skueue.dht.keys import POSITIONS_PER_BLOCK
from skueue.overlay.labels import NodeRef
from skueue.overlay.routing import Route


@dataclass(frozen=True, slots=True)
class BatchUp:
    """Stage 1: a child's batch, sent to its parent in the aggregation tree."""

    sender: NodeRef  # the child; the parent files the batch under it
    batch: Batches
    # The sender's batch counter: lets a parent drop a batch that a joining child took
    # back when it was integrated (the batch may still be on its way then).
    number: int = 0

    def describe(self) -> str:
        return f"BatchUp #{self.number} from {self.sender.describe()} {self.batch.describe()}"


@dataclass(frozen=True, slots=True)
class Grants:
    """Stage 3: the position grants for the batches a child sent up: per queue, in the
    batches' order, one per run."""

    grants: tuple[tuple[QueueRef, tuple[RunGrant, ...]], ...]
    # The anchor starts an update phase with these grants (SPEC §8): no new batches
    # until "update over".
    update: bool = False
    # The number of the batch these grants answer (``BatchUp.number``): grants for any
    # other batch of the receiver are stale or forged, and refused.
    number: int = 0
    # The queues of the batch whose operations the anchor refused, with why
    # (``skueue.core.ops.REFUSALS``); their operations complete with an error.
    refused: tuple[tuple[QueueRef, Annotated[int, Range(1, 3)]], ...] = ()
    # The queues the batch's deletes retired, with the range each removed (for the
    # receiver's first delete of it), their ranks, and whether a queue had the name
    # (``skueue.core.creates_deletes.Deletion``).
    deleted: tuple[tuple[QueueRef, RunGrant, bool], ...] = ()
    # What the batch's creates and configures found (``creates_deletes.Creation``): the
    # outcome (``ops.CREATE_*``) and the queue's settings as they are.
    created: tuple[
        tuple[
            CreateKey, Annotated[int, Range(0, CREATE_OUTCOMES)], bool, DeliveryLimit,
            PriorityLevels,
        ], ...
    ] = ()  # fmt: skip
    # The delivery limits of the batch's queues that have one.
    limits: tuple[tuple[QueueRef, Annotated[int, Range(1, DELIVERY_LIMIT_MAX + 1)]], ...] = ()
    # What the batch's peeks saw (``skueue.core.peeks.Peeked``): per queue, the head's
    # position and the first peek's rank, or why they were refused.
    peeked: tuple[tuple[QueueRef, RunGrant, Annotated[int, Range(0, 3)]], ...] = ()

    def describe(self) -> str:
        flags = " update" if self.update else ""
        runs = " ".join(
            f"{name}:" + "".join(g.describe() for g in grants) for (name, _), grants in self.grants
        )
        refused = "".join(f" {name}:refused{why}" for (name, _), why in self.refused)
        deleted = "".join(
            f" {name}:deleted{g.describe() if found else '[no queue]'}"
            for (name, _), g, found in self.deleted
        )
        created = "".join(f" created{c!r:.60}" for c in self.created)
        limits = "".join(f" {key!r:.40}:limit{n!r}" for key, n in self.limits)
        peeked = "".join(f" peeked{p!r:.60}" for p in self.peeked)
        return f"Grants #{self.number} {runs}{refused}{deleted}{created}{limits}{peeked}{flags}"


@dataclass(frozen=True, slots=True)
class Hurry:
    """A pacing hint, not a stage: operations wait in the sender's process, and the
    sender, a neighbour in the aggregation tree (a parent waiting for this node's batch,
    or a child waiting for its grants), asks this node to send its next batch at once
    rather than at a driver's idle pace.  It changes nothing but the receiver's urgency
    (:meth:`skueue.core.process.Process.tick_due`): until it fires, when its parent
    asked; until its own grants come back, when a child asked (so the hint climbs)."""

    sender: NodeRef

    def describe(self) -> str:
        return f"Hurry from {self.sender.describe()}"


@dataclass(frozen=True, slots=True)
class Put:
    """Stage 4: store ``element`` at ``position`` (routed hop by hop to pred(key))."""

    route: Route | None  # None: not started; the receiver starts routing (a joiner's relay)
    position: Position
    element: Item
    ticket: int  # stack ticket; 0 for the queue
    requester: NodeRef  # where a PutAck goes when ``ack`` is set
    op_id: int
    # Whether a PutAck is wanted: the stack's stage 4 waits for its Puts to land, and an
    # update phase waits until no Put is on its way anywhere.
    ack: bool
    queue: QueueRef = DEFAULT_QUEUE_REF  # whose position it is (keys hash name and position)

    def describe(self) -> str:
        return f"Put {self.queue[0]} pos={self.position} t={self.ticket} op=#{self.op_id}"


@dataclass(frozen=True, slots=True)
class Get:
    """Stage 4: remove and return the element at ``position`` (waits for its Put)."""

    route: Route | None  # None: not started; the receiver starts routing
    position: Position
    ticket: int  # stack: take the largest ticket <= this; queue: 0
    requester: NodeRef
    op_id: int
    queue: QueueRef = DEFAULT_QUEUE_REF  # whose position it is
    # A peek's read (skueue/core/peeks.py): return the element and leave it stored.
    keep: bool = False

    def describe(self) -> str:
        what = "Look" if self.keep else "Get"
        return f"{what} {self.queue[0]} pos={self.position} t={self.ticket} op=#{self.op_id}"


@dataclass(frozen=True, slots=True)
class Drop:
    """Clearing a deleted queue: remove the element at ``position`` like a Get (waiting
    for its Put if need be), and answer with a :class:`DropAck` instead of the element."""

    route: Route | None  # None: not started; the receiver starts routing
    position: Position
    ticket: int  # as a Get's
    requester: NodeRef
    op_id: int  # the delete's; all its Drops share it
    queue: QueueRef = DEFAULT_QUEUE_REF

    def describe(self) -> str:
        return f"Drop {self.queue[0]} pos={self.position} t={self.ticket} op=#{self.op_id}"


@dataclass(frozen=True, slots=True)
class DropAck:
    """A Drop removed its element (the deleting node counts them down: an update phase
    waits until none is on its way, as for Gets)."""

    op_id: int
    position: Position
    owner: KeyOwner | None = None  # as in GetReply

    def describe(self) -> str:
        return f"DropAck op=#{self.op_id} pos={self.position}"


@dataclass(frozen=True, slots=True)
class GetReply:
    """The element a Get removed, sent straight back to the requesting node."""

    op_id: int
    position: Position
    element: Item
    # The node that stored the element and its interval: the requester sends its next
    # request for a key there in one hop (a shortcut only, see parts/key_owners.py).
    owner: KeyOwner | None = None

    def describe(self) -> str:
        return f"GetReply op=#{self.op_id} pos={self.position}"


@dataclass(frozen=True, slots=True)
class PutAck:
    """A Put landed (every node waits for its Puts' acknowledgements before an update
    phase moves data)."""

    op_id: int
    owner: KeyOwner | None = None  # as in GetReply

    def describe(self) -> str:
        return f"PutAck op=#{self.op_id}"


# What a run carries (DhtRun.kind), and what each item of it stands for.
RUN_PUT, RUN_GET, RUN_LOOK, RUN_DROP = range(4)
RUN_KINDS = 4
# The most requests one run carries: a run stays inside one block of positions.
RUN_ITEMS_MAX = POSITIONS_PER_BLOCK


@dataclass(frozen=True, slots=True)
class DhtRun:
    """Stage 4 for consecutive positions at once: the Puts, Gets, Looks or Drops that one
    node sends in one step for a run of consecutive positions of one queue inside one
    block (issue 30).  A block's positions share one key, so they share the owner and
    the route, and travel as one message that names the queue, the route and the
    requester once.  Item ``i`` is the request for position ``first + i`` (``first - i``
    when ``descending``: a stack's Pops take the highest positions first).  The receiver
    handles it exactly as the single requests (:meth:`requests`); built by
    :mod:`skueue.core.dht_runs`, checked whole before any of it is applied."""

    kind: Annotated[int, Range(0, RUN_KINDS)]  # RUN_PUT, RUN_GET, RUN_LOOK or RUN_DROP
    route: Route | None  # as each request's: None, not started
    queue: QueueRef
    first: Position
    descending: bool
    requester: NodeRef
    ack: bool  # Puts: whether PutAcks are wanted; False for the other kinds
    op_ids: Annotated[tuple[int, ...], Items(2, RUN_ITEMS_MAX)]
    tickets: Annotated[tuple[int, ...], Items(2, RUN_ITEMS_MAX)]  # one per item
    elements: Annotated[tuple[Item, ...], Items(0, RUN_ITEMS_MAX)]  # Puts: one per item

    def position(self, i: int) -> int:
        return self.first - i if self.descending else self.first + i

    def last(self) -> int:
        return self.position(len(self.op_ids) - 1)

    def requests(self) -> list[Put | Get | Drop]:
        """The single requests this run stands for, in its order (checked shape only:
        :func:`skueue.core.node.checks.run_problem` first)."""
        kind, route, queue, me = self.kind, self.route, self.queue, self.requester
        out: list[Put | Get | Drop] = []
        for i, (op_id, ticket) in enumerate(zip(self.op_ids, self.tickets, strict=True)):
            p = self.position(i)
            if kind == RUN_PUT:
                out.append(Put(route, p, self.elements[i], ticket, me, op_id, self.ack, queue))
            elif kind == RUN_DROP:
                out.append(Drop(route, p, ticket, me, op_id, queue))
            else:
                out.append(Get(route, p, ticket, me, op_id, queue, keep=kind == RUN_LOOK))
        return out

    def describe(self) -> str:
        # Safe on any fields: a refused run is described before its shape is known good.
        names = ("PutRun", "GetRun", "LookRun", "DropRun")
        what = names[self.kind] if 0 <= self.kind < RUN_KINDS else f"Run?{self.kind}"
        return f"{what} {self.queue[0]} pos={self.first}.. x{len(self.op_ids)}"


# What an answer run carries (AnswerRun.kind).
ANSWER_PUT_ACK, ANSWER_GET_REPLY, ANSWER_DROP_ACK = range(3)
ANSWER_KINDS = 3


@dataclass(frozen=True, slots=True)
class AnswerRun:
    """Several answers of one owner to one requesting node from one step: PutAcks,
    GetReplies or DropAcks, the owner named once (a run of requests is answered by one).
    Item ``i`` answers ``op_ids[i]`` at ``positions[i]`` (none for PutAcks) with
    ``elements[i]`` (GetReplies only).  Handled as the single answers (:meth:`answers`)."""

    kind: Annotated[int, Range(0, ANSWER_KINDS)]  # ANSWER_PUT_ACK, _GET_REPLY, _DROP_ACK
    owner: KeyOwner | None
    op_ids: Annotated[tuple[int, ...], Items(2, RUN_ITEMS_MAX)]
    positions: Annotated[tuple[Position, ...], Items(0, RUN_ITEMS_MAX)]
    elements: Annotated[tuple[Item, ...], Items(0, RUN_ITEMS_MAX)]

    def answers(self) -> list[PutAck | GetReply | DropAck]:
        """The single answers (checked shape only: ``run_problem`` first)."""
        owner = self.owner
        if self.kind == ANSWER_PUT_ACK:
            return [PutAck(op_id, owner) for op_id in self.op_ids]
        if self.kind == ANSWER_DROP_ACK:
            return [DropAck(o, p, owner) for o, p in zip(self.op_ids, self.positions, strict=True)]
        return [
            GetReply(o, p, e, owner)
            for o, p, e in zip(self.op_ids, self.positions, self.elements, strict=True)
        ]

    def describe(self) -> str:
        names = ("PutAcks", "GetReplies", "DropAcks")
        what = names[self.kind] if 0 <= self.kind < ANSWER_KINDS else f"Answers?{self.kind}"
        return f"{what} x{len(self.op_ids)}"


DhtMessage = Put | Get | GetReply | PutAck | Drop | DropAck | DhtRun | AnswerRun

# The most DHT messages one bundle carries; a sender starts another bundle past it.
DHT_BUNDLE_ITEMS_MAX = 4096


@dataclass(frozen=True, slots=True)
class DhtBundle:
    """Several DHT messages for one node from one step of its sender, in the order they
    were made: the receiver handles them as if they had come one by one.  A batch's
    operations each make a Put or a Get, and their answers come back one per operation;
    bundled, a cycle costs one message per destination instead of one per operation.
    (Built by :mod:`skueue.core.dht_bundles`; checked whole before any of it is
    applied.)"""

    messages: Annotated[tuple[DhtMessage, ...], Items(2, DHT_BUNDLE_ITEMS_MAX)]

    def describe(self) -> str:
        return f"DhtBundle of {len(self.messages)}: " + ", ".join(
            m.describe() for m in self.messages[:3]
        ) + (" ..." if len(self.messages) > 3 else "")


Message = (
    BatchUp | Grants | Hurry | Put | Get | GetReply | PutAck | DhtBundle | Drop | DropAck
    | DhtRun | AnswerRun
)

# The kinds, derived from the union above (written once).
MESSAGE_KINDS: dict[str, type[Message]] = {cls.__name__: cls for cls in typing.get_args(Message)}
