"""The client protocol: the requests a client sends (built and checked field by field
here, by both sides) and the frames of the replies (their classes are in
:mod:`skueue.wire.client_replies`).

Frames are msgpack arrays:

    client -> daemon   ["hello-client", version, {options}]   first frame; options optional:
                         "request_timeout_ms": int > 0         time this client's requests out
                         "admin": bool                         an administrative connection
                         "token": str                          the client's credential
                       ["insert", rid, [value, ...], {queue}?]  enqueue / push
                       ["remove", rid, count, {queue}?]         dequeue / pop
                       ["ack", rid, [lease, ...]]               leased elements done with
                       ["nack", rid, [lease, ...]]              ... returned to their queue
                       ["extend", rid, [lease, ...], lease_ms]  ... held longer
                       ["keep", rid, [lease, ...]]              ... returned uncounted
                       ["create", rid, NAME, {settings}?]      make a queue with settings
                       ["configure", rid, NAME, {settings}]    change a queue's delivery limit
                       ["delete", rid, NAME]                   empty the queue, free its name
                       ["peek", rid, {queue}?]                 what a dequeue would return now
                       ["stats", rid]
                       ["leave", rid]                          hand off and exit
                       ["join", rid, "HOST:PORT"]              join that cluster (alone, empty)
                       ["remove-member", rid, [ID or ADDR, ...]]   forget dead members
    daemon -> client   ["welcome", process_id, structure, version, {limits}]
                       ["more", rid, results]                  part of a large reply, then:
                       ["done", rid, results]                  one result per operation
                       ["stats", rid, {...}]
                       ["error", rid | None, message, code]

``{queue}``, optional (version 2): ``{"queue": NAME, "stack": bool, "prefer_stack":
bool}``, each optional: the named queue (``skueue.core.ops.queue_name_problem`` says
which names are allowed; default ``"default"``) and whether it is a stack.  Without
``"stack"`` the operation takes the structure the name has (issue 28); a name that holds
no queue yet is made a stack if ``"prefer_stack"`` (a push's, a pop's), else with the
daemon's ``--structure``.  With ``"stack"`` an operation of the other structure on the
name is answered ``refused``.  A bad name is answered ``invalid`` and the connection
serves on.

A remove's map may also hold ``"wait_ms"`` (a blocking remove: wait up to that long for
an element, at most ``WAIT_MS_MAX``), ``"lease_ms"`` (a leased remove: the element is
held for this client for that long, at most ``LEASE_MS_MAX``, until it acks or nacks it)
and ``"max_deliveries"`` (with a lease: returned after that many deliveries, the element
goes to the queue's dead letters, ``NAME.dlq``; at most ``MAX_DELIVERIES_MAX``), and
the flags ``"fetch"`` (a consumer's fetch: up to ``count`` elements; the result holds
only the elements, the removes that found the queue empty are not counted as empty
results, and while it waits only one remove tries each cycle) and ``"look"`` (with a
lease: the elements are shown and returned with ``keep``; not counted as removed).

An insert's result is ``[ord, position]``; a remove's is ``[value | None, ord, position]``
(``None`` = the structure was empty), and a leased remove's that got an element is
``[value, ord, position, lease, deliveries, reason]``: the lease's id (for ack, nack and
extend, on this connection only), how often the element was delivered with a lease
(this time included) and why it last came back ("" the first time).  An ack's, nack's or
extend's result is one boolean per lease: False when the lease had ended already (acked,
or its element went back: expired, or returned when a connection closed).  Leases
belong to the connection: when it closes, their elements go back to their queues.
``rid`` is the client's request id, echoed back.

Version 2 (version 1 hellos are still served; their clients ignore what they do not
know): the hello's options, the welcome's limits (``value_bytes_max``,
``ops_per_request_max``, ``frame_bytes_max``), error codes, and replies in pieces.  A
reply whose frame would exceed ``frame_bytes_max`` goes as zero or more ``more`` frames
and one ``done``, each within the limit; the client joins their results in order.

Error codes: ``timeout`` (the outcome is unknown), ``unavailable`` (nothing was done;
retry later or elsewhere), ``too-large`` (over a limit), ``invalid`` (a bad field),
``refused`` (the anchor refused the request's queue: it is of the other structure, or a
new queue found the cluster full; nothing was done).  An
error whose rid is None ends the connection.

What ends a connection and what does not:

- A request over a limit (a value over ``value_bytes_max``, more operations than
  ``ops_per_request_max``) is answered alone, ``too-large``, and the connection serves on
  (:func:`parse_request` returns a :class:`~skueue.wire.client_replies.ErrorReply` for it).
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

import attrs
import msgpack

from skueue.core.errors import RemoteProtocolError
from skueue.core.ops import (
    DEFAULT_QUEUE,
    DELIVERY_LIMIT_MAX,
    PRIORITIES_MAX,
    QueueSettings,
    dead_letter_problem,
    queue_name_problem,
    settings_problem,
)
from skueue.wire.client_hello import (
    PROTOCOL_VERSION,
    SESSION_CHARS_MAX,
    TOKEN_CHARS_MAX,
    VERSIONS,
    ClientHello,
    parse_client_hello,
)
from skueue.wire.client_replies import INVALID, TOO_LARGE, Done, ErrorReply, More

# The hello is client_hello.py's; it is named here too, with the requests.
__all__ = [
    "PROTOCOL_VERSION", "SESSION_CHARS_MAX", "TOKEN_CHARS_MAX", "VERSIONS", "ClientHello",
    "parse_client_hello",
]  # fmt: skip
RID_MAX = 1 << 63
# Room around a reply's results: array headers, the kind, a rid of up to 9 bytes.
REPLY_OVERHEAD_BYTES = 32


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


def _queue_options(queue: str | None, stack: bool | None, **more: Any) -> list[Any]:
    """The optional map of a request's queue options: those that are not None (a flag
    only when set)."""
    options = {"queue": queue, "stack": stack, **more}
    given = {
        k: v for k, v in options.items() if v is not None and (v or k not in REMOVE_FLAGS)
    }
    return [given] if given else []


@attrs.frozen
class InsertRequest:
    rid: int
    values: list[bytes]
    queue: str | None = None  # None: the default queue
    stack: bool | None = None  # None: the queue's own structure (issue 28)
    priority: int | None = None  # None: 0, the most urgent level (skueue/core/levels.py)
    # Without ``stack``: what a name that holds no queue yet becomes (None: the daemon's).
    prefer_stack: bool | None = None

    def frame(self) -> list[Any]:
        options = _queue_options(
            self.queue, self.stack, priority=self.priority, prefer_stack=self.prefer_stack
        )
        return ["insert", self.rid, list(self.values), *options]


@attrs.frozen
class RemoveRequest:
    rid: int
    count: int
    queue: str | None = None
    stack: bool | None = None
    wait_ms: int | None = None  # a blocking remove: wait up to this long for an element
    lease_ms: int | None = None  # a leased remove: hold the elements this long
    max_deliveries: int | None = None  # with a lease: dead letters after this many
    prefer_stack: bool | None = None  # as an insert's
    # A consumer's fetch: up to ``count`` elements, the shortfall no empty results.
    fetch: bool = False
    look: bool = False  # with a lease: to show and return them, not a delivery

    def frame(self) -> list[Any]:
        options = _queue_options(
            self.queue, self.stack, wait_ms=self.wait_ms, lease_ms=self.lease_ms,
            max_deliveries=self.max_deliveries, prefer_stack=self.prefer_stack,
            fetch=self.fetch, look=self.look,
        )  # fmt: skip
        return ["remove", self.rid, self.count, *options]


WAIT_MS_MAX = 3_600_000
"""The longest a blocking remove may wait: an hour (a client that wants longer asks again)."""
LEASE_MS_MAX = 12 * 3_600_000
"""The longest lease, and the longest extension: 12 hours (SQS's longest visibility
timeout); a consumer that needs longer extends it again."""
MAX_DELIVERIES_MAX = DELIVERY_LIMIT_MAX
"""The largest delivery limit a leased remove or a queue may set."""
# A remove's integer options: name -> (least, most).
REMOVE_NUMBERS = {
    "wait_ms": (1, WAIT_MS_MAX),
    "lease_ms": (1, LEASE_MS_MAX),
    "max_deliveries": (1, MAX_DELIVERIES_MAX),
}


@attrs.frozen
class LeaseRequest:
    """``ack``, ``nack`` or ``extend`` (then ``lease_ms``) of leases of this connection."""

    kind: str
    rid: int
    leases: list[int]
    lease_ms: int | None = None

    def frame(self) -> list[Any]:
        extend = [] if self.lease_ms is None else [self.lease_ms]
        return [self.kind, self.rid, list(self.leases), *extend]


LEASE_KINDS = ("ack", "nack", "extend", "keep")
"""``keep`` returns elements as they were, not as a delivery (``skueue dlq``'s look)."""


REMOVE_FLAGS = ("fetch", "look")
"""A remove's flags (true or false): a consumer's fetch, a look (``RemoveRequest``)."""


def _parse_queue(kind: str, rid: int, frame: list[Any]) -> dict[str, Any] | ErrorReply:
    """The optional queue map of an insert or remove (its 4th field): the request's
    fields it sets (but the numbers, checked by :func:`_remove_numbers`)."""
    if len(frame) < 4:
        return {}
    options = frame[3]
    allowed = {"queue", "stack", "prefer_stack"} | (
        {*REMOVE_NUMBERS, *REMOVE_FLAGS} if kind == "remove" else {"priority"}
    )
    if not isinstance(options, dict) or not set(options) <= allowed:
        names = ", ".join(f'"{a}"' for a in sorted(allowed))
        raise RemoteProtocolError(f"{kind}: the 4th field is a map of {names}")
    out: dict[str, Any] = {}
    for name in ("stack", "prefer_stack", *REMOVE_FLAGS):
        value = options.get(name)
        if value is not None and type(value) is not bool:
            raise RemoteProtocolError(f"{kind}: {name} must be true or false")
        if value is not None:
            out[name] = value
    queue = options.get("queue")
    if queue is not None:
        problem = queue_name_problem(queue)
        if problem is not None:
            return ErrorReply(rid, f"{kind}: {problem}", INVALID)
        out["queue"] = queue
    return out


@attrs.frozen
class CreateRequest:
    """Make a named queue with its settings, or find it made with them: ``{"stack":
    bool, "max_deliveries": int}``, both optional (default: the daemon's structure, no
    delivery limit).  The result is ``[created]``: True if this request made it, False if
    it was made already with these settings; other settings are answered ``refused``."""

    rid: int
    queue: str
    stack: bool | None = None
    max_deliveries: int | None = None
    priorities: int | None = None  # priority levels (None: 1, none)

    def frame(self) -> list[Any]:
        settings = {
            "stack": self.stack,
            "max_deliveries": self.max_deliveries,
            "priorities": self.priorities,
        }
        options = {k: v for k, v in settings.items() if v is not None}
        return ["create", self.rid, self.queue, *([options] if options else [])]


@attrs.frozen
class ConfigureRequest:
    """Change the settings of an existing queue or stack that may change while it lives:
    ``{"max_deliveries": int}`` (0: none).  Ordered like a create; the result is
    ``[structure, max_deliveries, priorities]``, the queue's settings now.  A name that
    holds no queue is answered ``refused``."""

    rid: int
    queue: str
    max_deliveries: int

    def frame(self) -> list[Any]:
        return ["configure", self.rid, self.queue, {"max_deliveries": self.max_deliveries}]


@attrs.frozen
class PeekRequest:
    """The element a dequeue of the queue would return now, left in it (issue 14).  The
    result is ``[value | None, ord, position]``, as a remove's.  A queue's only: on a
    stack's name the anchor refuses it."""

    rid: int
    queue: str | None = None

    def frame(self) -> list[Any]:
        return ["peek", self.rid, *_queue_options(self.queue, None)]


@attrs.frozen
class DeleteRequest:
    """Delete a named queue (or stack): its elements are removed, its name is free.  The
    result is ``[removed, ord]``: how many elements it held, and the delete's rank."""

    rid: int
    queue: str

    def frame(self) -> list[Any]:
        return ["delete", self.rid, self.queue]


@attrs.frozen
class StatsRequest:
    rid: int

    def frame(self) -> list[Any]:
        return ["stats", self.rid]


@attrs.frozen
class LeaveRequest:
    rid: int

    def frame(self) -> list[Any]:
        return ["leave", self.rid]


@attrs.frozen
class JoinClusterRequest:
    rid: int
    seed: str

    def frame(self) -> list[Any]:
        return ["join", self.rid, self.seed]


@attrs.frozen
class RemoveMemberRequest:
    """Make the cluster forget members that will never come back (``skueue
    remove-member``): each a process id or the address it listens at.  The result is one
    map: the ids removed and what they held (runtime/member_removal.py)."""

    rid: int
    members: tuple[str, ...]

    def frame(self) -> list[Any]:
        return ["remove-member", self.rid, list(self.members)]


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
# With client tokens, only an admin token's connections may send these.
ADMIN_ROLE_REQUESTS = (DeleteRequest, LeaveRequest, JoinClusterRequest, RemoveMemberRequest)
ADMIN_REQUESTS = (StatsRequest, LeaveRequest, JoinClusterRequest, RemoveMemberRequest)
# Members one remove-member request may name (a few dead ones that would each stop the
# check of the others: they go together).
REMOVE_MEMBERS_MAX = 16
MEMBER_NAME_CHARS_MAX = 256  # a process id or an address


def request_id(frame: Any) -> int | None:
    """The rid of a frame if it has a usable one, to address an error reply."""
    if isinstance(frame, list) and len(frame) > 1 and type(frame[1]) is int:
        rid: int = frame[1]
        return rid
    return None


def parse_request(frame: Any, limits: RequestLimits) -> ClientRequest | ErrorReply:
    """The request in ``frame``, or the :class:`~skueue.wire.client_replies.ErrorReply`
    that answers one over a limit; anything malformed raises
    :class:`RemoteProtocolError` (the connection ends)."""
    if not isinstance(frame, list) or not frame or type(frame[0]) is not str:
        raise RemoteProtocolError("request: expected [kind, rid, ...]")
    kind = frame[0]
    if len(frame) < 2 or type(frame[1]) is not int or not 0 <= frame[1] < RID_MAX:
        raise RemoteProtocolError(f"{kind!r:.30}: the request id must be a non-negative integer")
    rid = frame[1]
    if kind in ("insert", "remove") and len(frame) in (3, 4):
        target = _parse_queue(kind, rid, frame)
        if isinstance(target, ErrorReply):
            return target
        request = _parse_operations(kind, rid, frame[2], limits)
        if isinstance(request, ErrorReply):
            return request
        if target:
            request = attrs.evolve(request, **target)
        if isinstance(request, InsertRequest) and len(frame) == 4 and "priority" in frame[3]:
            priority = frame[3]["priority"]
            if type(priority) is not int or not 0 <= priority < PRIORITIES_MAX:
                why = f"insert: priority is an integer from 0 (most urgent) to {PRIORITIES_MAX - 1}"
                return ErrorReply(rid, why, INVALID)
            request = attrs.evolve(request, priority=priority)
        if isinstance(request, RemoveRequest) and len(frame) == 4:
            return _remove_numbers(request, frame[3])
        return request
    if kind in LEASE_KINDS and len(frame) == (4 if kind == "extend" else 3):
        return _parse_leases(kind, rid, frame, limits)
    if kind == "create" and len(frame) in (3, 4):
        return _parse_create(rid, frame)
    if kind == "configure" and len(frame) == 4:
        return _parse_configure(rid, frame)
    if kind == "peek" and len(frame) in (2, 3):
        return _parse_peek(rid, frame)
    if kind == "delete" and len(frame) == 3:
        problem = queue_name_problem(frame[2])
        if problem is not None:
            return ErrorReply(rid, f"delete: {problem}", INVALID)
        return DeleteRequest(rid, frame[2])
    if kind == "stats" and len(frame) == 2:
        return StatsRequest(rid)
    if kind == "leave" and len(frame) == 2:
        return LeaveRequest(rid)
    if kind == "join" and len(frame) == 3:
        if type(frame[2]) is not str or not 0 < len(frame[2]) <= 256:
            raise RemoteProtocolError("join: expected the seed's address as a string")
        return JoinClusterRequest(rid, frame[2])
    if kind == "remove-member" and len(frame) == 3:
        return _parse_remove_member(rid, frame[2])
    raise RemoteProtocolError(f"unknown request {kind!r:.30} with {len(frame)} fields")


def _parse_remove_member(rid: int, members: Any) -> RemoveMemberRequest | ErrorReply:
    if not isinstance(members, list) or not all(
        type(m) is str and 0 < len(m) <= MEMBER_NAME_CHARS_MAX for m in members
    ):
        raise RemoteProtocolError(
            f"remove-member: expected a list of ids or addresses (1 to "
            f"{MEMBER_NAME_CHARS_MAX} characters each)"
        )
    if not 0 < len(members) <= REMOVE_MEMBERS_MAX:
        why = f"remove-member: name 1 to {REMOVE_MEMBERS_MAX} members (REMOVE_MEMBERS_MAX)"
        return ErrorReply(rid, why, INVALID)
    return RemoveMemberRequest(rid, tuple(dict.fromkeys(members)))


def _parse_create(rid: int, frame: list[Any]) -> CreateRequest | ErrorReply:
    problem = queue_name_problem(frame[2])
    if problem is not None:
        return ErrorReply(rid, f"create: {problem}", INVALID)
    options = frame[3] if len(frame) == 4 else {}
    names = {"stack", "max_deliveries", "priorities"}
    if not isinstance(options, dict) or not set(options) <= names:
        raise RemoteProtocolError(
            'create: the 4th field is a map of "max_deliveries", "priorities", "stack"'
        )
    stack, limit, levels = (options.get(n) for n in ("stack", "max_deliveries", "priorities"))
    if stack is not None and type(stack) is not bool:
        raise RemoteProtocolError("create: stack must be true or false")
    if any(x is not None and type(x) is not int for x in (limit, levels)):
        return ErrorReply(rid, "create: max_deliveries and priorities are integers", INVALID)
    settings = QueueSettings(bool(stack), limit or 0, 1 if levels is None else levels)
    problem = settings_problem(frame[2], settings)
    if problem is not None:
        return ErrorReply(rid, f"create: {problem}", INVALID)
    return CreateRequest(rid, frame[2], stack, limit, levels)


def _parse_configure(rid: int, frame: list[Any]) -> ConfigureRequest | ErrorReply:
    problem = queue_name_problem(frame[2])
    if problem is not None:
        return ErrorReply(rid, f"configure: {problem}", INVALID)
    options = frame[3]
    if not isinstance(options, dict) or set(options) != {"max_deliveries"}:
        raise RemoteProtocolError('configure: the 4th field is a map of "max_deliveries"')
    limit = options["max_deliveries"]
    if type(limit) is not int:
        return ErrorReply(rid, "configure: max_deliveries is an integer", INVALID)
    problem = settings_problem(frame[2], QueueSettings(max_deliveries=limit))
    if problem is not None:
        return ErrorReply(rid, f"configure: {problem}", INVALID)
    return ConfigureRequest(rid, frame[2], limit)


def _parse_peek(rid: int, frame: list[Any]) -> PeekRequest | ErrorReply:
    options = frame[2] if len(frame) == 3 else {}
    if not isinstance(options, dict) or not set(options) <= {"queue"}:
        raise RemoteProtocolError('peek: the 3rd field is a map of "queue"')
    queue = options.get("queue")
    problem = None if queue is None else queue_name_problem(queue)
    if problem is not None:
        return ErrorReply(rid, f"peek: {problem}", INVALID)
    return PeekRequest(rid, queue)


def _remove_numbers(request: RemoveRequest, options: dict[str, Any]) -> RemoveRequest | ErrorReply:
    """A remove's wait, lease and delivery limit, each an integer in its range."""
    numbers = {}
    for name, (least, most) in REMOVE_NUMBERS.items():
        if name in options:
            value = options[name]
            if type(value) is not int or not least <= value <= most:
                message = f"remove: {name} must be an integer from {least} to {most}"
                return ErrorReply(request.rid, message, INVALID)
            numbers[name] = value
    if "max_deliveries" in numbers and "lease_ms" not in numbers:
        return ErrorReply(request.rid, "remove: max_deliveries needs lease_ms", INVALID)
    if request.look and "lease_ms" not in numbers:  # a look gives its elements back
        return ErrorReply(request.rid, "remove: look needs lease_ms", INVALID)
    problem = dead_letter_problem(request.queue or DEFAULT_QUEUE)
    if "max_deliveries" in numbers and problem:
        return ErrorReply(request.rid, f"remove: {problem}", INVALID)
    return attrs.evolve(request, **numbers) if numbers else request  # type: ignore[arg-type]


def _parse_leases(
    kind: str, rid: int, frame: list[Any], limits: RequestLimits
) -> LeaseRequest | ErrorReply:
    leases = frame[2]
    if (
        not isinstance(leases, list)
        or not leases
        or any(type(x) is not int or not 0 <= x < RID_MAX for x in leases)
    ):
        raise RemoteProtocolError(f"{kind}: expected a non-empty list of lease ids")
    if len(leases) > limits.ops_per_request_max:
        message = f"{kind}: {len(leases)} leases exceed the limit of {limits.ops_per_request_max}"
        return ErrorReply(rid, message, TOO_LARGE)
    lease_ms = None
    if kind == "extend":
        lease_ms = frame[3]
        if type(lease_ms) is not int or not 0 < lease_ms <= LEASE_MS_MAX:
            return ErrorReply(
                rid, f"extend: lease_ms must be an integer from 1 to {LEASE_MS_MAX}", INVALID
            )
    return LeaseRequest(kind, rid, leases, lease_ms)


def _parse_operations(
    kind: str, rid: int, arg: Any, limits: RequestLimits
) -> InsertRequest | RemoveRequest | ErrorReply:
    return _parse_insert(rid, arg, limits) if kind == "insert" else _parse_remove(rid, arg, limits)


def _parse_insert(rid: int, values: Any, limits: RequestLimits) -> InsertRequest | ErrorReply:
    if not isinstance(values, list) or not values:
        raise RemoteProtocolError("insert: expected a non-empty list of values")
    for v in values:
        if type(v) is not bytes:
            raise RemoteProtocolError(f"insert: values must be bytes, got {type(v).__name__}")
    if len(values) > limits.ops_per_request_max:
        return ErrorReply(
            rid,
            f"insert: {len(values)} values exceed the limit of {limits.ops_per_request_max}",
            TOO_LARGE,
        )
    largest = max(len(v) for v in values)
    if largest > limits.value_bytes_max:
        return ErrorReply(
            rid,
            f"insert: a value of {largest} bytes exceeds the limit of {limits.value_bytes_max}",
            TOO_LARGE,
        )
    return InsertRequest(rid, values)


def _parse_remove(rid: int, count: Any, limits: RequestLimits) -> RemoveRequest | ErrorReply:
    if type(count) is not int or count < 1:
        raise RemoteProtocolError(
            f"remove: count must be an integer from 1 to {limits.ops_per_request_max}"
        )
    if count > limits.ops_per_request_max:
        return ErrorReply(
            rid,
            f"remove: a count of {count} exceeds the limit of {limits.ops_per_request_max}",
            TOO_LARGE,
        )
    return RemoveRequest(rid, count)


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


def reply_frames(reply: Done, frame_bytes_max: int) -> list[More | Done]:
    """A ``done`` reply as zero or more ``more`` replies and one ``done``, each within
    ``frame_bytes_max`` (a single result larger than that goes alone)."""
    budget = frame_bytes_max - REPLY_OVERHEAD_BYTES
    parts: list[list[Any]] = [[]]
    size = 0
    for result in reply.results:
        n = len(msgpack.packb(result, use_bin_type=True))
        if parts[-1] and size + n > budget:
            parts.append([])
            size = 0
        parts[-1].append(result)
        size += n
    return [*(More(reply.rid, p) for p in parts[:-1]), Done(reply.rid, parts[-1])]


def reply_elements(reply: object) -> int:
    """Removed elements a reply carries (a remove's results are ``[value, ord, pos]``)."""
    if not isinstance(reply, More | Done):
        return 0
    return sum(
        1 for r in reply.results if isinstance(r, list) and len(r) in (3, 6) and r[0] is not None
    )
