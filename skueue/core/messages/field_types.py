"""What a message field may hold, declared with the field itself.

A message class is the one declaration of its kind: the peer codec
(:mod:`skueue.wire.peer`) reads each field's annotation and derives the encoding and the
checks from it.  Plain ``int`` fields hold a non-negative integer below 2**63; a field
with another range, or a sequence with an item limit, says so through
``typing.Annotated`` with the markers below.  They are plain data: the core never acts
on them, a wire does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from skueue.core.ops import DEFAULT_QUEUE, DELIVERY_LIMIT_MAX, PRIORITIES_MAX, Item
from skueue.overlay.labels import LABEL_SPACE, NodeRef

INT_MAX = 1 << 63  # msgpack's integers stop at 2**64; ours at 2**63, like the DHT keys
PARTS_MAX = 1 << 24  # pieces of one hand-over (membership/handover splitting)
ENTRIES_MAX = 1 << 24  # DHT entries in one hand-over piece


@dataclass(frozen=True, slots=True)
class Range:
    """The integers a field may hold: ``low <= value < high``."""

    low: int = 0
    high: int = INT_MAX


@dataclass(frozen=True, slots=True)
class Items:
    """How many items a sequence field may hold: ``least <= len <= most``."""

    least: int = 0
    most: int = INT_MAX


@dataclass(frozen=True, slots=True)
class QueueNameRule:
    """A text field that holds a queue name (:func:`skueue.core.ops.queue_name_problem`)."""


Position = Annotated[int, Range(1)]  # queue and stack positions start at 1
QueueName = Annotated[str, QueueNameRule()]
QueueRef = tuple[QueueName, bool]  # a queue: its name, and True for a stack
DEFAULT_QUEUE_REF: QueueRef = (DEFAULT_QUEUE, False)
# One queue's anchor counters in a hand-over: name, stack, (first, last, ord) for a
# queue, (last, ticket, ord, base) for a stack, (ord, first_0, last_0, ...) for a queue
# with priority levels.
Counters = Annotated[tuple[int, ...], Items(3, 1 + 2 * PRIORITIES_MAX)]
QueueCounters = tuple[QueueName, bool, Counters]
DeliveryLimit = Annotated[int, Range(0, DELIVERY_LIMIT_MAX + 1)]  # 0: none
PriorityLevels = Annotated[int, Range(1, PRIORITIES_MAX + 1)]
# A create's queue and settings (skueue.core.batch.CreateKey): name, stack, limit, levels
# (0 levels: a configure's key).
CreateKey = tuple[QueueName, bool, DeliveryLimit, Annotated[int, Range(0, PRIORITIES_MAX + 1)]]
Generation = Annotated[int, Range(-1)]  # a batch number, or -1 for "none yet"
PartCount = Annotated[int, Range(0, PARTS_MAX + 1)]
PartIndex = Annotated[int, Range(0, PARTS_MAX)]
Label = Annotated[int, Range(0, LABEL_SPACE)]  # a point on the cycle
# The node that stores a key and where its interval ends: ``[node.label, end)``.
KeyOwner = tuple[NodeRef, Label]
# One DHT entry on the move: (queue name, position, ticket, element).
Entry = tuple[QueueName, Position, int, Item]
Entries = Annotated[tuple[Entry, ...], Items(most=ENTRIES_MAX)]
