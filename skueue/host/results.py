"""What a client request's operations come back with: one frozen record per kind of result.

The host builds them when an operation completes; the daemon's reply carries them
(:class:`~skueue.host.replies.Done`); the client hands them to its caller as they are
(``Inserted`` and ``Removed`` are public names: ``from skueue import Inserted``).  The
wire codec (:mod:`skueue.wire.client_codec`) is derived from the fields below, as the
peer codec is from :mod:`skueue.core.messages`: a record travels as the list of its
fields, the trailing ones at their defaults left out; the limits are in the annotations.

Every result a checker needs carries ``ord`` (the operation's rank in its anchor's
serialization) and ``position`` (where in the queue it happened), so that any history,
from the simulator or from real clients, can be certified cheaply (ARCHITECTURE.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from skueue.core.messages.field_types import Items, Range

Rank = Annotated[int, Range(-1)]  # an operation's rank in its anchor's serialization
Position = int | None  # where in the queue (None: an empty result, or a combined pair)


@dataclass(frozen=True, slots=True)
class Inserted:
    """Where an inserted element went: its rank in the serialization and its position."""

    KIND: ClassVar[str] = "inserted"
    ord: Rank  # the insert's rank in its anchor's serialization
    position: Position  # the element's position in its queue


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """A leased remove's hold on its element (skueue/core/leases.py)."""

    KIND: ClassVar[str] = "lease-grant"
    lease_id: int  # names the lease in an ack, nack or extend, on this connection only
    deliveries: Annotated[int, Range(1)]  # deliveries with a lease, this one included
    reason: str  # why it came back last ("" the first time; skueue.core.ops.RETURN_REASONS)


@dataclass(frozen=True, slots=True)
class Removed:
    """A removed element (None: the structure was empty), its rank and position; a
    peek's element, left in its queue, is one too.  ``lease``: a leased remove's hold on
    its element (then the element is not gone until it is acked)."""

    KIND: ClassVar[str] = "removed"
    value: bytes | None  # the element (None: the structure was empty)
    ord: Rank  # the remove's rank in its anchor's serialization
    position: Position  # the element's position in its queue
    lease: LeaseGrant | None = None  # a leased remove's (None: removed for good)


@dataclass(frozen=True, slots=True)
class Created:
    """A create's outcome: True if it made the queue, False if it was made already with
    the same settings (other settings are an error reply, ``refused``)."""

    KIND: ClassVar[str] = "created"
    created: bool  # this request made the queue


@dataclass(frozen=True, slots=True)
class Configured:
    """A configure's outcome: the queue's settings as they are now."""

    KIND: ClassVar[str] = "configured"
    structure: Literal["queue", "stack"]  # what the name holds
    max_deliveries: int  # its delivery limit now (0: none)
    priorities: Annotated[int, Range(1)]  # its priority levels (1: none)


@dataclass(frozen=True, slots=True)
class Deleted:
    """A delete's outcome: how many elements the queue held, and the delete's rank."""

    KIND: ClassVar[str] = "deleted"
    removed: int  # the elements the delete removed with the queue
    ord: Rank  # the delete's rank among the name's operations


@dataclass(frozen=True, slots=True)
class LeaseAnswer:
    """An ack's, nack's, keep's or extend's answer for one lease: False when the lease
    had ended already (acked, or its element went back: it expired, or was returned when
    its connection closed), so the request changed nothing for it."""

    KIND: ClassVar[str] = "lease-answer"
    live: bool  # the lease was still held, and the request took effect on it


@dataclass(frozen=True, slots=True)
class RemovedMember:
    """A member that ``skueue remove-member`` made the cluster forget."""

    KIND: ClassVar[str] = "removed-member"
    member: str  # its process id
    address: str | None  # where it listened, if known
    held: str  # what it held when it was forgotten (runtime/removal_check.py)


@dataclass(frozen=True, slots=True)
class MembersRemoved:
    """A remove-member's outcome: the members removed now, and those gone already."""

    KIND: ClassVar[str] = "members-removed"
    removed: Annotated[tuple[RemovedMember, ...], Items(most=1 << 16)]  # forgotten now
    gone_already: Annotated[tuple[str, ...], Items(most=1 << 16)]  # had left before

    def as_dict(self) -> dict[str, object]:
        """As ``skueue remove-member --json`` prints it."""
        return {
            "removed": [
                {"member": m.member, "address": m.address, "held": m.held} for m in self.removed
            ],
            "gone_already": list(self.gone_already),
        }


Result = Inserted | Removed | Created | Configured | Deleted | LeaseAnswer | MembersRemoved
RESULT_KINDS: dict[str, type[Result]] = {
    c.KIND: c
    for c in (Inserted, Removed, Created, Configured, Deleted, LeaseAnswer, MembersRemoved)
}
"""The records a reply's results may be, by the name the wire gives them."""
Results = tuple[Result, ...]
"""A request's results, one per operation, all of one kind."""
RECORD_KINDS: dict[str, type] = {**RESULT_KINDS, LeaseGrant.KIND: LeaseGrant,
                                 RemovedMember.KIND: RemovedMember}  # fmt: skip
"""Every record of this module by its name, those inside a result too."""
