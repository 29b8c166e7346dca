"""Messages of Join, Leave and the update phase (SPEC §8): one frozen dataclass each.

See :mod:`skueue.core.membership.update_phase` for how they are used.  Field
annotations declare what the wire accepts (:mod:`skueue.core.messages.field_types`).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated

from skueue.core.messages.field_types import (
    DeliveryLimit,
    Entries,
    Entry,
    Generation,
    Items,
    PartCount,
    PartIndex,
    QueueCounters,
    QueueName,
    Range,
)
from skueue.core.ops import QUEUES_MAX
from skueue.dht.keys import POSITION_MAX
from skueue.overlay.labels import NodeRef
from skueue.overlay.routing import Route

__all__ = ["Entry", "MEMBERSHIP_KINDS", "MembershipMessage"]


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A joining node asks to be placed: routed to pred(joiner.label), its responsible node."""

    route: Route | None  # None: the receiver starts routing
    joiner: NodeRef

    def describe(self) -> str:
        return f"JoinRequest {self.joiner.describe()}"


@dataclass(frozen=True, slots=True)
class JoinAccepted:
    """The responsible node introduces itself to the joiner.  ``confirm``: the joiner moved
    here in an update phase and must acknowledge, so that it reports its join to the right
    node once it is counted."""

    responsible: NodeRef
    confirm: bool = False

    def describe(self) -> str:
        return f"JoinAccepted by {self.responsible.describe()}"


@dataclass(frozen=True, slots=True)
class JoinAcceptedAck:
    joiner: NodeRef

    def describe(self) -> str:
        return f"JoinAcceptedAck {self.joiner.describe()}"


@dataclass(frozen=True, slots=True)
class JoinCounted:
    """The anchor has counted the joining process (its left node's batch with the join
    was assigned): integrate ``joiner`` in the next update phase.  Acknowledged, and the
    joiner's left node sends no further batch until all three acknowledgements came, so
    a responsible node knows by stage 2 of any later phase."""

    sender: NodeRef  # the joining process's left node
    joiner: NodeRef

    def describe(self) -> str:
        return f"JoinCounted {self.joiner.describe()}"


@dataclass(frozen=True, slots=True)
class JoinCountedAck:
    joiner: NodeRef

    def describe(self) -> str:
        return f"JoinCountedAck {self.joiner.describe()}"


@dataclass(frozen=True, slots=True)
class Withdraw:
    """A relayed joining node moved to another responsible node and took back the batch
    it had sent to this one (it may still be on its way: drop it when it comes).  Sent on
    every move, with ``number`` -1 when there was no batch to take back, so the old
    responsible node knows when to stop accepting batches from it."""

    sender: NodeRef
    number: Generation

    def describe(self) -> str:
        return f"Withdraw batch #{self.number} of {self.sender.describe()}"


@dataclass(frozen=True, slots=True)
class StageDone:
    """Up the *old* tree: the sender and all its old children finished ``stage``."""

    sender: NodeRef
    stage: Annotated[int, Range(1, 4)]

    def describe(self) -> str:
        return f"StageDone {self.stage} from {self.sender.describe()}"


@dataclass(frozen=True, slots=True)
class Rewire:
    """Down the old tree: start ``stage`` (2: integrate joiners, 3: let leavers go)."""

    stage: Annotated[int, Range(2, 4)]

    def describe(self) -> str:
        return f"Rewire stage {self.stage}"


@dataclass(frozen=True, slots=True)
class Integrate:
    """From the responsible node to a joiner: your neighbours, your DHT entries, and the
    joining nodes in your interval that were not counted yet (you are now responsible
    for them)."""

    sender: NodeRef
    pred: NodeRef
    succ: NodeRef
    entries: Entries
    joiners: tuple[NodeRef, ...] = ()
    # HandoverPart messages with the rest of the entries, sent before this one (they may
    # arrive after it): the joiner integrates once it holds all of them.
    parts: PartCount = 0

    def describe(self) -> str:
        return (
            f"Integrate pred={self.pred.describe()} succ={self.succ.describe()} "
            f"entries={len(self.entries)} parts={self.parts}"
        )


