"""The wire codec: every message kind survives the trip, and bad input is one error type.

Round trip: a simulator run with every message (even between a process's own nodes) sent
through encode -> msgpack -> decode gives exactly the history of the same run without the
wire, and every message kind of both structures appears in it.

Malformed input: whatever a peer sends, ``decode_message`` either returns a message or
raises :class:`RemoteProtocolError`, never another exception (ARCHITECTURE.md, style rule
4).  Hypothesis mutates real encoded messages (drop, insert, replace a field anywhere in
the nesting) and also feeds arbitrary msgpack values.  A mutation that still decodes must
re-encode to exactly what was received, types included, so a lenient decoder (a bool or
a float where an integer belongs) shows up too.
"""

from __future__ import annotations

import functools
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skueue.core.batch import Batch, Batches, RunGrant
from skueue.core.errors import RemoteProtocolError
from skueue.core.messages.stages import MESSAGE_KINDS, BatchUp, Get, GetReply, Grants, Put, PutAck
from skueue.core.ops import Structure
from skueue.overlay.labels import Kind, node_ref
from skueue.overlay.routing import Phase, Route
from skueue.runtime.network.peers import parse_peer_frame
from skueue.sim import rounds
from skueue.sim.rounds import SyncConfig, SyncSim
from skueue.wire.peer import decode_message, encode_message
from tests.unit.test_hurry import hurry_messages
from tests.unit.test_queue_delete import queue_change_messages


def through_wire(message: Any) -> Any:
    blob = msgpack.packb(encode_message(message), use_bin_type=True)
    return decode_message(msgpack.unpackb(blob, raw=False, strict_map_key=True))


def run_sim(structure: Structure, wire: bool, seen: list[Any] | None = None) -> list[Any]:
    config = SyncConfig(
        processes=6, structure=structure, rounds=40, rate=4, seed=11, local_delivery=False
    )
    original = rounds._message

    def via_wire(send: Any) -> Any:
        message = original(send)
        decoded = through_wire(message)
        assert decoded == message, (message, decoded)
        if seen is not None:
            seen.append(encode_message(message))
        return decoded

    if wire:
        rounds._message = via_wire
    try:
        return SyncSim(config).run().records
    finally:
        rounds._message = original


@functools.cache
def sim_messages() -> tuple[Any, ...]:
    """Encoded messages of both structures, a few of each kind."""
    seen: list[Any] = []
    for structure in Structure:
        run_sim(structure, wire=True, seen=seen)
    seen.extend(hurry_messages())  # only a paced driver sends them, not the simulator
    seen.extend(encode_message(m) for m in queue_change_messages())  # no simulator makes them
    by_kind: dict[str, list[Any]] = {}
    for m in seen:
        by_kind.setdefault(m[0], []).append(m)
    return tuple(m for kind in sorted(by_kind) for m in by_kind[kind][:20])


@pytest.mark.parametrize("structure", list(Structure))
def test_a_simulator_run_through_the_wire_is_unchanged(structure: Structure) -> None:
    seen: list[Any] = []
    assert run_sim(structure, wire=True, seen=seen) == run_sim(structure, wire=False)
    kinds = {m[0] for m in seen}
    expected = {"BatchUp", "Grants", "Put", "Get", "GetReply"}
    if structure is Structure.STACK:
        expected.add("PutAck")
    assert expected <= kinds, kinds


def test_every_message_kind_round_trips() -> None:
    assert {m[0] for m in sim_messages()} == set(MESSAGE_KINDS)
    for encoded in sim_messages():
        again = encode_message(decode_message(encoded))
        assert strictly_equal(again, encoded)
        assert_well_typed(again)


