"""Limits and helpers shared by Join, Leave and the update phase: handover sizing and
intervals on the cycle.

The state these protocols act on is a node part
(:mod:`skueue.core.parts.membership_state`, :mod:`skueue.core.parts.ring`)."""

from __future__ import annotations

from collections.abc import Callable

from skueue.core.messages.membership import (
    Entry,
    JoinRequest,
    LeaveAnswer,
    MayILeave,
)
from skueue.core.messages.stages import Hurry
from skueue.core.ops import Item, Redelivered
from skueue.dht.keys import position_key
from skueue.overlay.labels import LABEL_SPACE

# A joiner repeats its request this often (in ticks) until a responsible node accepts:
# a request routed through a node that leaves meanwhile is lost with it.
JOIN_RETRY_TICKS = 64

# What a handover message needs besides its entries (kind, nodes, counters), and what
# one entry needs besides its element (position, ticket, framing), both generously.
HANDOVER_OVERHEAD_BYTES = 1024
ENTRY_OVERHEAD_BYTES = 32
NODE_BYTES_MAX = 300  # a node reference: a process id of up to 256 bytes and its kind
# Messages that may find their receiver gone, harmlessly: a join request is repeated by
# its joiner, a leaver that asked a departed predecessor hears from the next one, and a
# Hurry is only a hint (its sender may not know yet that this child left).
LOSSY_WHEN_DEPARTED = (JoinRequest, MayILeave, LeaveAnswer, Hurry)


def cyclic_distance(origin: int, label: int) -> int:
    return (label - origin) % LABEL_SPACE


def keys_in(lo: int, hi: int) -> Callable[[str, int], bool]:
    """Whether a queue position's DHT key lies in ``[lo, hi)`` on the cycle."""
    return lambda queue, position: in_interval(position_key(queue, position), lo, hi)


def in_interval(key: int, lo: int, hi: int) -> bool:
    """``lo <= key < hi`` on the cycle."""
    return cyclic_distance(lo, key) < cyclic_distance(lo, hi) if lo != hi else True


def element_bytes(element: Item) -> int:
    if type(element) is Redelivered:  # its count and reason: a few bytes more
        return element_bytes(element.value) + 16
    return len(element) if isinstance(element, bytes) else len(element.encode())  # type: ignore[union-attr]


def split_entries(
    entries: list[Entry], bytes_max: int, final_extra: int = 0
) -> list[tuple[Entry, ...]]:
    """Cut a handover into pieces of at most ``bytes_max`` bytes each on the wire; the
    last piece rides in the final message, which also carries ``final_extra`` bytes of
    node references.  An entry larger than a piece on its own goes alone."""
    budget = bytes_max - HANDOVER_OVERHEAD_BYTES
    pieces: list[tuple[Entry, ...]] = []
    piece: list[Entry] = []
    used = 0
    for entry in entries:
        size = element_bytes(entry[3]) + len(entry[0]) + ENTRY_OVERHEAD_BYTES
        if piece and used + size > budget:
            pieces.append(tuple(piece))
            piece, used = [], 0
        piece.append(entry)
        used += size
    if piece and used + final_extra > budget:
        pieces.append(tuple(piece))
        piece = []
    pieces.append(tuple(piece))
    return pieces

