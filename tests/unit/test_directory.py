"""The member directory and its gossip (no sockets): ids are not addresses."""

from __future__ import annotations

import pytest

from skueue.core.errors import RemoteProtocolError
from skueue.core.messages.membership import JoinRequest
from skueue.core.messages.stages import Hurry
from skueue.host.address import Address
from skueue.host.directory import MEMBERS_MAX, Directory, vouches
from skueue.overlay.labels import Kind, node_ref

A, B, C = Address("10.0.0.1", 1), Address("10.0.0.2", 2), Address("10.0.0.3", 3)


def test_a_strangers_hello_makes_a_contact_and_confirmation_a_member() -> None:
    """Anyone can say hello: until the core accepts a message from it, a caller is
    reachable but neither spread nor counted."""
    d = Directory("a", A)
    d.learn("b", B)
    assert d.on_hello("c", C) == []
    assert d.address("c") == C and not d.is_member("c") and d.others() == ["b"]
    out = d.confirm("c")
    assert ("b", ["member", "c", "10.0.0.3:3"]) in out  # b hears of c
    assert out[-1][0] == "c" and out[-1][1][0] == "members"  # c hears of everyone
    assert d.others() == ["b", "c"]
    # A member's hello again is no news: it is only told everyone.
    assert [to for to, _ in d.on_hello("c", C)] == ["c"]
    # A contact that went away without being confirmed is forgotten.
    d.on_hello("x", Address("10.0.0.9", 9))
    d.forget_contact("x")
    assert d.address("x") is None and d.confirm("x") == []


def test_gossip_from_a_stranger_is_ignored() -> None:
    d = Directory("a", A)
    d.on_hello("x", Address("10.0.0.9", 9))
    assert d.on_gossip("x", ["member", "y", "10.0.0.8:8"]) == ([], None)
    assert d.address("y") is None


def test_gossip_spreads_members_once_and_never_back_to_the_source() -> None:
    d = Directory("a", A)
    d.learn("b", B)
    out, departure = d.on_gossip("b", ["member", "c", "10.0.0.3:3"])
    assert out == [] and departure is None  # only b knew of c, and b told us
    assert d.address("c") == C
    d.learn("x", Address("10.0.0.9", 9))
    out, _ = d.on_gossip("b", ["members", [["y", "10.0.0.8:8"]], []])
    assert sorted(to for to, _ in out) == ["c", "x"]


def test_a_departure_removes_the_member_for_good_and_names_the_heir() -> None:
    d = Directory("a", A)
    d.learn("b", B)
    d.learn("c", C)
    frame = ["departed", "c", "a", {"inserted": 5, "removed": 2}]
    out, departure = d.on_gossip("c", frame)
    assert departure is not None and departure.heir == "a"
    assert departure.counters == {
        "inserted": 5, "removed": 2, "empty": 0, "dropped_results": 0, "retried": 0
    }
    assert out == [("b", frame)]
    assert d.others() == ["b"]
    # A late member frame cannot bring it back, and a second departure is no news.
    d.on_gossip("b", ["member", "c", "10.0.0.3:3"])
    assert d.others() == ["b"]
    assert d.on_gossip("b", frame) == ([], None)


@pytest.mark.parametrize(
    "frame",
    [
        ["member", 7, "10.0.0.3:3"],
        ["member", "c", "no-port"],
        ["member", "", "10.0.0.3:3"],
        ["members", "x", []],
        ["members", [["c"]], []],
        ["departed", "c", None, {"inserted": -1}],
        ["departed", "c", None, "counters"],
    ],
)
def test_bad_gossip_is_the_peers_fault(frame: list[object]) -> None:
    d = Directory("a", A)
    d.learn("b", B)
    with pytest.raises(RemoteProtocolError):
        d.on_gossip("b", frame)
    assert d.others() == ["b"]


def test_the_directory_is_bounded() -> None:
    d = Directory("a", A)
    for i in range(MEMBERS_MAX - 1):
        d.learn(f"p{i}", Address("10.1.0.1", i + 1))
    with pytest.raises(RemoteProtocolError, match="more than"):
        d.learn("one-too-many", B)


def test_only_a_join_request_vouches_for_a_contact() -> None:
    """Issue 28, item 2: a daemon started with --peers of a cluster it is not in sends
    batches as if it were in the ring; they must not make it a member."""
    assert vouches(JoinRequest(None, node_ref("x", Kind.LEFT)))
    assert not vouches(Hurry(node_ref("x", Kind.LEFT)))


def test_a_refused_incarnation_stays_refused_until_another_or_membership() -> None:
    d = Directory("a", A)
    d.refuse("x", "n1")
    assert d.is_refused("x", "n1") and not d.is_refused("x", "n2")
    d.forget_refusal("x", "n1")  # the same incarnation: still refused
    assert d.is_refused("x", "n1")
    d.forget_refusal("x", "n2")  # started again: judged afresh
    assert "x" not in d.refused
    d.refuse("y", "n1")
    d.learn("y", B)  # it became a member (joined): nothing of it is refused
    assert "y" not in d.refused


def test_a_removed_member_is_departed_for_good() -> None:
    d = Directory("a", A)
    d.learn("b", B)
    assert d.remove("b") and not d.remove("b") and not d.remove("a")
    assert d.others() == [] and "b" in d.departed and "b" in d.removed
    assert not d.learn("b", B)  # gossip cannot bring it back