def test_hand_built_messages_round_trip_with_bytes_and_text_elements() -> None:
    a = node_ref("10.0.0.1:7400", Kind.LEFT)
    route = Route(target=5, bits=4, taken=2, point=9, phase=Phase.FINAL, heading=-1, hops=3)
    for message in (
        BatchUp(a, Batches(((("q", True), Batch((0, 0, 2), (0, 1, 2))),), 1, 2)),
        BatchUp(a, Batches(((("a", False), Batch.of(1)), (("b:2", True), Batch.of(0, 1))))),
        Grants(((("q", True), (RunGrant(4, 3, 10, 7, -1, 1),)),), update=False),
        Grants((), update=True),
        Put(route, 12, b"\x00bytes", 3, a, 99, True),
        Put(route, 12, "text", 0, a, 99, False),
        Get(route, 1, 0, a, 0),
        Get(route, 1, 0, a, 0, ("q", False), keep=True),
        BatchUp(a, Batches(peeks=(("a", 2), ("b", 1)))),
        Grants((), peeked=((("a", False), RunGrant(5, 1, 9), 0),
                           (("b", False), RunGrant(1, 0, 0), 1))),  # fmt: skip
        GetReply(1, 2, b""),
        PutAck(1 << 62),
    ):
        assert through_wire(message) == message


def strictly_equal(a: Any, b: Any) -> bool:
    """Equal with equal types all the way down (True != 1, 1.0 != 1 here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(strictly_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strictly_equal(a[k], b[k]) for k in a)
    return bool(a == b) or (a != a and b != b)  # NaN


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)
    | st.sampled_from([0, 1, -1, 2, 3, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, -(1 << 63)])
    | st.floats()
    | st.sampled_from([1.0, 0.0, -1.0])
    | st.text(max_size=6)
    | st.sampled_from(list(MESSAGE_KINDS))
    | st.binary(max_size=6)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@st.composite
def mutated_messages(draw: st.DrawFn) -> Any:
    message = draw(st.sampled_from(sim_messages()))
    return draw(mutate(message))


@st.composite
def mutate(draw: st.DrawFn, value: Any) -> Any:
    """One to three changes, each at a place drawn uniformly from the whole nesting."""
    for _ in range(draw(st.integers(1, 3))):
        value = draw(_mutate_once(value))
    return value


def paths(x: Any, here: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """Every place in a nested list: the root and each element, at any depth."""
    found = [here]
    if isinstance(x, list):
        for i, item in enumerate(x):
            found += paths(item, (*here, i))
    return found


def replace_at(x: Any, path: tuple[int, ...], new: Any) -> Any:
    if not path:
        return new
    copy = list(x)
    copy[path[0]] = replace_at(x[path[0]], path[1:], new)
    return copy


def get_at(x: Any, path: tuple[int, ...]) -> Any:
    for i in path:
        x = x[i]
    return x


@st.composite
def _mutate_once(draw: st.DrawFn, value: Any) -> Any:
    path = draw(st.sampled_from(paths(value)))
    target = get_at(value, path)
    actions = ["replace", "retype"]
    if isinstance(target, list):
        actions += ["delete", "insert", "append"] if target else ["append"]
    if type(target) is int:
        actions.append("bump")
    action = draw(st.sampled_from(actions))
    if action == "replace":
        new = draw(values)
    elif action == "retype":
        new = draw(st.sampled_from(retyped(target)))
    elif action == "bump":
        new = target + draw(st.sampled_from([-1, 1, -2, 1 << 63, -(1 << 63), 1 << 64]))
    else:
        new = list(target)
        if action == "append":
            new.append(draw(values))
        else:
            i = draw(st.integers(0, len(new) - 1))
            if action == "delete":
                del new[i]
            else:
                new.insert(i, draw(values))
    return replace_at(value, path, new)


def retyped(x: Any) -> list[Any]:
    """The same value in a type it does not have on the wire: what a sloppy peer sends."""
    if isinstance(x, list):
        return [tuple(x), None] if x else [None]
    if type(x) is bool:
        return [int(x), float(x)]
    if type(x) is int:
        return [float(x), str(x), *([bool(x)] if x in (0, 1) else [])]
    if type(x) is bytes:
        return [x.decode("latin-1"), list(x)]
    if type(x) is str:
        return [x.encode(), None]
    return [None]


def normalise(value: Any) -> Any:
    """What the peer's bytes decode to on our side (msgpack cannot carry every int)."""
    try:
        blob = msgpack.packb(value, use_bin_type=True)
    except (OverflowError, ValueError, TypeError):
        return None
    return msgpack.unpackb(blob, raw=False, strict_map_key=False)


# The only boolean fields on the wire: Grants.update and Put.ack, and inside fields, the
# stack flag of a queue (a batch's sections, the grants' queues, an anchor's counters).
BOOL_FIELDS = {("Grants", 2), ("Put", 7), ("Get", 7), ("DhtRun", 5), ("DhtRun", 7)}


