"""``skueue remove-member``: the request on the wire, and what the members' answers
decide (runtime/removal_check.py), without daemons."""

from __future__ import annotations

from typing import Any

import pytest

from skueue.core.errors import RemoteProtocolError
from skueue.core.membership.removal import Hold
from skueue.host.replies import INVALID, REFUSED, UNAVAILABLE, ErrorReply
from skueue.host.requests import REMOVE_MEMBERS_MAX, RemoveMemberRequest
from skueue.runtime.limits import Limits
from skueue.runtime.removal_check import RemovalCheck
from skueue.wire.client_codec import decode_request as parse_request
from skueue.wire.client_codec import encode_request


def test_the_request_names_members_within_the_limit() -> None:
    request = RemoveMemberRequest(7, ("a", "10.0.0.1:7400"))
    assert parse_request(encode_request(request), Limits()) == request
    assert parse_request(["remove-member", 1, ["a", "a"]], Limits()) == RemoveMemberRequest(
        1, ("a",)
    )
    for count in (0, REMOVE_MEMBERS_MAX + 1):
        refused = parse_request(["remove-member", 1, [f"m{i}" for i in range(count)]], Limits())
        assert isinstance(refused, ErrorReply) and refused.code == INVALID, refused


@pytest.mark.parametrize("members", ["a", [1], [""], ["x" * 257], None])
def test_a_malformed_request_is_a_protocol_error(members: Any) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_request(["remove-member", 1, members], Limits())


def check(*members: str) -> RemovalCheck:
    return RemovalCheck(1, 2, members, {m: f"{m}:1" for m in members}, 10.0, {"p0", "p1"})


def test_every_member_must_answer() -> None:
    c = check("x")
    c.answer("p0", [[int(Hold.NONE), "", False]])
    assert c.refusal() is not None and c.refusal()[0] == UNAVAILABLE  # type: ignore[index]
    assert "no answer from p1" in c.refusal()[1]  # type: ignore[index]


@pytest.mark.parametrize(
    "bad", [[], [[0, "", False], [0, "", False]], [[3, "", False]], [[0, 1, False]], "x"]
)
def test_a_malformed_or_unasked_answer_is_left_out(bad: Any) -> None:
    c = check("x")
    c.answer("p0", bad)
    c.answer("stranger", [[0, "", False]])
    assert c.waiting == {"p0", "p1"}


def test_a_member_someone_reaches_is_not_gone() -> None:
    c = check("x")
    c.answer("p0", [[int(Hold.NONE), "", False]])
    c.answer("p1", [[int(Hold.JOINER), "places it", True]])
    code, message = c.refusal()  # type: ignore[misc]
    assert code == REFUSED and "not gone: p1 has a link up" in message


def test_a_ring_hold_is_refused_with_what_can_be_done() -> None:
    c = check("x", "y")
    c.answer("p0", [[int(Hold.JOINER), "", False], [int(Hold.RING), "a neighbour", False]])
    c.answer("p1", [[int(Hold.NONE), "", False], [int(Hold.NONE), "", False]])
    code, message = c.refusal()  # type: ignore[misc]
    assert code == REFUSED and "cannot remove y" in message and "a neighbour" in message
    assert "data directory" in message


def test_joiners_and_phantoms_may_go_and_the_answer_says_what_they_held() -> None:
    c = check("x", "y")
    c.answer("p0", [[int(Hold.JOINER), "", False], [int(Hold.NONE), "", False]])
    c.answer("p1", [[int(Hold.NONE), "", False], [int(Hold.NONE), "", False]])
    assert c.refusal() is None
    assert "never got into the ring" in c.held("x") and "in no member's ring" in c.held("y")


def test_a_member_whose_copies_serve_it_may_hold_the_ring_and_links() -> None:
    """With --failover (runtime/re_replication.py): only its host is forgotten."""
    c = check("x")
    c.answer("p0", [[int(Hold.RING), "a neighbour", True]])  # a link to its stand-in
    c.answer("p1", [[int(Hold.RING), "a neighbour", False]])
    assert c.refusal() is not None
    assert c.refusal(served=["x"]) is None
