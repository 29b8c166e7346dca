"""The client protocol: the frames, and what a session reads before it decodes one.

The requests, the replies and their results are classes of :mod:`skueue.host`
(``requests``, ``replies``, ``results``), each field documented there; their codec is
derived from them (:mod:`skueue.wire.client_codec`).  Frames are msgpack arrays
(protocol version 3):

    client -> daemon   ["hello-client", version, {options}]   first frame; options optional:
                         "request_timeout_ms": int > 0         time this client's requests out
                         "admin": bool                         an administrative connection
                         "session": str                        retries get the first outcome
                         "token": str                          the client's credential
                       [KIND, rid, required fields..., {optional fields}]   a request:
                       ["insert", rid, [value, ...], {queue, stack, priority, prefer_stack}]
                       ["remove", rid, count, {queue, stack, wait_ms, lease_ms,
                                               max_deliveries, prefer_stack, fetch, look}]
                       ["lease", rid, "ack" | "nack" | "extend" | "keep", [lease, ...],
                                 {lease_ms}]              leased elements done with, ...
                       ["create", rid, NAME, {stack, max_deliveries, priorities}]
                       ["configure", rid, NAME, max_deliveries]
                       ["delete", rid, NAME]
                       ["peek", rid, {queue}]
                       ["stats", rid]  ["leave", rid]  ["join", rid, "HOST:PORT"]
                       ["remove-member", rid, [ID or ADDR, ...]]
    daemon -> client   ["welcome", process_id, structure, version, {limits}]
                       ["more", rid, results]              part of a large reply, then:
                       ["done", rid, results]              one result per operation
                       ["stats", rid, {...}]
                       ["error", rid | None, message, code]

A request's optional fields travel by name, only those not at their default, and the map
is left out when empty.  ``results`` is ``[KIND, result, ...]`` (``[]``: none), each
result the list of its record's fields (``skueue.host.results``: ``inserted``
``[ord, position]``, ``removed`` ``[value | None, ord, position, [lease, deliveries,
reason]?]``, ``created``, ``configured``, ``deleted``, ``lease-answer``,
``members-removed``), without its trailing fields at their defaults.  ``rid`` is the
client's request id, echoed back.  Leases belong to the connection: when it closes, their
elements go back to their queues.

Version 3 (issue 29) declares each request, reply and result once, with the codec derived
from the classes: results are typed records, lease requests one kind, a configure's
limit positional.  A daemon serves version 3 hellos only; any other is refused with one
line that says which versions it speaks.  A reply whose frame would exceed
``frame_bytes_max`` goes as zero or more ``more`` frames and one ``done``, each within the
limit; the client joins their results in order.

Error codes: ``timeout`` (the outcome is unknown), ``unavailable`` (nothing was done;
retry later or elsewhere), ``too-large`` (over a limit), ``invalid`` (a bad field),
``refused`` (the anchor refused the request's queue: it is of the other structure, or a
new queue found the cluster full; nothing was done), ``unauthorized``, and ``moved``
(to a hello that names its session's process, ``{"process": P}``, at a member that does
not serve P: the message is the address where P is served now, after a failover;
runtime/failover.py).  An error whose rid is None ends the connection.

What ends a connection and what does not (``skueue.host.requests`` says it per field):

- A request over a limit (a value over ``value_bytes_max``, more operations than
  ``ops_per_request_max``) is answered alone, ``too-large``, and so is a bad setting
  (a queue name, a wait, a lease, a priority out of range), ``invalid``; the connection
  serves on.
- A frame over ``frame_bytes_max`` is skipped as it arrives, never buffered.  Its request
  id is read from the first bytes of its payload, and when there is one the frame is
  answered alone like the above.  When there is none (the frame does not start like a
  request), nobody can be answered: one ``["error", None, "a frame of N bytes exceeds the
  limit of M", "too-large"]`` and the connection closes.
- Anything malformed (a field of the wrong type, an unknown kind) is answered
  ``invalid`` and the connection closes: a client that sends garbage is not served on.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgpack

from skueue.host.requests import RID_MAX

# Room around a reply's results: array headers, the kinds, a rid of up to 9 bytes.
REPLY_OVERHEAD_BYTES = 48


class RequestLimits(Protocol):
    """The limits a request is checked against (the runtime's ``Limits`` has them; the
    wire only needs to read them, so it does not depend on the runtime)."""

    @property
    def value_bytes_max(self) -> int: ...

    @property
    def ops_per_request_max(self) -> int: ...

    @property
    def frame_bytes_max(self) -> int: ...


def limits_for_clients(limits: RequestLimits) -> dict[str, int]:
    """The limits a client checks its requests against (the welcome's last element)."""
    return {
        "value_bytes_max": limits.value_bytes_max,
        "ops_per_request_max": limits.ops_per_request_max,
        "frame_bytes_max": limits.frame_bytes_max,
    }


def request_id(frame: Any) -> int | None:
    """The rid of a frame if it has a usable one, to address an error reply."""
    if isinstance(frame, list) and len(frame) > 1 and type(frame[1]) is int:
        rid: int = frame[1]
        return rid
    return None


def oversized_request_id(prefix: bytes) -> int | None:
    """The rid of a request from the first bytes of its (oversized, skipped) frame, if
    they start like ``[kind, rid, ...]``."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(prefix)
    try:
        if unpacker.read_array_header() < 2 or type(unpacker.unpack()) is not str:
            return None
        rid = unpacker.unpack()
    except (msgpack.OutOfData, ValueError, msgpack.UnpackException, TypeError):
        return None
    return rid if type(rid) is int and 0 <= rid < RID_MAX else None