def bools_allowed(kind: str, i: int, field: Any) -> list[Any]:
    """The values of a decoded field that are booleans by the message's declaration."""
    if (kind, i) in BOOL_FIELDS:
        return [field]
    if (kind, i) == ("BatchUp", 2):
        return [section[1] for section in field[0]] + [create[1] for create in field[6]]
    if (kind, i) == ("Grants", 1):
        return [queue[1] for queue, _ in field]
    if (kind, i) == ("AnchorHandover", 1):
        return [queue[1] for queue in field]
    if (kind, i) in (("Put", 8), ("Get", 6), ("Drop", 6), ("DhtRun", 3)):
        return [field[1]]
    if (kind, i) in (("Grants", 5), ("Grants", 7)):
        return [queue[1] for queue, _ in field]
    if (kind, i) == ("Grants", 6):
        return [b for key, _, stack, _ in field for b in (key[1], stack)]
    if (kind, i) == ("Grants", 8):
        return [queue[1] for queue, _, _ in field]
    return []


def leaves(x: Any) -> list[Any]:
    return [leaf for item in x for leaf in leaves(item)] if isinstance(x, list) else [x]


def assert_well_typed(encoded: list[Any]) -> None:
    """A decoded message holds no float anywhere and a bool only in a boolean field
    (a bool passed through where an integer belongs re-encodes unchanged, so the round
    trip alone would not notice it)."""
    kind = encoded[0]
    if kind == "DhtBundle":  # messages inside a message: each is checked as one
        for inner in encoded[1]:
            assert_well_typed(inner)
        return
    for i, field in enumerate(encoded[1:], 1):
        bools = 0
        for leaf in leaves(field):
            assert type(leaf) is not float, f"a float inside {kind} field {i}: {encoded!r}"
            bools += type(leaf) is bool
        allowed = bools_allowed(kind, i, field)
        assert all(type(b) is bool for b in allowed) and bools == len(allowed), (
            f"a bool where an integer belongs, {kind} field {i}: {encoded!r}"
        )


def decode_or_reject(value: Any) -> None:
    try:
        message = decode_message(value)
    except RemoteProtocolError:
        return
    again = encode_message(message)
    assert strictly_equal(again, value), f"accepted {value!r} but it means {again!r}"
    assert_well_typed(again)


@given(mutated_messages())
def test_mutated_messages_decode_exactly_or_raise_remote_protocol_error(value: Any) -> None:
    decode_or_reject(normalise(value))


@given(values)
def test_arbitrary_values_decode_exactly_or_raise_remote_protocol_error(value: Any) -> None:
    decode_or_reject(normalise(value))


