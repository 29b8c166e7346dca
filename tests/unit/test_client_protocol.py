"""Client requests, checked field by field against the limits (no sockets).

The requests, replies and results are the classes of ``skueue.host``; their codec is
derived from them (``skueue.wire.client_codec``), and these tests hold the derived codec
to the protocol's rules: what is answered alone, and what ends the connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skueue.core.errors import RemoteProtocolError
from skueue.core.messages.field_types import QueueName, Range
from skueue.host.replies import Done, ErrorReply, More, StatsReply, Welcome
from skueue.host.requests import (
    RID_MAX,
    ConfigureRequest,
    CreateRequest,
    DeleteRequest,
    InsertRequest,
    JoinClusterRequest,
    LeaseRequest,
    LeaveRequest,
    PeekRequest,
    RemoveMemberRequest,
    RemoveRequest,
    StatsRequest,
)
from skueue.host.results import (
    Configured,
    Created,
    Deleted,
    Inserted,
    LeaseAnswer,
    LeaseGrant,
    MembersRemoved,
    Removed,
    RemovedMember,
)
from skueue.runtime.limits import Limits
from skueue.wire.client_codec import (
    RequestCodec,
    decode_reply,
    decode_request,
    encode_reply,
    encode_request,
    reply_elements,
    reply_frames,
)
from skueue.wire.client_hello import PROTOCOL_VERSION, ClientHello, parse_client_hello
from skueue.wire.client_protocol import limits_for_clients, oversized_request_id, request_id

parse_request = decode_request
LIMITS = Limits(ops_per_request_max=3, value_bytes_max=4)
INSERT_MAP = 'the 4th field is a map of "prefer_stack", "priority", "queue", "stack"'
REMOVE_MAP = '"lease_ms", "look", "max_deliveries", "prefer_stack", "queue", "stack"'


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (["insert", 0, [b"a"]], InsertRequest(0, (b"a",))),
        (
            ["insert", RID_MAX - 1, [b"", b"abcd", b"xy"]],
            InsertRequest(RID_MAX - 1, (b"", b"abcd", b"xy")),
        ),
        (["remove", 5, 1], RemoveRequest(5, 1)),
        (["remove", 5, 3], RemoveRequest(5, 3)),
        (["insert", 0, [b"a"], {"queue": "jobs"}], InsertRequest(0, (b"a",), "jobs")),
        (["insert", 0, [b"a"], {"stack": True}], InsertRequest(0, (b"a",), None, True)),
        (["remove", 5, 2, {"queue": "u:1", "stack": False}], RemoveRequest(5, 2, "u:1", False)),
        (["remove", 5, 2, {}], RemoveRequest(5, 2)),
        (["remove", 5, 1, {"wait_ms": 2500}], RemoveRequest(5, 1, wait_ms=2500)),
        (["stats", 6], StatsRequest(6)),
    ],
)
def test_valid_requests_parse(frame: list[Any], expected: Any) -> None:
    assert parse_request(frame, LIMITS) == expected


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (None, "expected \\[kind, rid"),
        ([], "expected \\[kind, rid"),
        ({"insert": 1}, "expected \\[kind, rid"),
        ("insert", "expected \\[kind, rid"),
        ([b"insert", 1, [b"a"]], "expected \\[kind, rid"),
        ([1, 1, [b"a"]], "expected \\[kind, rid"),
        (["insert"], "request id"),
        (["insert", -1, [b"a"]], "request id"),
        (["insert", RID_MAX, [b"a"]], "request id"),
        (["insert", "1", [b"a"]], "request id"),
        (["insert", 1.0, [b"a"]], "request id"),
        (["insert", True, [b"a"]], "request id"),
        (["insert", None, [b"a"]], "request id"),
        (["insert", 1, []], "non-empty list"),
        (["insert", 1, b"a"], "non-empty list"),
        (["insert", 1, {"a": 1}], "non-empty list"),
        (["insert", 1, ["a"]], "values must be bytes"),
        (["insert", 1, [b"a", 1]], "values must be bytes"),
        (["insert", 1, [bytearray(b"a")]], "values must be bytes"),
        (["insert", 1, [[b"a"]]], "values must be bytes"),
        (["insert", 1], "unknown request 'insert' with 2 fields"),
        (["insert", 1, [b"a"], 0], INSERT_MAP),
        (["insert", 1, [b"a"], {"name": "q"}], INSERT_MAP),
        (["insert", 1, [b"a"], {"wait_ms": 5}], INSERT_MAP),
        (["remove", 1, 1, {"name": "q"}], REMOVE_MAP),
        (["lease", 1, "ack", []], "non-empty list of leases"),
        (["lease", 1, "ack", 5], "non-empty list of leases"),
        (["lease", 1, "nack", [-1]], "leases must be a non-negative integer"),
        (["lease", 1, "keep", [True]], "leases must be a non-negative integer"),
        (["lease", 1, "drop", [1]], "how must be one of 'ack', 'nack', 'extend', 'keep'"),
        (["lease", 1, "ack"], "unknown request 'lease' with 3 fields"),
        (["lease", 1, "ack", [1], {}, 5], "unknown request 'lease' with 6 fields"),
        (["lease", 1, "extend", [1], 5], 'the 5th field is a map of "lease_ms"'),
        (["ack", 1, [1]], "unknown request 'ack'"),  # version 2's kinds are gone
        (["insert", 1, [b"a"], {"stack": 1}], "stack must be true or false"),
        (["remove", 1, 1, {"stack": "yes"}], "stack must be true or false"),
        (["insert", 1, [b"a"], {}, 0], "unknown request 'insert' with 5 fields"),
        (["remove", 1, 0], "count must be an integer from 1 to 3"),
        (["remove", 1, -1], "count must be"),
        (["remove", 1, "2"], "count must be"),
        (["remove", 1, 2.0], "count must be"),
        (["remove", 1, True], "count must be"),
        (["remove", 1, None], "count must be"),
        (["remove", 1], "unknown request 'remove' with 2 fields"),
        (["stats", 1, 2], "unknown request 'stats' with 3 fields"),
        (["dequeue", 1, 1], "unknown request 'dequeue'"),
        (["hello-client", 1], "unknown request 'hello-client'"),
        (["x" * 1000, 1], "unknown request"),
    ],
)
def test_invalid_requests_are_remote_protocol_errors(frame: Any, message: str) -> None:
    with pytest.raises(RemoteProtocolError, match=message) as raised:
        parse_request(frame, LIMITS)
    assert len(str(raised.value)) < 200  # one line for the log, however big the input


def test_the_default_limits_hold_a_full_request_and_no_more() -> None:
    limits = Limits()
    n, size = limits.ops_per_request_max, limits.value_bytes_max
    assert parse_request(["insert", 1, [b"v"] * n], limits) == InsertRequest(1, (b"v",) * n)
    assert parse_request(["insert", 1, [b"v" * size]], limits) == InsertRequest(1, (b"v" * size,))
    assert isinstance(parse_request(["insert", 1, [b"v"] * (n + 1)], limits), ErrorReply)
    assert isinstance(parse_request(["insert", 1, [b"v" * (size + 1)]], limits), ErrorReply)
    assert isinstance(parse_request(["remove", 1, n + 1], limits), ErrorReply)
    assert parse_request(["remove", 1, n], limits) == RemoveRequest(1, n)


@pytest.mark.parametrize(
    ("frame", "rid"),
    [
        (["insert", 7, "garbage"], 7),
        (["remove", 0], 0),
        (["x", -3], -3),
        (["insert", "7"], None),
        (["insert", True], None),
        (["insert"], None),
        ([], None),
        ("insert", None),
        ({"rid": 1}, None),
        (None, None),
    ],
)
def test_request_id_finds_a_usable_rid_for_the_error_reply(frame: Any, rid: int | None) -> None:
    assert request_id(frame) == rid


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["insert", "remove", "stats"])
    | st.binary(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)
requestish = st.tuples(st.sampled_from(["insert", "remove", "stats"]), values, values).map(
    list
) | st.tuples(st.sampled_from(["insert", "remove", "stats"]), values).map(list)


@given(values | requestish)
def test_anything_parses_or_raises_remote_protocol_error(frame: Any) -> None:
    try:
        blob = msgpack.packb(frame, use_bin_type=True)
    except (OverflowError, ValueError, TypeError):
        return
    frame = msgpack.unpackb(blob, raw=False, strict_map_key=False)
    try:
        request = parse_request(frame, LIMITS)
    except RemoteProtocolError:
        return
    # What parses is well formed, exactly as a correct client would send it.
    assert type(request.rid) is int and 0 <= request.rid < RID_MAX
    match request:
        case InsertRequest(values=vals):
            assert frame == ["insert", request.rid, list(vals)]
            assert 1 <= len(vals) <= LIMITS.ops_per_request_max
            assert all(type(v) is bytes and len(v) <= LIMITS.value_bytes_max for v in vals)
        case RemoveRequest(count=count):
            assert frame == ["remove", request.rid, count]
            assert type(count) is int and 1 <= count <= LIMITS.ops_per_request_max
        case StatsRequest():
            assert frame == ["stats", request.rid]


# -- requests over a limit are refused alone (issue 8, item 16) ------------------------------


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (["insert", 1, [b"a"] * 4], "4 values exceed the limit of 3"),
        (["insert", 2, [b"ok", b"abcde"]], "a value of 5 bytes exceeds the limit of 4"),
        (["remove", 3, 4], "a count of 4 exceeds the limit of 3"),
        (["remove", 4, 1 << 40], "exceeds the limit of 3"),
    ],
)
def test_requests_over_a_limit_are_refused_with_their_rid(frame: list[Any], message: str) -> None:
    refused = parse_request(frame, LIMITS)
    assert isinstance(refused, ErrorReply)
    assert encode_reply(refused)[:2] == ["error", frame[1]]
    assert refused.code == "too-large" and message in refused.message


def test_a_wrong_type_is_invalid_even_over_the_count_limit() -> None:
    """Garbage ends the connection whatever else is wrong with the request."""
    with pytest.raises(RemoteProtocolError, match="values must be bytes"):
        parse_request(["insert", 1, [b"a", b"b", b"c", "d"]], LIMITS)


# -- the hello (protocol version 3) ----------------------------------------------------------


def test_the_protocol_version_is_3() -> None:
    """Version 3 (issue 29): requests, replies and results declared once, their codec
    derived; the frames changed, so older hellos are refused in one line."""
    assert PROTOCOL_VERSION == 3


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (["hello-client", 3], ClientHello(3)),
        (["hello-client", 3, {}], ClientHello(3)),
        (["hello-client", 3, {"request_timeout_ms": 1500}], ClientHello(3, 1.5)),
        (["hello-client", 3, {"admin": True}], ClientHello(3, None, True)),
        (
            ["hello-client", 3, {"request_timeout_ms": 20, "admin": False, "future": 1}],
            ClientHello(3, 0.02, False),
        ),
    ],
)
def test_hellos_of_version_3_are_accepted(frame: list[Any], expected: ClientHello) -> None:
    assert parse_client_hello(frame) == expected


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (["hello-client", 2], "version 2 is not supported; this daemon speaks versions 3:"),
        (["hello-client", 1], "version 1 is not supported"),
        (["hello-client", 4], "version 4 is not supported"),
        (["hello-client", 0], "version 0 is not supported"),
        (["hello-client", "3"], "version '3' is not supported"),
        (["hello-client", True], "is not supported"),
        (["hello-client"], "expected"),
        (["hello-client", 3, {}, 4], "expected"),
        (["hello-client", 3, []], "options must be a map"),
        (["hello-client", 3, {"request_timeout_ms": 0}], "positive integer"),
        (["hello-client", 3, {"request_timeout_ms": 1.5}], "positive integer"),
        (["hello-client", 3, {"admin": 1}], "admin must be true or false"),
    ],
)
def test_bad_hellos_are_refused_in_one_line(frame: list[Any], message: str) -> None:
    with pytest.raises(RemoteProtocolError, match=message) as raised:
        parse_client_hello(frame)
    assert "\n" not in str(raised.value) and len(str(raised.value)) < 200


def test_the_welcome_carries_the_limits_a_client_checks() -> None:
    limits = Limits(value_bytes_max=10, ops_per_request_max=20, frame_bytes_max=30)
    assert limits_for_clients(limits) == {
        "value_bytes_max": 10,
        "ops_per_request_max": 20,
        "frame_bytes_max": 30,
    }


# -- oversized frames and large replies --------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "rid"),
    [
        (["insert", 7, [b"x" * 100]], 7),
        (["remove", RID_MAX - 1, 5], RID_MAX - 1),
        (["insert", -1, [b"x" * 100]], None),
        (["insert", "7", [b"x"]], None),
        ([7, 7, [b"x"]], None),
        (["x" * 100, 7], None),
        ({"insert": 7}, None),
        (["insert"], None),
    ],
)
def test_the_rid_of_an_oversized_frame_comes_from_its_first_bytes(frame: Any, rid: Any) -> None:
    payload = msgpack.packb(frame, use_bin_type=True)
    assert oversized_request_id(payload[:64]) == rid


@given(st.binary(max_size=64))
def test_any_prefix_gives_a_rid_or_none(prefix: bytes) -> None:
    rid = oversized_request_id(prefix)
    assert rid is None or 0 <= rid < RID_MAX


@given(st.lists(st.binary(max_size=300), max_size=60), st.integers(400, 3000))
def test_a_reply_in_pieces_keeps_every_result_in_order_within_the_limit(
    values: list[bytes], limit: int
) -> None:
    results = tuple(Removed(v, i, i * 3) for i, v in enumerate(values))
    pieces = reply_frames(Done(9, results), limit)
    frames = [encode_reply(reply) for reply in pieces]
    assert [f[0] for f in frames] == ["more"] * (len(frames) - 1) + ["done"]
    assert all(f[1] == 9 for f in frames)
    assert tuple(r for f in frames for r in decode_reply(f).results) == results  # type: ignore[union-attr]
    assert all(len(msgpack.packb(f, use_bin_type=True)) <= limit for f in frames)


def test_reply_elements_counts_removed_values_only() -> None:
    removes = (Removed(b"a", 1, 2), Removed(None, 3, None), Removed(b"", 4, 5))
    assert reply_elements(Done(1, removes)) == 2
    assert reply_elements(More(1, (Removed(b"a", 1, 2, LeaseGrant(1, 1, "")),))) == 1
    assert reply_elements(Done(1, (Inserted(1, 2), Inserted(3, 4)))) == 0  # an insert's
    assert reply_elements(ErrorReply(1, "no", "timeout")) == 0
    assert reply_elements(StatsReply(1, {"removed": 3})) == 0


@pytest.mark.parametrize(
    "reply",
    [
        Welcome("p", "queue", 3, {"frame_bytes_max": 100}),
        Welcome("p", "stack", 3),
        More(3, (Removed(b"a", 1, 2),)),
        Done(4, ()),
        Done(4, (Removed(None, 0, None), Removed(b"x", 7, 3, LeaseGrant(9, 2, "nack")))),
        Done(4, (Inserted(1, 2), Inserted(3, None))),
        Done(4, (Created(True),)),
        Done(4, (Configured("stack", 0, 1),)),
        Done(4, (Deleted(3, 17),)),
        Done(4, (LeaseAnswer(True), LeaseAnswer(False))),
        Done(4, (MembersRemoved((RemovedMember("p9", "10.0.0.9:7400", "nothing"),), ("p8",)),)),
        StatsReply(5, {"processes": 1}),
        ErrorReply(6, "no", "timeout"),
        ErrorReply(None, "bye", None),
    ],
)
def test_every_reply_reads_back_from_its_frame(reply: Any) -> None:
    frame = encode_reply(reply)
    assert decode_reply(msgpack.unpackb(msgpack.packb(frame), raw=False)) == reply


def test_results_travel_as_their_kind_then_their_fields() -> None:
    """The wire form of a reply's results (skueue/wire/client_protocol.py): the kind
    once, then each result's fields, without its trailing fields at their defaults."""
    done = Done(4, (Removed(b"a", 1, 2), Removed(b"b", 3, 4, LeaseGrant(9, 1, ""))))
    assert encode_reply(done) == ["done", 4, ["removed", [b"a", 1, 2], [b"b", 3, 4, [9, 1, ""]]]]
    assert encode_reply(Done(5, (Inserted(6, 7),))) == ["done", 5, ["inserted", [6, 7]]]
    assert encode_reply(ErrorReply(None, "bye")) == ["error", None, "bye"]


