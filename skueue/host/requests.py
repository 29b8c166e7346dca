"""What a client asks a daemon: one frozen class per request kind, declared once.

The client builds them, the wire carries them (:mod:`skueue.wire.client_codec` derives
the codec from the fields below: their types, and the limits in their annotations), the
daemon's session checks them on the way in and the host serves them.  A request travels
as ``[KIND, rid, required fields..., {optional fields}]``: the fields without a default
in order, then a map of those with one that are not at their default (left out when
empty).  Each field's annotation says what it may hold:

- :class:`~skueue.core.messages.field_types.Range` and ``Items`` (the peer messages'
  markers): an integer's range, a sequence's length (or a text's);
- ``QueueName``: a queue name (``skueue.core.ops.queue_name_problem``);
- :class:`UpTo`: a count under one of the daemon's limits (``skueue.runtime.limits``),
  and :class:`EachUpTo`: the bytes of each value;
- :class:`Answered`: a bad value is answered ``invalid`` alone.

What is wrong is split by what the client can have meant (the daemon's behaviour, which
the codec derives from these markers): a value of the wrong type, an unknown kind or
field is garbage, and ends the connection (:class:`~skueue.core.errors.RemoteProtocolError`);
a queue name or an :class:`Answered` field that is out of its range, and a request's
:meth:`problem`, are answered ``invalid``; a count over one of the daemon's limits is
answered ``too-large``; either way the connection serves on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from skueue.core.messages.field_types import Items, QueueName, Range
from skueue.core.ops import (
    DEFAULT_QUEUE,
    DELIVERY_LIMIT_MAX,
    PRIORITIES_MAX,
    QueueSettings,
    dead_letter_problem,
    settings_problem,
)


@dataclass(frozen=True, slots=True)
class UpTo:
    """A count (of a sequence, or an integer) of at most the daemon's limit of this name
    (an attribute of ``skueue.runtime.limits.Limits``); over it is answered ``too-large``."""

    limit: str


@dataclass(frozen=True, slots=True)
class EachUpTo:
    """Each item (bytes) of a sequence has at most the daemon's limit of this name in
    bytes; over it is answered ``too-large``.  ``noun``: one item, in the answer."""

    limit: str
    noun: str


@dataclass(frozen=True, slots=True)
class Answered:
    """A bad value of this field is answered ``invalid`` and the connection serves on (a
    setting a client that means well can get wrong), instead of ending it.  ``types``:
    a value of the wrong type too; else only one out of its range or length."""

    types: bool = True


RID_MAX = 1 << 63
RequestId = Annotated[int, Range(0, RID_MAX)]
WAIT_MS_MAX = 3_600_000
"""The longest a blocking remove may wait: an hour (a client that wants longer asks again)."""
LEASE_MS_MAX = 12 * 3_600_000
"""The longest lease, and the longest extension: 12 hours (SQS's longest visibility
timeout); a consumer that needs longer extends it again."""
MAX_DELIVERIES_MAX = DELIVERY_LIMIT_MAX
"""The largest delivery limit a leased remove or a queue may set."""
REMOVE_MEMBERS_MAX = 16
"""Members one remove-member request may name (a few dead ones that would each stop the
check of the others: they go together)."""
MEMBER_NAME_CHARS_MAX = 256  # a process id or an address
SEED_CHARS_MAX = 256  # a join's seed address

Values = Annotated[
    tuple[bytes, ...],
    Items(1), UpTo("ops_per_request_max"), EachUpTo("value_bytes_max", "value"),
]  # fmt: skip
Priority = Annotated[int, Range(0, PRIORITIES_MAX), Answered()]
WaitMs = Annotated[int, Range(1, WAIT_MS_MAX + 1), Answered()]
LeaseMs = Annotated[int, Range(1, LEASE_MS_MAX + 1), Answered()]
DeliveryLimit = Annotated[int, Range(1, MAX_DELIVERIES_MAX + 1), Answered()]
LeaseId = Annotated[int, Range(0, RID_MAX)]
LeaseIds = Annotated[tuple[LeaseId, ...], Items(1), UpTo("ops_per_request_max")]
MemberName = Annotated[str, Items(1, MEMBER_NAME_CHARS_MAX)]


@dataclass(frozen=True, slots=True)
class InsertRequest:
    """Insert ``values``, in order (enqueue, push); the results are one
    :class:`~skueue.host.results.Inserted` per value."""

    KIND: ClassVar[str] = "insert"
    rid: RequestId  # the client's id for the request, echoed in its reply
    values: Values  # the elements, in order
    queue: QueueName | None = None  # None: the default queue
    # True: the operations are a stack's (push); False: a queue's; None: those of the
    # structure the name has (issue 28), and a name that holds nothing yet is made ...
    stack: bool | None = None
    priority: Priority | None = None  # its level in a queue with levels (None: 0, most urgent)
    prefer_stack: bool | None = None  # ... a stack if True (a push's), else the daemon's


@dataclass(frozen=True, slots=True)
class RemoveRequest:
    """Remove ``count`` elements (dequeue, pop); the results are one
    :class:`~skueue.host.results.Removed` per removal (its value None where the
    structure was empty), in order."""

    KIND: ClassVar[str] = "remove"
    rid: RequestId  # the client's id for the request, echoed in its reply
    count: Annotated[int, Range(1), UpTo("ops_per_request_max")]  # removals to make
    queue: QueueName | None = None  # None: the default queue
    stack: bool | None = None  # as an insert's
    wait_ms: WaitMs | None = None  # a blocking remove: wait up to this long for an element
    lease_ms: LeaseMs | None = None  # a leased remove: hold the elements this long
    max_deliveries: DeliveryLimit | None = None  # with a lease: dead letters after this many
    prefer_stack: bool | None = None  # as an insert's
    # A consumer's fetch: up to ``count`` elements; the removes that found the queue
    # empty are no results and no empty removes in its stats, and while it waits only
    # one remove tries each cycle.
    fetch: bool = False
    look: bool = False  # with a lease: to show and return them (keep), not a delivery

    def problem(self) -> str | None:
        """What is wrong with the request as a whole, or None."""
        if self.max_deliveries is not None and self.lease_ms is None:
            return "max_deliveries needs lease_ms"
        if self.look and self.lease_ms is None:  # a look gives its elements back
            return "look needs lease_ms"
        if self.max_deliveries is not None:
            return dead_letter_problem(self.queue or DEFAULT_QUEUE)
        return None


LEASE_HOWS = ("ack", "nack", "extend", "keep")
"""What a lease request does: ack (done), nack (return, counted as a delivery), extend
(hold longer), keep (return as it was: a look's, ``skueue dlq``)."""


@dataclass(frozen=True, slots=True)
class LeaseRequest:
    """Ack, nack, extend or keep leases of this connection; the results are one
    :class:`~skueue.host.results.LeaseAnswer` per lease."""

    KIND: ClassVar[str] = "lease"
    rid: RequestId  # the client's id for the request, echoed in its reply
    how: Literal["ack", "nack", "extend", "keep"]  # what to do with them (LEASE_HOWS)
    leases: LeaseIds  # the leases' ids, as their removes' results named them
    lease_ms: LeaseMs | None = None  # an extend's: how long from now (only an extend's)

    def problem(self) -> str | None:
        if (self.how == "extend") != (self.lease_ms is not None):
            return "an extend, and only an extend, says lease_ms"
        return None


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """Make a named queue with its settings, or find it made with them; the result is
    one :class:`~skueue.host.results.Created`.  Made with other settings, it is answered
    ``refused``."""

    KIND: ClassVar[str] = "create"
    rid: RequestId  # the client's id for the request, echoed in its reply
    queue: QueueName  # the queue to make
    stack: bool | None = None  # a stack (None: of the daemon's structure)
    # A leased element returned more often than this goes to NAME.dlq (None: no limit)
    max_deliveries: Annotated[int, Range(0, DELIVERY_LIMIT_MAX + 1), Answered()] | None = None
    priorities: Annotated[int, Range(1, PRIORITIES_MAX + 1), Answered()] | None = None  # levels

    def problem(self) -> str | None:
        levels = 1 if self.priorities is None else self.priorities
        settings = QueueSettings(bool(self.stack), self.max_deliveries or 0, levels)
        return settings_problem(self.queue, settings)


@dataclass(frozen=True, slots=True)
class ConfigureRequest:
    """Change the settings of an existing queue or stack that may change while it lives
    (ordered like a create); the result is one :class:`~skueue.host.results.Configured`,
    its settings now.  A name that holds no queue is answered ``refused``."""

    KIND: ClassVar[str] = "configure"
    rid: RequestId  # the client's id for the request, echoed in its reply
    queue: QueueName  # the queue to change
    # its delivery limit from now on (0: none)
    max_deliveries: Annotated[int, Range(0, DELIVERY_LIMIT_MAX + 1), Answered()]

    def problem(self) -> str | None:
        return settings_problem(self.queue, QueueSettings(max_deliveries=self.max_deliveries))


@dataclass(frozen=True, slots=True)
class PeekRequest:
    """The element a dequeue of the queue would return now, left in it (issue 14); the
    result is one :class:`~skueue.host.results.Removed`.  A queue's only: on a stack's
    name the anchor refuses it."""

    KIND: ClassVar[str] = "peek"
    rid: RequestId  # the client's id for the request, echoed in its reply
    queue: QueueName | None = None  # None: the default queue


@dataclass(frozen=True, slots=True)
class DeleteRequest:
    """Delete a named queue (or stack): its elements are removed, its name is free; the
    result is one :class:`~skueue.host.results.Deleted`."""

    KIND: ClassVar[str] = "delete"
    rid: RequestId  # the client's id for the request, echoed in its reply
    queue: QueueName  # the queue to delete


@dataclass(frozen=True, slots=True)
class StatsRequest:
    """The cluster's summary (``skueue stats``), answered with a
    :class:`~skueue.host.replies.StatsReply`."""

    KIND: ClassVar[str] = "stats"
    rid: RequestId  # the client's id for the request, echoed in its reply


@dataclass(frozen=True, slots=True)
class LeaveRequest:
    """Hand this daemon's data to the others and exit; answered once it has."""

    KIND: ClassVar[str] = "leave"
    rid: RequestId  # the client's id for the request, echoed in its reply


@dataclass(frozen=True, slots=True)
class JoinClusterRequest:
    """Make a daemon that is alone (and empty) join the cluster ``seed`` is in; answered
    once it is in the ring."""

    KIND: ClassVar[str] = "join"
    rid: RequestId  # the client's id for the request, echoed in its reply
    seed: Annotated[str, Items(1, SEED_CHARS_MAX)]  # a member's address, HOST:PORT


@dataclass(frozen=True, slots=True)
class RemoveMemberRequest:
    """Make the cluster forget members that will never come back (``skueue
    remove-member``); the result is one :class:`~skueue.host.results.MembersRemoved`
    (runtime/member_removal.py)."""

    KIND: ClassVar[str] = "remove-member"
    rid: RequestId  # the client's id for the request, echoed in its reply
    # each a process id or the address it listens at (each named once)
    members: Annotated[tuple[MemberName, ...], Items(1, REMOVE_MEMBERS_MAX), Answered(types=False)]

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(dict.fromkeys(self.members)))


ClientRequest = (
    InsertRequest
    | RemoveRequest
    | LeaseRequest
    | CreateRequest
    | ConfigureRequest
    | DeleteRequest
    | PeekRequest
    | StatsRequest
    | LeaveRequest
    | JoinClusterRequest
    | RemoveMemberRequest
)
REQUEST_CLASSES: tuple[type[ClientRequest], ...] = (
    InsertRequest, RemoveRequest, LeaseRequest, CreateRequest, ConfigureRequest,
    DeleteRequest, PeekRequest, StatsRequest, LeaveRequest, JoinClusterRequest,
    RemoveMemberRequest,
)  # fmt: skip
# With client tokens, only an admin token's connections may send these.
ADMIN_ROLE_REQUESTS = (DeleteRequest, LeaveRequest, JoinClusterRequest, RemoveMemberRequest)
# An admin connection (a slot of its own) may send only these.
ADMIN_REQUESTS = (StatsRequest, LeaveRequest, JoinClusterRequest, RemoveMemberRequest)
# A client with a session sends these again after a reconnect (runtime/retries.py).
RETRYABLE_REQUESTS = (
    InsertRequest, RemoveRequest, DeleteRequest, CreateRequest, ConfigureRequest, PeekRequest,
)  # fmt: skip
