"""The inputs of a host: everything that changes it, one frozen class per kind.

Theory of operation
-------------------
A host (:class:`skueue.host.host.Host`) is deterministic: the same inputs in the same
order give the same state and the same effects.  So these classes are, at once,

- what the daemon's owner hands the host (``Host.step(input) -> effects``), the only
  way its state changes;
- the records of a durable daemon's input log: the owner writes every input whose class
  says ``logged`` before stepping it (one function writes them, one reads them back:
  ``skueue/runtime/durability/records.py`` derives their codec from these classes), and recovery is
  "for each record: step";
- the steps of the simulators, which drive hosts with them.

Time comes in as data: a request carries the driver's clock (its deadline, the start of
a blocking wait), the lease clock comes as :class:`LeaseClock`; what the host decides
because time passed (a wait ended, a request timed out) comes back to it as an input
the driver logs (:meth:`Host.due`), so a replay needs no clock.

A few inputs change nothing a restart needs (``logged = False``): the driver steps them
without logging them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from skueue.core.messages.membership import MembershipMessage
from skueue.core.messages.stages import Message
from skueue.host.requests import ClientRequest
from skueue.overlay.labels import Kind

Frame = list[Any]
"""A control frame between daemons (gossip, stats, removal checks): a msgpack array."""


@dataclass(frozen=True, slots=True)
class FromClient:
    """A client's request: operations (insert, remove, create, configure, delete, peek),
    a lease's ack, nack, extend or keep, or a leave."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "client"
    client: int
    """The connection it came on, numbered by the driver; never the number of a
    connection of an earlier term (``TookOver``)."""
    session: str | None
    """The client's session (its hello): with the request's ``rid``, the key under which
    a retry gets the first attempt's outcome (``skueue/host/retries.py``)."""
    request: ClientRequest
    deadline: float
    """Driver seconds after which the client is told its request timed out (inf: never)."""
    now: float
    """Driver seconds now: a blocking remove's wait ends ``wait_ms`` after it."""


@dataclass(frozen=True, slots=True)
class ClientGone:
    """A client's connection closed: its waits end, its leases go back, and what its
    requests still return is dropped (and counted)."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "gone"
    client: int


@dataclass(frozen=True, slots=True)
class PeerMessage:
    """A protocol message from another process, for one of this process's nodes."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "msg"
    peer: str
    """The process it came from (its link's far end)."""
    number: int
    """Its frame's number on that link (``runtime/network/link_receiver.py``)."""
    to: Kind
    """Which of this process's three nodes it is for."""
    message: Message | MembershipMessage
    encoded: Any = field(default=None, compare=False)
    """The message as it came off the wire, when the driver has it: the log keeps that
    instead of encoding the message again."""


@dataclass(frozen=True, slots=True)
class PeerControl:
    """A control frame from another process: gossip about members (the host's), or a
    stats or removal question (the daemon's; the host only notes its number)."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "control"
    peer: str
    number: int
    frame: Frame


@dataclass(frozen=True, slots=True)
class Hello:
    """A peer opened a link to this daemon and proved who it is."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "hello"
    peer: str
    address: str
    """Where it listens (``HOST:PORT``)."""
    nonce: str | None = None
    """Its incarnation: a new one is judged afresh if an old one was refused."""
    static: bool = False
    """It is starting a static cluster and takes this daemon for one of its members: if
    it is none of them, it is refused for good (issue 28, item 2)."""


@dataclass(frozen=True, slots=True)
class PeerGone:
    """A peer's link closed: an unconfirmed contact is forgotten (nothing durable)."""

    logged: ClassVar[bool] = False
    tag: ClassVar[str] = "peer-gone"
    peer: str


@dataclass(frozen=True, slots=True)
class ControlSent:
    """A control frame the daemon sends of its own accord (stats, removal checks): it
    does not follow from other inputs, so it is an input itself, and a replay numbers it
    on its link as the first life did."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "sent"
    peer: str
    frame: Frame


@dataclass(frozen=True, slots=True)
class Tick:
    """The paper's Timeout action, for each of the process's nodes."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "tick"


@dataclass(frozen=True, slots=True)
class LeaseClock:
    """The lease clock (milliseconds, the driver's monotonic clock): leases past their
    deadline go back to their queues."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "clock"
    now_ms: int


@dataclass(frozen=True, slots=True)
class EndWait:
    """The wait of the blocking remove numbered ``number`` is over: its next empty
    attempt is its answer."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "wait-end"
    number: int


@dataclass(frozen=True, slots=True)
class TimedOut:
    """The request numbered ``number`` passed its deadline: its client is told the
    outcome is unknown (``why``: what the daemon knows of the cause); its operations go
    on in the protocol."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "timed-out"
    number: int
    why: str


@dataclass(frozen=True, slots=True)
class JoinStart:
    """``skueue join`` reached its seed: this lone process becomes a joiner of the
    seed's cluster; the client is answered once it is in the ring."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "join"
    seed: str
    address: str | None
    client: int | None
    """The client that asked (None: the daemon's own ``--join``)."""
    rid: int


@dataclass(frozen=True, slots=True)
class RemoveMember:
    """``skueue remove-member``, decided here: forget a member that holds nothing, for
    good (``runtime/member_removal.py`` asks the cluster first)."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "remove-member"
    member: str


@dataclass(frozen=True, slots=True)
class TookOver:
    """A replica became the leader of its process's group (docs/replication.md §5.3): the
    first input of its term, after a restart's replay or a failover.  The last term's
    clients are gone: their blocking waits end, their leases go back, deadlines of the
    old clock are forgotten; and the lease clock goes to ``lease_clock_ms``, the new
    leader's first reading (never below the log's last: a clock in the log never goes
    back, §2)."""

    logged: ClassVar[bool] = True
    tag: ClassVar[str] = "took-over"
    term: int
    lease_clock_ms: int


Input = (
    FromClient | ClientGone | PeerMessage | PeerControl | Hello | PeerGone | ControlSent
    | Tick | LeaseClock | EndWait | TimedOut | JoinStart | RemoveMember | TookOver
)
INPUT_KINDS: dict[str, type] = {kind.tag: kind for kind in Input.__args__}
"""Every input class by its tag (the first element of its log record)."""