@dataclass(frozen=True, slots=True)
class PingRequest:
    """A request that is no part of the protocol: written here as a class, nothing else."""

    KIND: ClassVar[str] = "ping"
    rid: int
    times: Annotated[int, Range(1, 10)]
    queue: QueueName | None = None
    loud: bool = False


def test_a_requests_codec_is_derived_from_its_class_alone() -> None:
    """Declared once: the codec of a new request class follows from its fields (their
    order, defaults and annotations), with no line of wire code written for it."""
    codec = RequestCodec.of(PingRequest)
    ping = PingRequest(3, 2, "jobs", loud=True)
    frame = codec.encode(ping)
    assert frame == ["ping", 3, 2, {"queue": "jobs", "loud": True}]
    assert codec.encode(PingRequest(3, 2)) == ["ping", 3, 2]  # defaults left out
    assert codec.decode(frame, LIMITS) == ping
    with pytest.raises(RemoteProtocolError, match="times must be an integer from 1 to 9"):
        codec.decode(["ping", 3, 10], LIMITS)  # out of its range: garbage
    refused = codec.decode(["ping", 3, 2, {"queue": ""}], LIMITS)
    assert isinstance(refused, ErrorReply) and refused.code == "invalid"  # a name: answered
    with pytest.raises(RemoteProtocolError, match="a map of"):
        codec.decode(["ping", 3, 2, {"volume": 11}], LIMITS)


