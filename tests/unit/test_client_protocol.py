"""Client requests, checked field by field against the limits (no sockets)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skueue.core.errors import RemoteProtocolError
from skueue.runtime.limits import Limits
from skueue.wire.client_protocol import (
    PROTOCOL_VERSION,
    RID_MAX,
    ClientHello,
    ConfigureRequest,
    CreateRequest,
    DeleteRequest,
    InsertRequest,
    JoinClusterRequest,
    LeaseRequest,
    LeaveRequest,
    PeekRequest,
    RemoveRequest,
    StatsRequest,
    limits_for_clients,
    oversized_request_id,
    parse_client_hello,
    parse_request,
    reply_elements,
    reply_frames,
    request_id,
)
from skueue.wire.client_replies import Done, ErrorReply, More, StatsReply, Welcome, parse_reply

LIMITS = Limits(ops_per_request_max=3, value_bytes_max=4)
INSERT_MAP = 'the 4th field is a map of "prefer_stack", "priority", "queue", "stack"'
REMOVE_MAP = '"lease_ms", "look", "max_deliveries", "prefer_stack", "queue", "stack"'


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (["insert", 0, [b"a"]], InsertRequest(0, [b"a"])),
        (
            ["insert", RID_MAX - 1, [b"", b"abcd", b"xy"]],
            InsertRequest(RID_MAX - 1, [b"", b"abcd", b"xy"]),
        ),
        (["remove", 5, 1], RemoveRequest(5, 1)),
        (["remove", 5, 3], RemoveRequest(5, 3)),
        (["insert", 0, [b"a"], {"queue": "jobs"}], InsertRequest(0, [b"a"], "jobs")),
        (["insert", 0, [b"a"], {"stack": True}], InsertRequest(0, [b"a"], None, True)),
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
        (["ack", 1, []], "non-empty list of lease ids"),
        (["ack", 1, 5], "non-empty list of lease ids"),
        (["nack", 1, [-1]], "non-empty list of lease ids"),
        (["keep", 1, [True]], "non-empty list of lease ids"),
        (["extend", 1, [1]], "unknown request 'extend' with 3 fields"),
        (["ack", 1, [1], 5], "unknown request 'ack' with 4 fields"),
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
    assert parse_request(["insert", 1, [b"v"] * n], limits) == InsertRequest(1, [b"v"] * n)
    assert parse_request(["insert", 1, [b"v" * size]], limits) == InsertRequest(1, [b"v" * size])
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
            assert frame == ["insert", request.rid, vals]
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
    assert refused.frame()[:2] == ["error", frame[1]]
    assert refused.code == "too-large" and message in refused.message


def test_a_wrong_type_is_invalid_even_over_the_count_limit() -> None:
    """Garbage ends the connection whatever else is wrong with the request."""
    with pytest.raises(RemoteProtocolError, match="values must be bytes"):
        parse_request(["insert", 1, [b"a", b"b", b"c", "d"]], LIMITS)


# -- the hello (protocol version 2) ----------------------------------------------------------


def test_the_protocol_version_is_2() -> None:
    assert PROTOCOL_VERSION == 2


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (["hello-client", 1], ClientHello(1)),
        (["hello-client", 2], ClientHello(2)),
        (["hello-client", 2, {}], ClientHello(2)),
        (["hello-client", 2, {"request_timeout_ms": 1500}], ClientHello(2, 1.5)),
        (["hello-client", 2, {"admin": True}], ClientHello(2, None, True)),
        (
            ["hello-client", 2, {"request_timeout_ms": 20, "admin": False, "future": 1}],
            ClientHello(2, 0.02, False),
        ),
    ],
)
def test_hellos_of_version_1_and_2_are_accepted(frame: list[Any], expected: ClientHello) -> None:
    assert parse_client_hello(frame) == expected


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (["hello-client", 3], "version 3 is not supported; this daemon speaks versions 1, 2"),
        (["hello-client", 0], "version 0 is not supported"),
        (["hello-client", "2"], "version '2' is not supported"),
        (["hello-client", True], "is not supported"),
        (["hello-client"], "expected"),
        (["hello-client", 2, {}, 4], "expected"),
        (["hello-client", 2, []], "options must be a map"),
        (["hello-client", 2, {"request_timeout_ms": 0}], "positive integer"),
        (["hello-client", 2, {"request_timeout_ms": 1.5}], "positive integer"),
        (["hello-client", 2, {"admin": 1}], "admin must be true or false"),
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
    results = [[v, i, i * 3] for i, v in enumerate(values)]
    frames = [reply.frame() for reply in reply_frames(Done(9, results), limit)]
    assert [f[0] for f in frames] == ["more"] * (len(frames) - 1) + ["done"]
    assert all(f[1] == 9 for f in frames)
    assert [r for f in frames for r in f[2]] == results
    assert all(len(msgpack.packb(f, use_bin_type=True)) <= limit for f in frames)


def test_reply_elements_counts_removed_values_only() -> None:
    assert reply_elements(Done(1, [[b"a", 1, 2], [None, 3, None], [b"", 4, 5]])) == 2
    assert reply_elements(More(1, [[b"a", 1, 2]])) == 1
    assert reply_elements(Done(1, [[1, 2], [3, 4]])) == 0  # an insert's results
    assert reply_elements(ErrorReply(1, "no", "timeout")) == 0
    assert reply_elements(StatsReply(1, {"removed": 3})) == 0


@pytest.mark.parametrize(
    "reply",
    [
        Welcome("p", "queue", 2, {"frame_bytes_max": 100}),
        More(3, [[b"a", 1, 2]]),
        Done(4, []),
        StatsReply(5, {"processes": 1}),
        ErrorReply(6, "no", "timeout"),
        ErrorReply(None, "bye", None),
    ],
)
def test_every_reply_reads_back_from_its_frame(reply: object) -> None:
    frame = reply.frame()  # type: ignore[attr-defined]
    assert parse_reply(msgpack.unpackb(msgpack.packb(frame), raw=False)) == reply


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
    ],
)
def test_a_malformed_reply_is_one_error_type(frame: object) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_reply(frame)


@pytest.mark.parametrize(
    "request_",
    [
        InsertRequest(1, [b"a", b""]),
        RemoveRequest(2, 3),
        StatsRequest(3),
        LeaveRequest(4),
        JoinClusterRequest(5, "127.0.0.1:7000"),
    ],
)
def test_every_request_the_client_builds_parses_back_on_the_daemon(request_: Any) -> None:
    frame = msgpack.unpackb(msgpack.packb(request_.frame()), raw=False)
    assert parse_request(frame, LIMITS) == request_


@pytest.mark.parametrize(
    "hello",
    [ClientHello(PROTOCOL_VERSION), ClientHello(PROTOCOL_VERSION, 1.5, True), ClientHello(1)],
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
        InsertRequest(3, [b"x", b"y"], "jobs", True),
        InsertRequest(3, [b"x"], None, False),
        RemoveRequest(4, 2, "mail.eu", None),
        RemoveRequest(4, 1, "mail.eu", None, 30_000),
        RemoveRequest(4, 1, wait_ms=1),
        RemoveRequest(4, 2),
    ):
        assert parse_request(request.frame(), LIMITS) == request
    assert InsertRequest(3, [b"x"]).frame() == ["insert", 3, [b"x"]]  # as version 1 had it


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
        (["configure", 1, "jobs", {"max_deliveries": 1001}], "a delivery limit is 0 (none)"),
        (["configure", 1, "jobs", {"max_deliveries": "5"}], "max_deliveries is an integer"),
        (["configure", 1, "q" * 125, {"max_deliveries": 5}], "at most 124 characters"),
        (
            ["remove", 1, 1, {"queue": "q" * 125, "lease_ms": 5, "max_deliveries": 3}],
            "a queue with dead letters has at most 124 characters",
        ),
        (["extend", 1, [1], 0], "extend: lease_ms must be an integer from 1 to"),
        (["ack", 1, [1, 2, 3, 4]], "4 leases exceed the limit of 3"),
    ],
)
def test_bad_lease_fields_are_answered_alone(frame: Any, message: str) -> None:
    reply = parse_request(frame, LIMITS)
    assert isinstance(reply, ErrorReply) and message in reply.message, reply


def test_lease_requests_round_trip() -> None:
    remove = RemoveRequest(4, 2, "jobs", None, 500, 30_000, 5)
    assert parse_request(remove.frame(), LIMITS) == remove
    for request in (
        LeaseRequest("ack", 5, [1, 2]),
        LeaseRequest("nack", 6, [3]),
        LeaseRequest("keep", 7, [3]),
        LeaseRequest("extend", 8, [9], 60_000),
    ):
        assert parse_request(request.frame(), LIMITS) == request


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (["insert", 4, [b"a"], {"queue": "pq", "priority": 3}],
         InsertRequest(4, [b"a"], "pq", None, 3)),
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
    assert expected.frame() == frame


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (["insert", 1, [b"a"], {"priority": 16}], "priority is an integer from 0"),
        (["insert", 1, [b"a"], {"priority": True}], "priority is an integer from 0"),
        (["create", 1, "pq", {"priorities": 17}], "1 (no priorities) to 16 priority levels"),
        (["create", 1, "pq", {"priorities": 2, "stack": True}], "a stack has no priority"),
        (["create", 1, "pq", {"max_deliveries": "3"}], "are integers"),
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
        RemoveRequest(4, 3, "jobs", None, 5_000, 30_000, None, None, fetch=True),
        RemoveRequest(4, 3, "jobs.dlq", None, None, 30_000, None, True, True, True),
        InsertRequest(5, [b"x"], "undo", None, None, True),
        RemoveRequest(6, 1, "undo", None, prefer_stack=True),
    ):
        assert parse_request(request.frame(), LIMITS) == request
    assert "fetch" not in str(RemoveRequest(4, 1, "jobs").frame()), "unset flags are not sent"
    with pytest.raises(RemoteProtocolError, match="fetch must be true or false"):
        parse_request(["remove", 1, 1, {"fetch": 1}], LIMITS)
    with pytest.raises(RemoteProtocolError, match='a map of "max_deliveries"'):
        parse_request(["configure", 1, "jobs", {"stack": True}], LIMITS)
