"""Client operations as the core sees them."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache

# Elements are opaque to the protocol: bytes from real clients, str in simulations.
Element = bytes | str


@dataclass(frozen=True, slots=True)
class Redelivered:
    """An element that was handed out with a lease and came back (issue 12: nack, an
    expired lease, or its consumer's connection closing): it goes in again at the tail
    as a new insertion, carrying how often it was delivered and why it last came back,
    so that its next consumer is told, and the delivery limit can send it to its queue's
    dead letters.  Elements never leased are plain ``Element`` values, so the common
    path carries nothing more."""

    value: Element
    deliveries: int  # times it was handed out with a lease so far (>= 1)
    reason: str  # why it came back the last time (a RETURN_REASONS key)


Item = Element | Redelivered
"""What a queue holds: a plain element, or one that came back from a lease."""


def plain(item: Item) -> Element:
    """The element itself, whatever came with it."""
    return item.value if type(item) is Redelivered else item  # type: ignore[return-value]


def is_item(x: object) -> bool:
    """What a peer may send as an element (the core's checks)."""
    if type(x) is Redelivered:
        return isinstance(x.value, bytes | str) and x.reason in RETURN_REASONS
    return isinstance(x, bytes | str)


def plain_or_none(item: Item | None) -> Element | None:
    return None if item is None else plain(item)


RETURN_REASONS = {
    "nack": "its consumer returned it (nack)",
    "expired": "its lease expired",
    "closed": "its consumer's connection closed",
    "restart": "the daemon holding its lease restarted",
    "leave": "the daemon holding its lease left the cluster",
}
"""Why a leased element came back, as :class:`Redelivered` and the dead letters say."""


class Structure(enum.Enum):
    QUEUE = "queue"
    STACK = "stack"


class OpKind(enum.Enum):
    ENQUEUE = "enqueue"
    DEQUEUE = "dequeue"
    PUSH = "push"
    POP = "pop"
    # Removes every element the queue holds and retires its name (issue 12): see
    # :meth:`skueue.core.anchor.QueueAnchors.delete`.  It names a queue of either kind.
    DELETE = "delete"
    # Makes a queue with its settings (``Op.settings``), or finds it made already:
    # :meth:`skueue.core.anchor.QueueAnchors.create`.
    CREATE = "create"
    # Changes the settings of a queue that exists which can change while it holds
    # elements (the delivery limit, ``Op.settings.max_deliveries``); it travels and is
    # ordered like a create (:meth:`skueue.core.anchor.QueueAnchors.create`).
    CONFIGURE = "configure"
    # The element a dequeue would return now, left in the queue (issue 14): see
    # :mod:`skueue.core.peeks`.  Queues only.
    PEEK = "peek"

    @property
    def inserts(self) -> bool:
        """Enqueue and Push insert; they fill the odd runs of a batch."""
        return self in (OpKind.ENQUEUE, OpKind.PUSH)

    @property
    def structure(self) -> Structure:
        return Structure.STACK if self in (OpKind.PUSH, OpKind.POP) else Structure.QUEUE


def insert_kind(structure: Structure) -> OpKind:
    return OpKind.ENQUEUE if structure is Structure.QUEUE else OpKind.PUSH


def remove_kind(structure: Structure) -> OpKind:
    return OpKind.DEQUEUE if structure is Structure.QUEUE else OpKind.POP


DEFAULT_QUEUE = "default"
"""The queue of every operation that names none (the CLI's and the API's default)."""
QUEUE_NAME_CHARS_MAX = 128
QUEUES_MAX = 10_000
"""Queues one cluster holds at once (each costs the anchor a few counters, and a batch
carries a section per queue with operations in the cycle)."""
QUEUE_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:")


STACK_KINDS = frozenset({OpKind.PUSH, OpKind.POP})

DELIVERY_LIMIT_MAX = 1000
"""The largest delivery limit, of a queue or of one leased remove."""
PRIORITIES_MAX = 16
"""The most priority levels a queue may have (issue 14; skueue/core/levels.py)."""


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """What a queue is made with, explicitly (``OpKind.CREATE``) or by its first
    operation (then a queue or stack of its kind, without a delivery limit).  The
    structure and the levels are fixed while the queue lives; the delivery limit may
    change (``OpKind.CONFIGURE``)."""

    stack: bool = False
    # A leased element returned more often than this goes to the queue's dead letters
    # (0: never), whatever limit its consumer asked for, if that was larger or none.
    max_deliveries: int = 0
    # Priority levels, 0 the most urgent (skueue/core/levels.py); 1: none.  Queues only.
    priorities: int = 1

    def describe(self) -> str:
        limit = f" with a delivery limit of {self.max_deliveries}" if self.max_deliveries else ""
        levels = f" and {self.priorities} priority levels" if self.priorities > 1 else ""
        kind = "a stack" if self.stack else "a queue"
        return kind + (limit or " without a delivery limit") + levels


def settings_problem(queue: str, settings: QueueSettings) -> str | None:
    """Why ``queue`` cannot have ``settings``, or None."""
    if not 0 <= settings.max_deliveries <= DELIVERY_LIMIT_MAX:
        return f"a delivery limit is 0 (none) to {DELIVERY_LIMIT_MAX}"
    if not 1 <= settings.priorities <= PRIORITIES_MAX:
        return f"a queue has 1 (no priorities) to {PRIORITIES_MAX} priority levels"
    if settings.stack and settings.priorities > 1:
        return "a stack has no priority levels"
    if settings.max_deliveries:
        return dead_letter_problem(queue)
    return None


DEAD_LETTER_SUFFIX = ".dlq"


def dead_letter_queue(queue: str) -> str:
    """Where ``queue``'s elements go once returned more often than their delivery limit:
    another named queue, always FIFO (``orders.dlq`` for ``orders``)."""
    return queue + DEAD_LETTER_SUFFIX


def dead_letter_problem(queue: str) -> str | None:
    """Why ``queue`` (a good name) cannot have dead letters, or None."""
    if len(dead_letter_queue(queue)) > QUEUE_NAME_CHARS_MAX:
        longest = QUEUE_NAME_CHARS_MAX - len(DEAD_LETTER_SUFFIX)
        return f"a queue with dead letters has at most {longest} characters"
    return None


@lru_cache(maxsize=4096)
def _good_name(name: str) -> bool:
    return queue_name_problem(name) is None


def queue_name_ok(name: object) -> bool:
    """``queue_name_problem(name) is None``, remembered for the names in use (the
    intake checks every operation's)."""
    return type(name) is str and _good_name(name)


def queue_name_problem(name: object) -> str | None:
    """What is wrong with a queue name, or None: 1 to ``QUEUE_NAME_CHARS_MAX`` characters
    from ASCII letters, digits and ``. _ - :`` (safe in a shell, a file name, a metric
    label and a URL without quoting)."""
    if type(name) is not str:
        return f"a queue name is text, not {type(name).__name__}"
    if not 1 <= len(name) <= QUEUE_NAME_CHARS_MAX:
        return f"a queue name has 1 to {QUEUE_NAME_CHARS_MAX} characters, not {len(name)}"
    bad = sorted(set(name) - QUEUE_NAME_CHARS)
    if bad:
        return (
            f"queue name {name[:40]!r} has {''.join(bad)[:10]!r}: only ASCII letters, digits "
            "and . _ - : are allowed"
        )
    return None


# Why the anchor refused a queue's operations of one cycle (Grants.refused); 0 is none.
REFUSED_OTHER_STRUCTURE = 1
REFUSED_TOO_MANY_QUEUES = 2
REFUSALS = (REFUSED_OTHER_STRUCTURE, REFUSED_TOO_MANY_QUEUES)

# What a create found (Grants.created): it made the queue, found it made with the same
# settings, found it made with others, or found the cluster full of queues.  A configure
# finds its queue (CREATE_FOUND, the settings as it left them) or no queue.
CREATE_MADE = 0
CREATE_FOUND = 1
CREATE_FOUND_OTHER = 2
CREATE_FULL = 3
CREATE_NO_QUEUE = 4
CREATE_OUTCOMES = 5  # how many there are (the wire's range)
CONFIGURE_LEVELS = 0
"""The priority levels in a configure's key (``batch.CreateKey``): no queue has 0 levels,
so a batch tells a configure from a create by it, and the queue keeps the levels it has."""


def no_queue_text(queue: str, kind: OpKind) -> str:
    """What a client is told about a delete or a configure of a name that holds no queue."""
    return f"no queue {queue!r} to {kind.value}: no queue or stack has that name"


def refusal_text(code: int, queue: str, kind: OpKind) -> str:
    """What a client is told about an operation the anchor refused."""
    if code == REFUSED_OTHER_STRUCTURE:
        other = "queue" if kind.structure is Structure.STACK else "stack"
        return f"{queue!r} is a {other}: {kind.value} is not an operation of a {other}"
    return f"the cluster holds {QUEUES_MAX} queues already: {queue!r} is not made"


@dataclass(frozen=True, slots=True)
class Op:
    """One client request.  ``op_id`` is unique within its process and increases in issue order."""

    op_id: int
    kind: OpKind
    value: Item | None = None
    queue: str = DEFAULT_QUEUE
    # A blocking dequeue's attempt: it rides the tree's cycles as they come and never
    # hurries them (an idle tree turns at the driver's idle pace), so consumers that
    # wait on an empty queue cost no more than an idle cluster.
    patient: bool = False
    # A remove with a lease (issue 12): the element it takes is held for its consumer for
    # this long, until acked or returned (``skueue.core.leases``); 0: removed for good.
    lease_ms: int = 0
    # Returned more often than this, a leased element goes to the dead letters; 0: never.
    max_deliveries: int = 0
    # A create's: the queue's settings.
    settings: QueueSettings | None = None
    # An enqueue's priority level, 0 the most urgent (skueue/core/levels.py: one above
    # the queue's last level counts as its last; a queue without levels ignores it).
    priority: int = 0

    @property
    def key(self) -> tuple[str, bool]:
        """The queue this operation is on: its name, and True for a stack."""
        return (self.queue, self.kind in STACK_KINDS)

    def describe(self) -> str:
        arg = "" if self.value is None else f" {self.value!r}"
        where = "" if self.queue == DEFAULT_QUEUE else f" on {self.queue}"
        return f"#{self.op_id} {self.kind.value}{arg}{where}"