@pytest.mark.parametrize(
    "frame",
    [
        None,
        [],
        ["done", 1],
        ["done", "1", []],
        ["done", 1, {}],
        ["stats", 1, []],
        ["more", None, []],
        ["error", "x", "m"],
        ["bogus", 1, []],
        [1, 1, []],
        ["done", 1, ["removed", [b"a", 1]]],
        ["done", 1, ["removed", [b"a", 1, 2, 3, 4]]],
        ["done", 1, ["gone", [1, 2]]],
        ["done", 1, [[1, 2]]],  # version 2's results: no kind
        ["done", 1, ["inserted", [-5, 2]]],
        ["done", 1, ["configured", ["heap", 0, 1]]],
        ["welcome", "p", "queue"],
    ],
)
def test_a_malformed_reply_is_one_error_type(frame: object) -> None:
    with pytest.raises(RemoteProtocolError):
        decode_reply(frame)


@pytest.mark.parametrize(
    "request_",
    [
        InsertRequest(1, (b"a", b"")),
        RemoveRequest(2, 3),
        StatsRequest(3),
        LeaveRequest(4),
        JoinClusterRequest(5, "127.0.0.1:7000"),
        RemoveMemberRequest(6, ("p1", "10.0.0.1:7400")),
        CreateRequest(7, "jobs", True, 3, None),
        DeleteRequest(8, "jobs"),
        LeaseRequest(9, "extend", (1, 2), 5_000),
    ],
)
def test_every_request_the_client_builds_parses_back_on_the_daemon(request_: Any) -> None:
    frame = msgpack.unpackb(msgpack.packb(encode_request(request_)), raw=False)
    assert parse_request(frame, LIMITS) == request_


