"""The state of Join, Leave and the update phase, shared by the modules that drive them."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skueue.core.messages.membership import (
    Departing,
    Entry,
    Integrate,
    IntegrateAck,
    JoinRequest,
    LeaveAnswer,
    MayILeave,
)
from skueue.core.ops import Element
from skueue.dht.keys import position_key
from skueue.overlay.labels import LABEL_SPACE, Kind, NodeRef

if TYPE_CHECKING:
    from skueue.core.node.virtual_node import VirtualNode


# A joiner repeats its request this often (in ticks) until a responsible node accepts:
# a request routed through a node that leaves meanwhile is lost with it.
JOIN_RETRY_TICKS = 64

QUIET, JOINS, LEAVES, OVER = 1, 2, 3, 4

# Handovers (a leaver's entries to its predecessor, a joiner's from its responsible node)
# go in messages of at most this many bytes; drivers pass their own limit in.
HANDOVER_BYTES_MAX = 4 * 1024 * 1024
# What a handover message needs besides its entries (kind, nodes, counters), and what
# one entry needs besides its element (position, ticket, framing), both generously.
HANDOVER_OVERHEAD_BYTES = 1024
ENTRY_OVERHEAD_BYTES = 32
NODE_BYTES_MAX = 300  # a node reference: a process id of up to 256 bytes and its kind
PARTS_MAX = 1 << 24
# Messages that may find their receiver gone, harmlessly: a join request is repeated by
# its joiner, and a leaver that asked a departed predecessor hears from the next one.
LOSSY_WHEN_DEPARTED = (JoinRequest, MayILeave, LeaveAnswer)


@dataclass(slots=True)
class JoinTicket:
    """A joining process's progress, shared by its three nodes (one process, one memory).

    A process joins as a whole: its left node reports the join (3 nodes) in a relayed
    batch once all three are placed, and the anchor counting it is what commits every
    responsible node to integrate its node in the next phase.  Integrating only some of
    a process's nodes would leave virtual edges into nodes outside the ring.
    """

    responsible: dict[Kind, NodeRef] = field(default_factory=dict)
    reported: bool = False
    counted: bool = False


@dataclass(slots=True, eq=False)
class LeaveTicket:
    """A leaving process's progress, shared by its three nodes.

    Like a join, a leave is the whole process's: its left node reports it (3 nodes) in its
    next batch, after the operations it still had, and the anchor counting that batch
    lets all three nodes go in the next phase, together.
    """

    nodes: list[VirtualNode] = field(repr=False)
    reported: bool = False
    counted: bool = False

    def goes_now(self) -> bool:
        """Counted, and no node of the process places joiners that are not counted yet
        (they would lose their responsible node): then it waits for a later phase."""
        return self.counted and not any(n.joiners for n in self.nodes)


class Mode(enum.Enum):
    JOINING = "joining"  # placed (or not yet) at a responsible node, not in the ring
    MEMBER = "member"
    DEPARTED = "departed"


@dataclass(slots=True)
class UpdatePhase:
    old_parent: NodeRef | None
    old_children: tuple[NodeRef, ...]
    stage: int = QUIET
    heard: set[NodeRef] = field(default_factory=set)  # old children done with ``stage``
    reported: bool = False  # StageDone for ``stage`` sent (or, at the root, acted on)
    duty_done: bool = False  # stages 2 and 3: this node's own part is finished
    acks: set[NodeRef] = field(default_factory=set)  # stage 2: acknowledgements awaited
    asked: NodeRef | None = None  # stage 3: the predecessor we asked whether we may go
    asked_all: set[NodeRef] = field(default_factory=set)  # ... and every one asked before
    granted: set[NodeRef] = field(default_factory=set)  # stage 3: leavers we let go
    absorber: NodeRef | None = None  # stage 3: who took our part
    absorbing: dict[NodeRef, NodeRef] = field(default_factory=dict)  # new succ -> leaver
    # A node integrated in this phase that took over joiners: its IntegrateAck waits
    # until each of them confirmed its new responsible node.
    moves_unconfirmed: set[NodeRef] = field(default_factory=set)
    integrate_ack: IntegrateAck | None = None
    integrated_by: NodeRef | None = None

    def describe(self) -> str:
        waiting = len(set(self.old_children) - self.heard)
        return (
            f"stage {self.stage}, {waiting} old children pending, duty "
            f"{'done' if self.duty_done else 'open'}, {len(self.acks)} acks pending"
        )


def cyclic_distance(origin: int, label: int) -> int:
    return (label - origin) % LABEL_SPACE


def keys_in(lo: int, hi: int) -> Callable[[int], bool]:
    """Whether a position's DHT key lies in ``[lo, hi)`` on the cycle."""
    return lambda position: in_interval(position_key(position), lo, hi)


def in_interval(key: int, lo: int, hi: int) -> bool:
    """``lo <= key < hi`` on the cycle."""
    return cyclic_distance(lo, key) < cyclic_distance(lo, hi) if lo != hi else True


def element_bytes(element: Element) -> int:
    return len(element) if isinstance(element, bytes) else len(element.encode())


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
        size = element_bytes(entry[2]) + ENTRY_OVERHEAD_BYTES
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


@dataclass(slots=True)
class Incoming:
    """Handovers that arrive in pieces, per sender: the pieces so far and the final
    message (Departing or Integrate) once it came.  Pieces and final message may arrive
    in any order; the handover is taken over when all are here."""

    parts: dict[NodeRef, dict[int, tuple[Entry, ...]]] = field(default_factory=dict)
    finals: dict[NodeRef, Departing | Integrate] = field(default_factory=dict)

    def complete(self, sender: NodeRef, final: Departing | Integrate) -> bool:
        return len(self.parts.get(sender, {})) == final.parts

    def take(self, sender: NodeRef, final: Departing | Integrate) -> list[Entry]:
        """All entries of a complete handover; forgets it."""
        parts = self.parts.pop(sender, {})
        self.finals.pop(sender, None)
        return [e for i in sorted(parts) for e in parts[i]] + list(final.entries)
