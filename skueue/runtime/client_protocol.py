"""The client protocol: request frames a client may send, checked field by field.

Frames are msgpack arrays:

    client -> daemon   ["hello-client", version]               first frame
                       ["insert", rid, [value, ...]]           enqueue / push
                       ["remove", rid, count]                  dequeue / pop
                       ["stats", rid]
                       ["leave", rid]                          hand off and exit
                       ["join", rid, "HOST:PORT"]              join that cluster (alone, empty)
    daemon -> client   ["welcome", process_id, structure, version]
                       ["done", rid, results]                  one result per operation
                       ["stats", rid, {...}]
                       ["error", rid | None, message]

An insert's result is ``[ord, position]``; a remove's is ``[value | None, ord, position]``
(``None`` = the structure was empty).  ``rid`` is the client's request id, echoed back.
"""

from __future__ import annotations

from typing import Any

import attrs

from skueue.runtime.errors import RemoteProtocolError
from skueue.runtime.limits import Limits

PROTOCOL_VERSION = 1
RID_MAX = 1 << 63


@attrs.frozen
class InsertRequest:
    rid: int
    values: list[bytes]


@attrs.frozen
class RemoveRequest:
    rid: int
    count: int


@attrs.frozen
class StatsRequest:
    rid: int


@attrs.frozen
class LeaveRequest:
    rid: int


@attrs.frozen
class JoinClusterRequest:
    rid: int
    seed: str


ClientRequest = InsertRequest | RemoveRequest | StatsRequest | LeaveRequest | JoinClusterRequest


def request_id(frame: Any) -> int | None:
    """The rid of a frame if it has a usable one, to address an error reply."""
    if isinstance(frame, list) and len(frame) > 1 and type(frame[1]) is int:
        rid: int = frame[1]
        return rid
    return None


def parse_request(frame: Any, limits: Limits) -> ClientRequest:
    if not isinstance(frame, list) or not frame or type(frame[0]) is not str:
        raise RemoteProtocolError("request: expected [kind, rid, ...]")
    kind = frame[0]
    if len(frame) < 2 or type(frame[1]) is not int or not 0 <= frame[1] < RID_MAX:
        raise RemoteProtocolError(f"{kind!r:.30}: the request id must be a non-negative integer")
    rid = frame[1]
    if kind == "insert" and len(frame) == 3:
        values = frame[2]
        if not isinstance(values, list) or not values:
            raise RemoteProtocolError("insert: expected a non-empty list of values")
        if len(values) > limits.ops_per_request_max:
            raise RemoteProtocolError(
                f"insert: {len(values)} values exceed the limit of {limits.ops_per_request_max}"
            )
        for v in values:
            if type(v) is not bytes:
                raise RemoteProtocolError(f"insert: values must be bytes, got {type(v).__name__}")
            if len(v) > limits.value_bytes_max:
                raise RemoteProtocolError(
                    f"insert: a value of {len(v)} bytes exceeds the limit of "
                    f"{limits.value_bytes_max}"
                )
        return InsertRequest(rid, values)
    if kind == "remove" and len(frame) == 3:
        count = frame[2]
        if type(count) is not int or not 1 <= count <= limits.ops_per_request_max:
            raise RemoteProtocolError(
                f"remove: count must be an integer from 1 to {limits.ops_per_request_max}"
            )
        return RemoveRequest(rid, count)
    if kind == "stats" and len(frame) == 2:
        return StatsRequest(rid)
    if kind == "leave" and len(frame) == 2:
        return LeaveRequest(rid)
    if kind == "join" and len(frame) == 3:
        if type(frame[2]) is not str or not 0 < len(frame[2]) <= 256:
            raise RemoteProtocolError("join: expected the seed's address as a string")
        return JoinClusterRequest(rid, frame[2])
    raise RemoteProtocolError(f"unknown request {kind!r:.30} with {len(frame)} fields")