@pytest.mark.parametrize(
    "hello",
    [ClientHello(PROTOCOL_VERSION), ClientHello(PROTOCOL_VERSION, 1.5, True)],
)
def test_the_clients_hello_parses_back_on_the_daemon(hello: ClientHello) -> None:
    frame = msgpack.unpackb(msgpack.packb(hello.frame()), raw=False)
    assert parse_client_hello(frame) == hello


@pytest.mark.parametrize("name", ["", "no spaces", "x" * 129, 7, "ü"])
def test_a_bad_queue_name_is_answered_and_the_connection_serves_on(name: Any) -> None:
    for frame in (["insert", 9, [b"a"], {"queue": name}], ["remove", 9, 1, {"queue": name}]):
        reply = parse_request(frame, LIMITS)
        assert isinstance(reply, ErrorReply) and reply.rid == 9 and reply.code == "invalid"
        assert "queue name" in reply.message


def test_requests_with_a_queue_round_trip() -> None:
    for request in (
        InsertRequest(3, (b"x", b"y"), "jobs", True),
        InsertRequest(3, (b"x",), None, False),
        RemoveRequest(4, 2, "mail.eu", None),
        RemoveRequest(4, 1, "mail.eu", None, 30_000),
        RemoveRequest(4, 1, wait_ms=1),
        RemoveRequest(4, 2),
    ):
        assert parse_request(encode_request(request), LIMITS) == request
    assert encode_request(InsertRequest(3, (b"x",))) == ["insert", 3, [b"x"]]  # no options


