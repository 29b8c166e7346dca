"""What a correct peer can never send to a node in its state, for the four stages' messages
(SPEC §6, §7); membership messages go to :mod:`skueue.core.membership.checks`.

:func:`check` runs before the node changes anything: a message it refuses raises
:class:`RemoteProtocolError`, the sender's fault, and the node stays exactly as it was.
"""

from __future__ import annotations

from typing import NoReturn

from skueue.core.batch import combine_all
from skueue.core.batch_checks import batches_problem, grant_problem
from skueue.core.creates_deletes import creation_problem, deletion_problem
from skueue.core.dht_runs import Single, singles
from skueue.core.errors import RemoteProtocolError
from skueue.core.membership import update_phase as membership
from skueue.core.membership.state import in_interval
from skueue.core.messages.field_types import KeyOwner
from skueue.core.messages.membership import MembershipMessage
from skueue.core.messages.stages import (
    ANSWER_GET_REPLY,
    ANSWER_KINDS,
    ANSWER_PUT_ACK,
    RUN_ITEMS_MAX,
    RUN_KINDS,
    RUN_PUT,
    AnswerRun,
    BatchUp,
    DhtBundle,
    DhtMessage,
    DhtRun,
    Drop,
    DropAck,
    Get,
    GetReply,
    Grants,
    Hurry,
    Message,
    Put,
    PutAck,
)
from skueue.core.ops import REFUSALS, is_item
from skueue.core.parts.node_state import NodeState
from skueue.core.parts.ring import Mode
from skueue.core.peeks import peeked_problem
from skueue.dht.keys import POSITION_MAX, block_of, position_key
from skueue.overlay.routing import is_responsible


def refuse(node: NodeState, why: str) -> NoReturn:
    raise RemoteProtocolError(f"{node.me.describe()}: {why}")


def check(node: NodeState, message: Message | MembershipMessage) -> None:
    """Raise :class:`RemoteProtocolError` if ``message`` cannot come from a correct peer now."""
    if node.ring.mode is Mode.DEPARTED:
        refuse(node, f"has left; got {message.describe()}")
    match message:
        case BatchUp():
            _check_batch_up(node, message)
        case Grants():
            _check_grants(node, message)
        case Hurry():
            pass  # a hint only; a former parent may still send one while the tree changes
        case DhtBundle(messages=messages):
            _check_bundle(node, messages)
        case DhtRun() | AnswerRun():
            _check_bundle(node, (message,))
        case Put() | Get() | Drop():
            _check_dht(node, message)
        case GetReply(op_id=op_id, position=position, element=element, owner=owner):
            a = node.store.awaiting.get(op_id)
            if a is None or a.position != position:
                refuse(node, f"reply for op #{op_id} at {position}, which nobody awaits")
            if not is_item(element):
                refuse(node, "an element is bytes or text")
            _check_owner(node, message, (a.op.queue, position), owner)
        case PutAck(op_id=op_id, owner=owner):
            put_at = node.store.unacked_puts.get(op_id)
            if put_at is None:
                refuse(node, f"PutAck for op #{op_id}, which sent no Put")
            _check_owner(node, message, put_at, owner)
        case DropAck(op_id=op_id, position=position, owner=owner):
            clearing = node.store.dropping.get(op_id)
            if clearing is None or not clearing.covers(position):
                refuse(node, f"DropAck for op #{op_id} at {position}, which sent no such Drop")
            _check_owner(node, message, (clearing.queue, position), owner)
        case _:
            membership.check(node, message)


