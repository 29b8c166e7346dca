"""The input log's records of client requests (runtime/durability/records.py): a request is
logged in its wire form, by the client codec (skueue/wire/client_codec.py), not by a second list of
its fields, and read back as the same typed request."""

from __future__ import annotations

import math

import msgpack
import pytest

from skueue.host.inputs import FromClient
from skueue.host.requests import (
    REQUEST_CLASSES,
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
from skueue.runtime.durability.records import UnreadableRecord, input_of, record_of
from skueue.wire.client_codec import encode_request

REQUESTS = [
    InsertRequest(1, (b"a", b""), "jobs", None, 3, True),
    RemoveRequest(2, 5, "jobs", False, 1500, 30_000, 4, None, fetch=True, look=True),
    LeaseRequest(3, "extend", (7, 8), 2000),
    CreateRequest(4, "jobs", False, 3, 2),
    ConfigureRequest(5, "jobs", 0),
    DeleteRequest(6, "jobs"),
    PeekRequest(7, None),
    StatsRequest(8),
    LeaveRequest(9),
    JoinClusterRequest(10, "127.0.0.1:7400"),
    RemoveMemberRequest(11, ("p1", "10.0.0.1:7400")),
]


def test_every_request_kind_is_covered() -> None:
    assert {type(r) for r in REQUESTS} == set(REQUEST_CLASSES)


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_a_logged_request_is_its_wire_form_and_reads_back_the_same(request_: object) -> None:
    item = FromClient(3, "session", request_, math.inf, 12.5)  # type: ignore[arg-type]
    record = record_of(item)
    assert record == ["client", 3, "session", encode_request(request_), math.inf, 12.5]  # type: ignore[arg-type]
    assert input_of(msgpack.unpackb(msgpack.packb(record), raw=False)) == item


@pytest.mark.parametrize(
    "logged",
    [
        ["ack", 3, [7]],  # an older version's lease request
        ["configure", 5, "jobs", {"max_deliveries": 2}],  # ... and configure
        ["insert", 1, "not a list"],
        ["insert", 1, [b"a"], {"queue": ""}],  # answered alone on the wire: unreadable here
    ],
)
def test_a_request_this_version_does_not_write_is_refused_in_one_line(logged: object) -> None:
    with pytest.raises(UnreadableRecord) as refused:
        input_of(["client", 3, None, logged, math.inf, 0.0])
    assert "\n" not in str(refused.value)