@pytest.mark.parametrize("wait_ms", [0, -1, 3_600_001, 1.5, True, "5"])
def test_a_bad_wait_is_answered_and_the_connection_serves_on(wait_ms: Any) -> None:
    reply = parse_request(["remove", 9, 1, {"wait_ms": wait_ms}], LIMITS)
    assert isinstance(reply, ErrorReply) and reply.code == "invalid" and "wait_ms" in reply.message


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (["remove", 1, 1, {"lease_ms": 0}], "lease_ms must be an integer from 1 to"),
        (["remove", 1, 1, {"lease_ms": 12 * 3_600_000 + 1}], "lease_ms must be"),
        (["remove", 1, 1, {"lease_ms": "5"}], "lease_ms must be"),
        (["remove", 1, 1, {"lease_ms": 5, "max_deliveries": 0}], "max_deliveries must be"),
        (["remove", 1, 1, {"max_deliveries": 3}], "max_deliveries needs lease_ms"),
        (["remove", 1, 1, {"look": True}], "look needs lease_ms"),
        (["configure", 1, "jobs", 1001], "max_deliveries must be an integer from 0 to 1000"),
        (["configure", 1, "jobs", "5"], "max_deliveries must be an integer"),
        (["configure", 1, "q" * 125, 5], "at most 124 characters"),
        (
            ["remove", 1, 1, {"queue": "q" * 125, "lease_ms": 5, "max_deliveries": 3}],
            "a queue with dead letters has at most 124 characters",
        ),
        (["lease", 1, "extend", [1], {"lease_ms": 0}], "lease_ms must be an integer from 1 to"),
        (["lease", 1, "extend", [1]], "an extend, and only an extend, says lease_ms"),
        (["lease", 1, "ack", [1], {"lease_ms": 5}], "an extend, and only an extend"),
        (["lease", 1, "ack", [1, 2, 3, 4]], "4 leases exceed the limit of 3"),
    ],
)
def test_bad_lease_fields_are_answered_alone(frame: Any, message: str) -> None:
    reply = parse_request(frame, LIMITS)
    assert isinstance(reply, ErrorReply) and message in reply.message, reply


