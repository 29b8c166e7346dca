"""Client requests, checked field by field against the limits (no sockets)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skueue.runtime.client_protocol import (
    RID_MAX,
    InsertRequest,
    RemoveRequest,
    StatsRequest,
    parse_request,
    request_id,
)
from skueue.runtime.errors import RemoteProtocolError
from skueue.runtime.limits import Limits

LIMITS = Limits(ops_per_request_max=3, value_bytes_max=4)


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
        (["insert", 1, [b"a"] * 4], "exceed the limit of 3"),
        (["insert", 1, ["a"]], "values must be bytes"),
        (["insert", 1, [b"a", 1]], "values must be bytes"),
        (["insert", 1, [bytearray(b"a")]], "values must be bytes"),
        (["insert", 1, [[b"a"]]], "values must be bytes"),
        (["insert", 1, [b"abcde"]], "5 bytes exceeds the limit of 4"),
        (["insert", 1], "unknown request 'insert' with 2 fields"),
        (["insert", 1, [b"a"], 0], "unknown request 'insert' with 4 fields"),
        (["remove", 1, 0], "count must be an integer from 1 to 3"),
        (["remove", 1, -1], "count must be"),
        (["remove", 1, 4], "count must be"),
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
    with pytest.raises(RemoteProtocolError):
        parse_request(["insert", 1, [b"v"] * (n + 1)], limits)
    with pytest.raises(RemoteProtocolError):
        parse_request(["insert", 1, [b"v" * (size + 1)]], limits)
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
