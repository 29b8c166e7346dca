"""The peer codec is derived from the message classes: one declaration per kind.

Every class of the two unions gets a codec whose wire fields follow the class's fields;
a new class gets one with no further writing, and the limits it declares in its
annotations are enforced; an annotation the wire cannot carry is our bug, found at
import rather than on the first message.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated

import pytest

from skueue.core.errors import RemoteProtocolError
from skueue.core.messages.field_types import Entry, Items, Range
from skueue.core.messages.membership import MEMBERSHIP_KINDS, StageDone
from skueue.core.messages.stages import MESSAGE_KINDS
from skueue.overlay.labels import Kind, NodeRef, node_ref
from skueue.overlay.routing import Route
from skueue.wire.peer import CODECS, KindCodec, decode_message, encode_message


def test_every_kind_of_both_unions_has_a_codec_in_field_order() -> None:
    assert set(CODECS) == set(MESSAGE_KINDS) | set(MEMBERSHIP_KINDS)
    assert not set(MESSAGE_KINDS) & set(MEMBERSHIP_KINDS)
    for kind, cls in {**MESSAGE_KINDS, **MEMBERSHIP_KINDS}.items():
        assert CODECS[kind].cls is cls
        assert CODECS[kind].names == tuple(f.name for f in dataclasses.fields(cls))


@dataclass(frozen=True, slots=True)
class Probe:
    """A kind that exists only here: written once, it travels."""

    sender: NodeRef  # a nested type with its own codec
    route: Route | None  # optional
    level: Annotated[int, Range(2, 5)]  # a declared range
    entries: Annotated[tuple[Entry, ...], Items(most=2)]  # a declared item limit
    flag: bool = False


def test_a_new_kind_is_one_class() -> None:
    codec = KindCodec.of(Probe)
    a = node_ref("10.0.0.1:7400", Kind.MIDDLE)
    probe = Probe(a, None, 3, (("q", 1, 0, b"x"), ("jobs", 2, 5, "y")), True)
    encoded = codec.encode(probe)
    assert encoded == ["Probe", ["10.0.0.1:7400", int(Kind.MIDDLE)], None, 3,
                       [["q", 1, 0, b"x"], ["jobs", 2, 5, "y"]], True]  # fmt: skip
    assert codec.decode(encoded[1:]) == probe
    node = encoded[1]
    for rest in (
        [node, None, 1, [], True],  # below the range
        [node, None, 5, [], True],  # at its end
        [node, None, True, [], True],  # a bool where an integer belongs
        [node, None, 3.0, [], True],
        [node, None, 3, [["q", 1, 0, b"x"]] * 3, True],  # more items than declared
        [node, None, 3, [["q", 0, 0, b"x"]], True],  # positions start at 1
        [node, None, 3, [["q", 1, 0, 7]], True],  # an element is bytes or text
        [node, None, 3, [["", 1, 0, b"x"]], True],  # a queue has a name
        [node, None, 3, [[1, 0, b"x"]], True],  # an entry names its queue
        [node, None, 3, [], 1],  # an integer where a bool belongs
        [node, None, 3, []],  # a field missing
    ):
        with pytest.raises(RemoteProtocolError):
            codec.decode(rest)


def test_declared_limits_of_real_kinds_hold() -> None:
    a = ["10.0.0.1:7400", 0]
    assert decode_message(["StageDone", a, 3]) == StageDone(node_ref("10.0.0.1:7400", Kind.LEFT), 3)
    for bad in (
        ["StageDone", a, 0],
        ["StageDone", a, 4],
        ["Rewire", 1],
        ["Rewire", 4],
        ["AnchorHandover", [1, 2], 0, []],
        ["AnchorHandover", [["default", False, [1, 2]]], 0, []],
        ["AnchorHandover", [["default", False, [1] * 34]], 0, []],
        ["AnchorHandover", [["default", 0, [1, 2, 3]]], 0, []],
        ["AnchorHandover", [["no spaces", False, [1, 2, 3]]], 0, []],
        ["AnchorHandover", [["", False, [1, 2, 3]]], 0, []],
        ["AnchorHandover", [["q" * 129, False, [1, 2, 3]]], 0, []],
        ["AnchorHandover", [], -1, []],
        ["AnchorHandover", [], 0, [["jobs", 1001]]],
        ["AnchorHandover", [], 0],
        ["Withdraw", a, -2],
        ["IntegrateAck", a, -2],
        ["HandoverPart", a, -1, []],
    ):
        with pytest.raises(RemoteProtocolError):
            decode_message(bad)
    assert encode_message(decode_message(["Withdraw", a, -1])) == ["Withdraw", a, -1]
    queues = [["default", False, [1, 2, 3]], ["jobs:eu-1", True, [0, 0, 0, 5]]]
    good = ["AnchorHandover", queues, 7, [["jobs:eu-1", 3]]]
    assert encode_message(decode_message(good)) == good


def test_an_annotation_the_wire_cannot_carry_fails_at_derivation() -> None:
    @dataclass(frozen=True, slots=True)
    class Unwired:
        ratio: float  # no codec for floats: refused loudly, when the codec is built

    with pytest.raises(TypeError, match="no wire codec"):
        KindCodec.of(Unwired)