@given(st.sampled_from([0, 1, 2, 3, -1, "0", None, 1.0, True]), mutated_messages())
def test_peer_frames_raise_only_remote_protocol_error(kind: Any, message: Any) -> None:
    frame = normalise(["msg", kind, message])
    try:
        parsed = parse_peer_frame(frame)
    except RemoteProtocolError:
        return
    assert isinstance(parsed, tuple)
    assert type(kind) is int and 0 <= kind < 3


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {},
        "BatchUp",
        [None],
        [b"PutAck", 1],
        ["Nope", 1],
        ["PutAck"],
        ["PutAck", 1, 2],
        ["PutAck", -1, None],
        ["PutAck", 1 << 63, None],
        ["PutAck", True, None],
        ["PutAck", 1.0, None],
        ["PutAck", 1, [["p", 1], 1 << 64]],  # an owner's interval ends inside the cycle
        ["PutAck", 1, [["p", 7], 5]],  # no such node kind
        ["GetReply", 1, 0, b"x", None],  # positions start at 1
        ["GetReply", 1, 1, 5, None],
        ["GetReply", 1, 1, None, None],
        ["GetReply", 1, 1, b"x", ["p", 5]],  # an owner is a node and the end of its interval
        ["Grants", [], "yes"],
        ["Grants", [[["q", False], [[1, 1, 0, 0, 2, 0]]]], True],  # step must be +1 or -1
        ["Grants", [[["q", False], [[1, 1, 0, 0, 1, 2]]]], True],  # ticket step 0 or 1
        ["Grants", [[["q", False], [[1, 1, 0, 0, True, 0]]]], True],
        ["Grants", [[["q", False], [[1, 1, 0, 0, 1.0, 0]]]], True],
        ["Grants", [[["q", False], [[1, 1, 0, 0, 1, False]]]], True],
        ["Grants", [[["q", False], [[1, 1, 0, 0, 1]]]], True],
        ["Grants", [[[1, 1, 0, 0, 1, 0]]], True],  # grants without their queue
        ["Grants", [[["q q", False], [[1, 1, 0, 0, 1, 0]]]], True],  # not a queue name
        ["Grants", [[["q", 0], [[1, 1, 0, 0, 1, 0]]]], True],  # the stack flag is a bool
        ["BatchUp", ["p", 0], [[["q", False, [1], [1, 2]]], 0, 0, 0], 0],  # counts, slots differ
        ["BatchUp", ["p", 0], [[["q", False, [3], [2]]], 0, 0, 0], 0],  # more ops than ranks
        ["BatchUp", ["p", 0], [[["q", 1, [1], [1]]], 0, 0, 0], 0],  # the stack flag is a bool
        ["BatchUp", ["p", 0], [[["", False, [1], [1]]], 0, 0, 0], 0],  # no queue name
        ["BatchUp", ["p", 0], [[["q/1", False, [1], [1]]], 0, 0, 0], 0],  # not a queue name
        ["BatchUp", ["p", 0], [[[1], [1]], 0, 0, 0], 0],  # a batch without its queue
        ["BatchUp", ["p", 0], [[1], [1], 0, 0, 0], 0],  # the format before named queues
        ["BatchUp", ["p", 3], [[["q", False, [1], [1]]], 0, 0, 0], 0],  # no such node kind
        ["BatchUp", ["", 0], [[["q", False, [1], [1]]], 0, 0, 0], 0],
        ["BatchUp", ["p" * 257, 0], [[["q", False, [1], [1]]], 0, 0, 0], 0],
        ["BatchUp", ["p", 0, 1], [[["q", False, [1], [1]]], 0, 0, 0], 0],
        ["Get", [0, 3, 4, 0, 0, 0, 0], 1, 0, ["p", 0], 1],  # more bits taken than it has
        ["Get", [0, 65, 0, 0, 0, 0, 0], 1, 0, ["p", 0], 1],  # more bits than a label
        ["Get", [1 << 64, 3, 0, 0, 0, 0, 0], 1, 0, ["p", 0], 1],  # not a label
        ["Get", [0, 3, 0, 0, 3, 0, 0], 1, 0, ["p", 0], 1],  # no such phase
        ["Get", [0, 3, 0, 0, 0, 2, 0], 1, 0, ["p", 0], 1],  # heading not -1, 0, 1
        ["Get", [0, 3, 0, 0, 0, 0, -1], 1, 0, ["p", 0], 1],
        ["Get", [0, 3, 0, 0, 0, 0], 1, 0, ["p", 0], 1],
        ["Put", [0, 3, 0, 0, 0, 0, 0], 1, {"x": 1}, 0, ["p", 0], 1, False],
        ["Put", [0, 3, 0, 0, 0, 0, 0], 1, b"x", 0, ["p", 0], 1, 0],  # ack must be a bool
    ],
)
def test_malformed_messages_are_remote_protocol_errors(bad: Any) -> None:
    with pytest.raises(RemoteProtocolError):
        decode_message(bad)


def test_every_field_retyped_bumped_or_dropped_is_rejected_or_exact() -> None:
    """Exhaustive over single changes: each place in each sampled message gets every
    retyping, an off-by-one and out-of-range bumps, and (in lists) each deletion."""
    tried = 0
    for message in sim_messages():
        for path in paths(message)[1:]:
            target = get_at(message, path)
            variants = list(retyped(target))
            if type(target) is int:
                variants += [target - 1, target + 1, -1, 1 << 64, 1.5]
            for new in variants:
                decode_or_reject(normalise(replace_at(message, path, new)))
                tried += 1
            parent, i = get_at(message, path[:-1]), path[-1]
            decode_or_reject(replace_at(message, path[:-1], parent[:i] + parent[i + 1 :]))
            tried += 1
    assert tried > 1000
