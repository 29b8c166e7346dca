"""What a daemon answers a client: one frozen class per reply kind, shared by both sides.

The daemon builds a reply and sends its :meth:`frame`; the client reads a frame with
:func:`parse_reply`, which checks its shape and returns the class, so neither side
reads a reply by position.  The frames are those of :mod:`skueue.wire.client_protocol`
(protocol version 2):

    ["welcome", process_id, structure, version, {limits}]
    ["more", rid, results]       part of a large reply; the ``done`` that follows ends it
    ["done", rid, results]       one result per operation
    ["stats", rid, {...}]
    ["error", rid | None, message, code]   code: timeout, unavailable, too-large, invalid
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skueue.core.errors import RemoteProtocolError

# Error codes: what the client may conclude from an error.
TIMEOUT = "timeout"  # the outcome is unknown
UNAVAILABLE = "unavailable"  # nothing was done; retry later or elsewhere
TOO_LARGE = "too-large"  # over a limit
INVALID = "invalid"  # a bad field
REFUSED = "refused"  # the cluster refused it (a queue of the other structure); nothing done
UNAUTHORIZED = "unauthorized"  # no good token, or one whose role may not do this; nothing done


@dataclass(frozen=True, slots=True)
class Welcome:
    """The daemon's answer to a client's hello."""

    process_id: str
    structure: str  # "queue" or "stack"
    version: int  # the protocol version the daemon speaks
    limits: dict[str, int] | None  # None: a daemon too old to say (version 1)

    def frame(self) -> list[Any]:
        return ["welcome", self.process_id, self.structure, self.version, self.limits or {}]


@dataclass(frozen=True, slots=True)
class More:
    """Part of the results of a reply too large for one frame."""

    rid: int
    results: list[Any]

    def frame(self) -> list[Any]:
        return ["more", self.rid, self.results]


@dataclass(frozen=True, slots=True)
class Done:
    """A request went through: its results, after those of any ``More`` before it."""

    rid: int
    results: list[Any]

    def frame(self) -> list[Any]:
        return ["done", self.rid, self.results]


@dataclass(frozen=True, slots=True)
class StatsReply:
    """``skueue stats``: the cluster's summary."""

    rid: int
    summary: dict[str, Any]

    def frame(self) -> list[Any]:
        return ["stats", self.rid, self.summary]


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A request failed, or (``rid`` None) the connection ends."""

    rid: int | None
    message: str
    code: str | None = None  # None only from a daemon too old to say

    def frame(self) -> list[Any]:
        frame: list[Any] = ["error", self.rid, self.message]
        return frame if self.code is None else [*frame, self.code]


Reply = Welcome | More | Done | StatsReply | ErrorReply


def parse_reply(frame: Any) -> Reply:
    """The reply a frame carries; :class:`RemoteProtocolError` when it is none."""
    if not isinstance(frame, list) or len(frame) < 3 or type(frame[0]) is not str:
        raise RemoteProtocolError(f"unexpected reply {frame!r:.60}")
    kind, rid, body = frame[0], frame[1], frame[2]
    if kind == "welcome":
        version = frame[3] if len(frame) > 3 and type(frame[3]) is int else 1
        limits = frame[4] if len(frame) > 4 and isinstance(frame[4], dict) else None
        return Welcome(str(rid), str(body), version, limits)
    if kind == "error":
        code = frame[3] if len(frame) > 3 and type(frame[3]) is str else None
        if rid is not None and type(rid) is not int:
            raise RemoteProtocolError(f"unexpected reply {frame!r:.60}")
        return ErrorReply(rid, " ".join(str(body).split()) or "no reason given", code)
    if type(rid) is not int:
        raise RemoteProtocolError(f"unexpected reply {frame!r:.60}")
    if kind in ("more", "done") and isinstance(body, list):
        return More(rid, body) if kind == "more" else Done(rid, body)
    if kind == "stats" and isinstance(body, dict):
        return StatsReply(rid, body)
    raise RemoteProtocolError(f"unexpected reply {frame!r:.60}")