def test_lease_requests_round_trip() -> None:
    remove = RemoveRequest(4, 2, "jobs", None, 500, 30_000, 5)
    assert parse_request(encode_request(remove), LIMITS) == remove
    for request in (
        LeaseRequest(5, "ack", (1, 2)),
        LeaseRequest(6, "nack", (3,)),
        LeaseRequest(7, "keep", (3,)),
        LeaseRequest(8, "extend", (9,), 60_000),
    ):
        assert parse_request(encode_request(request), LIMITS) == request
    assert encode_request(LeaseRequest(8, "extend", (9,), 60_000)) == [
        "lease", 8, "extend", [9], {"lease_ms": 60_000}
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (["insert", 4, [b"a"], {"queue": "pq", "priority": 3}],
         InsertRequest(4, (b"a",), "pq", None, 3)),
        (["create", 5, "pq", {"priorities": 8, "max_deliveries": 2}],
         CreateRequest(5, "pq", None, 2, 8)),
        (["create", 6, "jobs"], CreateRequest(6, "jobs")),
        (["delete", 7, "jobs"], DeleteRequest(7, "jobs")),
        (["peek", 8, {"queue": "jobs"}], PeekRequest(8, "jobs")),
        (["peek", 9], PeekRequest(9)),
    ],
)  # fmt: skip
def test_priorities_creates_deletes_and_peeks_parse_and_frame_back(
    frame: list[Any], expected: Any
) -> None:
    assert parse_request(frame, LIMITS) == expected
    assert encode_request(expected) == frame


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (["insert", 1, [b"a"], {"priority": 16}], "priority must be an integer from 0 to 15"),
        (["insert", 1, [b"a"], {"priority": True}], "priority must be an integer from 0"),
        (["create", 1, "pq", {"priorities": 17}], "priorities must be an integer from 1 to 16"),
        (["create", 1, "pq", {"priorities": 2, "stack": True}], "a stack has no priority"),
        (["create", 1, "pq", {"max_deliveries": "3"}], "max_deliveries must be an integer"),
        (["create", 1, "x" * 127, {"max_deliveries": 3}], "at most 124 characters"),
        (["delete", 1, "no spaces"], "only ASCII"),
        (["peek", 1, {"queue": "no spaces"}], "only ASCII"),
    ],
)
def test_bad_priorities_and_settings_get_one_clear_error(frame: list[Any], message: str) -> None:
    reply = parse_request(frame, LIMITS)
    assert isinstance(reply, ErrorReply) and message in reply.message, reply