@dataclass(frozen=True, slots=True)
class IntegrateAck:
    """The joiner is in the ring.  ``withdrawn`` is the number of a batch it had sent to
    its responsible node as a relayed child and took back (-1: none)."""

    sender: NodeRef
    withdrawn: Generation

    def describe(self) -> str:
        return f"IntegrateAck from {self.sender.describe()} withdrawn={self.withdrawn}"


@dataclass(frozen=True, slots=True)
class SetPred:
    """Your predecessor is now ``pred`` (acknowledged to ``sender``, so it knows it took)."""

    sender: NodeRef
    pred: NodeRef

    def describe(self) -> str:
        return f"SetPred {self.pred.describe()} from {self.sender.describe()}"


@dataclass(frozen=True, slots=True)
class SetPredAck:
    sender: NodeRef

    def describe(self) -> str:
        return f"SetPredAck from {self.sender.describe()}"


@dataclass(frozen=True, slots=True)
class MayILeave:
    """A leaving node asks its predecessor whether it may hand its part over to it."""

    sender: NodeRef

    def describe(self) -> str:
        return f"MayILeave from {self.sender.describe()}"


@dataclass(frozen=True, slots=True)
class LeaveAnswer:
    """``granted``: hand over now.  Otherwise the predecessor is leaving in this phase
    itself; wait for the SetPred that names the next predecessor, then ask it.  An
    answer from a node that is no longer the predecessor is stale and ignored."""

    sender: NodeRef
    granted: bool

    def describe(self) -> str:
        return f"LeaveAnswer {'granted' if self.granted else 'wait'}"


@dataclass(frozen=True, slots=True)
class Departing:
    """A leaving node's hand-over: its entries, its successor, join requests it held.

    Entries that do not fit one bounded message travel ahead in ``parts`` HandoverPart
    messages (numbered 0 .. parts-1, in any order); the predecessor takes the leaver's
    part over only once it holds all of them and this message."""

    sender: NodeRef
    succ: NodeRef
    entries: Entries
    deferred: tuple[NodeRef, ...]
    parts: PartCount = 0

    def describe(self) -> str:
        return (
            f"Departing {self.sender.describe()} succ={self.succ.describe()} "
            f"entries={len(self.entries)} parts={self.parts}"
        )


@dataclass(frozen=True, slots=True)
class HandoverPart:
    """One bounded piece of the entries a Departing (leave) or an Integrate (join) hands
    over; ``index`` is in ``[0, parts)`` of the final message."""

    sender: NodeRef
    index: PartIndex
    entries: Entries

    def describe(self) -> str:
        return (
            f"HandoverPart {self.index} from {self.sender.describe()} entries={len(self.entries)}"
        )


@dataclass(frozen=True, slots=True)
class Absorbed:
    """The predecessor holds the leaver's part and the successor points at it: go."""

    def describe(self) -> str:
        return "Absorbed"


@dataclass(frozen=True, slots=True)
class AnchorHandover:
    """The anchor's counters travel to the new minimum node (SPEC §8, anchor change)."""

    state: Annotated[tuple[QueueCounters, ...], Items(0, QUEUES_MAX)]  # every queue's
    # Above every position and rank of the queues deleted so far (core/anchor.py).
    floor: Annotated[int, Range(0, POSITION_MAX + 1)] = 0
    # The queues with a delivery limit, in name order, with it.
    limits: Annotated[tuple[tuple[QueueName, DeliveryLimit], ...], Items(0, QUEUES_MAX)] = ()

    def describe(self) -> str:
        return f"AnchorHandover of {len(self.state)} queues {self.state[:3]} floor={self.floor}"


@dataclass(frozen=True, slots=True)
class UpdateOver:
    """Down the *new* tree: the update phase is over, batches resume."""

    def describe(self) -> str:
        return "UpdateOver"


MembershipMessage = (
    JoinRequest
    | JoinAccepted
    | JoinAcceptedAck
    | JoinCounted
    | JoinCountedAck
    | Withdraw
    | StageDone
    | Rewire
    | Integrate
    | IntegrateAck
    | SetPred
    | SetPredAck
    | MayILeave
    | LeaveAnswer
    | Departing
    | HandoverPart
    | Absorbed
    | AnchorHandover
    | UpdateOver
)

# The kinds, derived from the union above (written once).
MEMBERSHIP_KINDS: dict[str, type[MembershipMessage]] = {
    cls.__name__: cls for cls in typing.get_args(MembershipMessage)
}
