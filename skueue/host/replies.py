"""What a daemon answers a client: one frozen class per reply kind, declared once.

The host and the daemon's sessions build them; the client reads them back; the codec
(:mod:`skueue.wire.client_codec`) is derived from the fields below.  A reply travels as
``[KIND, field, ...]``, its trailing fields at their defaults left out.  Results travel
as ``[result kind, result, ...]`` (``[]`` when there are none), so that either side
reads them as the typed records of :mod:`skueue.host.results`, never by position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from skueue.core.messages.field_types import Range
from skueue.host.requests import RID_MAX
from skueue.host.results import Results

# Error codes: what the client may conclude from an error.
TIMEOUT = "timeout"  # the outcome is unknown
UNAVAILABLE = "unavailable"  # nothing was done; retry later or elsewhere
TOO_LARGE = "too-large"  # over a limit
INVALID = "invalid"  # a bad field
REFUSED = "refused"  # the cluster refused it (a queue of the other structure); nothing done
UNAUTHORIZED = "unauthorized"  # no good token, or one whose role may not do this; nothing done
# (A hello that named a process this daemon does not serve) the message is the address of
# the member that serves it now (failover, runtime/failover.py); nothing done.
MOVED = "moved"

ReplyId = Annotated[int, Range(0, RID_MAX)]


@dataclass(frozen=True, slots=True)
class Welcome:
    """The daemon's answer to a client's hello."""

    KIND: ClassVar[str] = "welcome"
    process_id: str  # the daemon's process id
    structure: str  # "queue" or "stack": what a new name becomes by default
    version: int  # the protocol version the daemon speaks
    # What the client checks its requests against (wire/client_protocol.py's
    # limits_for_clients; None: a daemon that does not say, whose limits are the defaults).
    limits: dict[str, int] | None = None


@dataclass(frozen=True, slots=True)
class More:
    """Part of the results of a reply too large for one frame; a ``Done`` ends them."""

    KIND: ClassVar[str] = "more"
    rid: ReplyId  # the request's id
    results: Results  # the next of its results, in order


@dataclass(frozen=True, slots=True)
class Done:
    """A request went through: its results, after those of any ``More`` before it."""

    KIND: ClassVar[str] = "done"
    rid: ReplyId  # the request's id
    results: Results  # its (last) results, in order


@dataclass(frozen=True, slots=True)
class StatsReply:
    """``skueue stats``: the cluster's summary."""

    KIND: ClassVar[str] = "stats"
    rid: ReplyId  # the request's id
    summary: dict[str, Any]  # runtime/operations/stats.py says what it holds


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A request failed, or (``rid`` None) the connection ends."""

    KIND: ClassVar[str] = "error"
    rid: ReplyId | None  # the request's id (None: the connection's end)
    message: str  # one line: what went wrong
    code: str | None = None  # what the client may conclude (the codes above; None: none)


Reply = Welcome | More | Done | StatsReply | ErrorReply
REPLY_CLASSES: tuple[type[Reply], ...] = (Welcome, More, Done, StatsReply, ErrorReply)