@pytest.mark.parametrize(
    "frame", [["peek", 1, {"stack": True}], ["peek", 1, "jobs"], ["peek", 1, {}, 2]]
)
def test_a_malformed_peek_is_a_protocol_error(frame: list[Any]) -> None:
    with pytest.raises(RemoteProtocolError, match="peek"):
        parse_request(frame, LIMITS)


def test_configure_fetch_look_and_prefer_stack_round_trip() -> None:
    """Issue 28: the configure request, a consumer's fetch, a look, and the structure a
    new name gets when the client names none."""
    for request in (
        ConfigureRequest(3, "jobs", 5),
        ConfigureRequest(3, "jobs", 0),
        CreateRequest(4, "jobs", None, None, 4),
        RemoveRequest(4, 3, "jobs", None, 5_000, 30_000, None, None, fetch=True),
        RemoveRequest(4, 3, "jobs.dlq", None, None, 30_000, None, True, True, True),
        InsertRequest(5, (b"x",), "undo", None, None, True),
        RemoveRequest(6, 1, "undo", None, prefer_stack=True),
    ):
        assert parse_request(encode_request(request), LIMITS) == request
    assert "fetch" not in str(encode_request(RemoveRequest(4, 1, "jobs"))), "unset flags: unsent"
    with pytest.raises(RemoteProtocolError, match="fetch must be true or false"):
        parse_request(["remove", 1, 1, {"fetch": 1}], LIMITS)
    assert encode_request(ConfigureRequest(3, "jobs", 5)) == ["configure", 3, "jobs", 5]
    reply = parse_request(["configure", 1, "jobs", {"max_deliveries": 5}], LIMITS)  # version 2
    assert isinstance(reply, ErrorReply) and "max_deliveries must be an integer" in reply.message