def _check_bundle(node: NodeState, messages: tuple[DhtMessage, ...]) -> None:
    """Every message of a bundle, each against the node as it is now, before any is
    applied.  That is the same as checking each after the ones before it were applied
    only because the checks depend on nothing those could change, except through a
    message repeated in the bundle: a Put to the same position and ticket, a Get for
    the same operation, an answer for the same operation.  No correct peer repeats
    one, so a repeat is refused here."""
    seen: set[tuple[object, ...]] = set()
    acks: dict[int, int] = {}  # DropAcks per delete in this bundle
    for m in _singles(node, messages):
        if isinstance(m, Put):
            key: tuple[object, ...] = ("put", m.queue[0], m.position, m.ticket)
        elif isinstance(m, Get):
            key = ("get", m.requester, m.op_id)
        elif isinstance(m, Drop | DropAck):
            key = (type(m).__name__, m.op_id, m.position)
        else:
            key = ("answer", m.op_id)
        if key in seen:
            refuse(node, f"{m.describe()} twice in one bundle")
        seen.add(key)
        check(node, m)
        if isinstance(m, DropAck):
            acks[m.op_id] = acks.get(m.op_id, 0) + 1
            if acks[m.op_id] > node.store.dropping[m.op_id].left:
                refuse(node, f"more DropAcks for op #{m.op_id} than Drops on their way")


def _singles(node: NodeState, messages: tuple[DhtMessage, ...]) -> list[Single]:
    """The single messages that ``messages`` stand for, runs opened (each refused first
    if its shape is wrong: then its items would be some other run's)."""
    out: list[Single] = []
    for m in messages:
        if isinstance(m, DhtRun | AnswerRun):
            problem = run_problem(m)
            if problem:
                refuse(node, f"{m.describe()}: {problem}")
            out.extend(singles(m))
        else:
            out.append(m)
    return out


def run_problem(m: DhtRun | AnswerRun) -> str | None:
    """What is wrong with a run's shape (its items are then checked one by one), or None."""
    n = len(m.op_ids)
    if not 2 <= n <= RUN_ITEMS_MAX:
        return f"a run of {n} items (2 to {RUN_ITEMS_MAX})"
    if isinstance(m, AnswerRun):
        if not 0 <= m.kind < ANSWER_KINDS:
            return f"no answer kind {m.kind}"
        if len(m.positions) != (0 if m.kind == ANSWER_PUT_ACK else n):
            return f"{len(m.positions)} positions for {n} answers"
        if len(m.elements) != (n if m.kind == ANSWER_GET_REPLY else 0):
            return f"{len(m.elements)} elements for {n} answers"
        return None
    if not 0 <= m.kind < RUN_KINDS:
        return f"no run kind {m.kind}"
    if len(m.tickets) != n:
        return f"{len(m.tickets)} tickets for {n} requests"
    if len(m.elements) != (n if m.kind == RUN_PUT else 0):
        return f"{len(m.elements)} elements for {n} requests"
    if m.ack and m.kind != RUN_PUT:
        return "acknowledgements asked for requests other than Puts"
    last = m.last()
    if not (1 <= m.first <= POSITION_MAX and 1 <= last <= POSITION_MAX):
        return f"positions {m.first}..{last} out of range"
    if block_of(m.first) != block_of(last):
        return f"positions {m.first}..{last} span more than one block"
    return None


def _check_owner(
    node: NodeState,
    m: GetReply | PutAck | DropAck,
    at: tuple[str, int],
    owner: KeyOwner | None,
) -> None:
    """The owner an answer names must own the key it answers for (queue and position
    ``at``): else it would send this node's next requests astray."""
    if owner is None:
        return
    named, until = owner
    if not in_interval(position_key(*at), named.label, until):
        refuse(node, f"{m.describe()}: names {named.describe()} owner of another key")


def _check_batch_up(node: NodeState, m: BatchUp) -> None:
    if (m.sender, m.number) in node.batching.withdrawn:
        return  # a batch taken back: dropped when it comes
    if m.sender not in node.ring.kids and m.sender not in node.ring.released:
        refuse(node, f"batch from {m.sender.describe()}, which is not a child")
    if m.sender in node.batching.child_batches:
        refuse(node, f"second batch from {m.sender.describe()}")
    if m.number < 0:
        refuse(node, f"batch number {m.number}")
    problem = batches_problem(m.batch)
    if problem:
        refuse(node, f"batch {m.batch.describe()} from {m.sender.describe()}: {problem}")


def _check_grants(node: NodeState, m: Grants) -> None:
    flight = node.batching.inflight
    if flight is None or flight.served:
        refuse(node, "grants without a batch in flight")
    if m.number != flight.number:
        refuse(node, f"grants for batch #{m.number}; #{flight.number} is in flight")
    if m.update and node.member.phase is not None:
        refuse(node, "update grants during an update phase")
    subs = [dict(b.sections) for _, b in flight.layout]
    keys = {key for sections in subs for key in sections}
    granted = [key for key, _ in m.grants]
    refused = [key for key, _ in m.refused]
    if sorted(granted + refused) != sorted(keys):  # each of the batch's queues once
        refuse(node, f"grants {m.describe()} for other queues than the batch's")
    if any(why not in REFUSALS for _, why in m.refused):
        refuse(node, f"grants {m.describe()}: no such refusal")
    for (name, stack), grants in m.grants:
        batches = [sections[(name, stack)] for sections in subs if (name, stack) in sections]
        runs = max(len(b.counts) for b in batches)
        if len(grants) != runs:
            refuse(node, f"{len(grants)} grants for a batch of {runs} runs in queue {name!r}")
        combined = combine_all(batches)
        for i, g in enumerate(grants):
            count = combined.counts[i]
            levels = combined.levels[i] if combined.levels else ()
            problem = grant_problem(g, i, count, stack, levels)
            if problem:
                refuse(node, f"grants {m.describe()}: queue {name!r}: {problem}")
    deleting = sorted({name for _, b in flight.layout for name, _ in b.deletes})
    if [name for (name, _), _, _ in m.deleted] != deleting:  # each deleted queue once, in order
        refuse(node, f"grants {m.describe()} delete other queues than the batch")
    for (name, stack), g, found in m.deleted:
        problem = deletion_problem(g, stack, found)
        if problem:
            refuse(node, f"grants {m.describe()}: deleting {name!r}: {problem}")
    creating = sorted({key for _, b in flight.layout for key, _ in b.creates})
    if [c[0] for c in m.created] != creating:  # each create key once, in order
        refuse(node, f"grants {m.describe()} create other queues than the batch")
    for creation in m.created:
        problem = creation_problem(creation)
        if problem:
            refuse(node, f"grants {m.describe()}: creating {creation[0][0]!r}: {problem}")
    limited = [key for key, _ in m.limits]
    if limited != sorted(set(limited)) or not set(limited) <= keys:
        refuse(node, f"grants {m.describe()}: delivery limits of queues not in the batch")
    peeking = sorted({name for _, b in flight.layout for name, _ in b.peeks})
    problem = peeked_problem(m.peeked, peeking)
    if problem:
        refuse(node, f"grants {m.describe()}: peeks: {problem}")


def _check_dht(node: NodeState, m: Put | Get | Drop) -> None:
    if node.ring.mode is not Mode.MEMBER:
        refuse(node, f"is not in the ring: {m.describe()}")
    if not 1 <= m.position <= POSITION_MAX or m.op_id < 0:
        refuse(node, f"{m.describe()}: position or op id out of range")
    name, stack = m.queue
    if m.ticket < 0 or (not stack and m.ticket != 0):
        refuse(node, f"{m.describe()}: ticket {m.ticket} for a queue")
    if isinstance(m, Get) and m.keep and stack:
        refuse(node, f"{m.describe()}: a peek's read at a stack")
    key = position_key(name, m.position)
    if m.route is not None and m.route.target != key:
        refuse(node, f"{m.describe()}: routed to another key")
    if not is_responsible(node.ring.view, key):
        return  # passed on; the node that stores it checks the rest
    if isinstance(m, Put):
        if not is_item(m.element):
            refuse(node, "an element is bytes or text")
        if node.store.has(name, m.position, m.ticket):
            refuse(node, f"{m.describe()}: position {m.position} is taken")
        return
    table = node.store.tables.get(name)
    waiting = [] if table is None else table.waiting.get(m.position, [])
    looking = [] if table is None else table.looking.get(m.position, [])
    me = (m.requester, m.op_id, isinstance(m, Drop))
    if any(w == me for _, w in waiting) or me in looking:
        refuse(node, f"{m.describe()}: waits here already")
