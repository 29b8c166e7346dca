"""A seeded fuzzing campaign over every decoder a stranger, a client or a peer reaches
(issue 13, tests: fuzzing), bytes first:

- the frame decoder (length prefixes, msgpack), fed in random pieces;
- the handshakes: a peer's hello and its auth map, a proof, the ``auth-peer`` frame, a
  client's hello, a link's ``["seq", ...]`` headers and its acks;
- every peer message kind (:data:`skueue.wire.peer.CODECS`) inside ``["msg", ...]``;
- every client request kind and every reply kind.

Each input is a valid frame of one of those, mutated: either as a value (a field
dropped, added, retyped, bumped, nested) or as bytes after packing (a bit flipped, a
byte changed, bytes cut, inserted or repeated, a length prefix rewritten), and then goes
the way the daemon's bytes go: through :class:`FrameDecoder` and into the decoder.  Each
must be taken or refused with :class:`RemoteProtocolError` (the error of blame: the
daemon logs it, answers and drops the connection), never anything else; a peer message
that is taken must mean exactly what was sent (re-encoding gives it back).  The
decoder never holds more than its limit, and the campaign's memory stays bounded
(tracemalloc: peak and what is left after).

``SKUEUE_PROFILE=long`` (or ``SKUEUE_FAULTS=long``) runs 10^5 inputs per target (6 x
10^5 in all); CI runs 10,000 per target.  The seed is printed; ``SKUEUE_FUZZ_SEED``
replays one.  The live daemons' share (bad frames on real connections, then a
workload) is ``tests/e2e/test_fuzz.py``; TLS garbage is in ``tests/e2e/test_tls.py``.
"""

from __future__ import annotations

import functools
import os
import random
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import msgpack
import pytest

from skueue.core.errors import RemoteProtocolError
from skueue.core.messages.membership import MEMBERSHIP_KINDS, JoinAcceptedAck, Withdraw
from skueue.core.messages.stages import MESSAGE_KINDS
from skueue.host.replies import Done, ErrorReply, More, StatsReply, Welcome
from skueue.host.requests import (
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
from skueue.overlay.labels import Kind, node_ref
from skueue.runtime.limits import Limits
from skueue.runtime.network.handshake import PEER_PROTOCOL, parse_peer_hello
from skueue.runtime.network.link_receiver import Inbound, Numbering
from skueue.runtime.network.link_sender import LinkSender
from skueue.runtime.network.peers import parse_peer_frame
from skueue.runtime.security.peer_auth import AUTH_FRAME, ClusterKeys, generate_key, new_challenge
from skueue.wire.client_codec import decode_reply, decode_request, encode_reply, encode_request
from skueue.wire.client_hello import ClientHello, parse_client_hello
from skueue.wire.client_protocol import oversized_request_id
from skueue.wire.framing import FrameDecoder, Oversized, pack
from skueue.wire.peer import CODECS, decode_message, encode_message
from tests.unit.test_wire import sim_messages, strictly_equal
from tests.unit.test_wire_membership import churn_messages

LONG = "long" in (os.environ.get("SKUEUE_PROFILE"), os.environ.get("SKUEUE_FAULTS"))
INPUTS_PER_TARGET = 100_000 if LONG else 10_000
FRAME_LIMIT = 64 * 1024  # the decoders' frame limit here: small, so that it is hit often
PEAK_BYTES_MAX = 64 * 1024 * 1024
LEFT_BYTES_MAX = 4 * 1024 * 1024
LIMITS = Limits(ops_per_request_max=50, value_bytes_max=1024)
KEYS = ClusterKeys((bytes.fromhex(generate_key()),))
SEED = int(os.environ.get("SKUEUE_FUZZ_SEED", random.randrange(1 << 32)))

SCALARS: list[Any] = [
    None, True, False, 0, 1, -1, 255, 256, 65_535, 1 << 31, (1 << 63) - 1, -(1 << 63),
    (1 << 64) - 1, 0.5, float("nan"), "", "x", "é" * 40, "hello-peer", "msg", "seq", "ack",
    b"", b"\x00", b"\xff" * 300, [], {}, {"challenge": "x"}, [[[]]], msgpack.ExtType(3, b"x"),
]  # fmt: skip


def mutate_value(value: Any, rng: random.Random, depth: int = 0) -> Any:
    """One structural or type change somewhere in a nested list or map."""
    if isinstance(value, dict) and value and rng.random() < 0.7:
        value = dict(value)
        key = rng.choice(list(value))
        if rng.random() < 0.3:
            del value[key]
        else:
            value[key] = mutate_value(value[key], rng, depth + 1)
        return value
    if not isinstance(value, list) or not value or depth > 5 or rng.random() < 0.2:
        if isinstance(value, int) and not isinstance(value, bool) and rng.random() < 0.5:
            return value + rng.choice([-1, 1, 1 << 32, -(1 << 32)])  # bumped, same type
        return rng.choice(SCALARS)
    value = list(value)
    i = rng.randrange(len(value))
    match rng.randrange(6):
        case 0:
            del value[i]
        case 1:
            value.insert(i, rng.choice(SCALARS))
        case 2:
            value[i] = rng.choice(SCALARS)
        case 3:
            value.append(rng.choice(SCALARS))
        case 4:
            value[i] = [value[i]]
        case _:
            value[i] = mutate_value(value[i], rng, depth + 1)
    return value


def mutate_bytes(blob: bytes, rng: random.Random) -> bytes:
    """One to three byte-level changes to a packed frame (its length prefix included)."""
    data = bytearray(blob)
    for _ in range(rng.randint(1, 3)):
        if not data:
            data += os.urandom(rng.randrange(1, 16))
            continue
        i = rng.randrange(len(data))
        match rng.randrange(7):
            case 0:
                data[i] ^= 1 << rng.randrange(8)
            case 1:
                data[i] = rng.randrange(256)
            case 2:
                del data[i : i + rng.randrange(1, 8)]
            case 3:
                data[i:i] = os.urandom(rng.randrange(1, 8))
            case 4:
                data[i:i] = data[i : i + rng.randrange(1, 16)]  # repeated
            case 5:
                length = rng.choice([0, 1, len(data), FRAME_LIMIT, FRAME_LIMIT + 1, 1 << 31])
                data[:4] = length.to_bytes(4, "big")  # a lying length prefix
            case _:
                del data[i:]  # cut short
    return bytes(data)


def through_the_wire(frame: Any, rng: random.Random, skip_oversized: bool = False) -> list[Any]:
    """What the daemon's decoder makes of ``frame`` mutated (as a value or as bytes),
    fed in random pieces.  Raises RemoteProtocolError for bytes it refuses."""
    if rng.random() < 0.5:
        frame = mutate_value(frame, rng)
        try:
            blob = pack(frame)
        except (OverflowError, ValueError, TypeError):
            return []  # msgpack cannot carry it: no peer could send it
    else:
        blob = mutate_bytes(pack(frame), rng)
    decoder = FrameDecoder(FRAME_LIMIT)
    decoder.skip_oversized = skip_oversized
    got: list[Any] = []
    at = 0
    while at < len(blob):
        step = rng.choice([1, 3, 7, 64, 4096, len(blob)])
        got.extend(decoder.feed(blob[at : at + step]))
        at += step
        assert decoder.pending_bytes <= FRAME_LIMIT + 4, decoder.pending_bytes
    return got


def refused_or_taken(check: Callable[[Any], None], frames: list[Any]) -> int:
    """Run ``check`` on each frame; 1 if one was refused (the connection would end)."""
    for frame in frames:
        try:
            check(frame)
        except RemoteProtocolError:
            return 1
    return 0


# -- the targets: a valid frame to mutate, and what the daemon does with it ----------------


def peer_samples() -> list[Any]:
    # The simulators' runs never send these two: built by hand.
    fuzz = node_ref("127.0.0.1:9", Kind.LEFT)
    rare = [JoinAcceptedAck(fuzz), Withdraw(fuzz, 2)]
    encoded = [*sim_messages(), *(encode_message(m) for m in [*churn_messages(), *rare])]  # type: ignore[arg-type]
    kinds = {m[0] for m in encoded}
    assert kinds == set(CODECS) == set(MESSAGE_KINDS) | set(MEMBERSHIP_KINDS), set(CODECS) - kinds
    by_kind: dict[str, list[Any]] = {}
    for m in encoded:
        by_kind.setdefault(m[0], []).append(m)
    return [m for kind in sorted(by_kind) for m in by_kind[kind][:5]]


def peer_message(frame: Any) -> None:
    parsed = parse_peer_frame(frame)
    if isinstance(parsed, tuple):  # taken: it must mean exactly what was sent
        again = encode_message(parsed[1])
        assert strictly_equal(again, frame[2]), (frame, again)
        assert decode_message(again) == parsed[1]


def handshake(frame: Any) -> None:
    """Whatever comes first on a connection, or second in a key handshake."""
    if isinstance(frame, list) and frame[:1] == ["hello-client"]:
        parse_client_hello(frame)
    elif isinstance(frame, list) and frame[:1] == [AUTH_FRAME] and len(frame) == 2:
        assert KEYS.verify(frame[1], "open", "a", "b", "p", "q") is False
    elif isinstance(frame, list) and frame[:1] in (["seq"], ["ack"]):
        link_control(frame)
    else:
        greeting = parse_peer_hello(frame)
        assert type(greeting.process) is str and greeting.process
        assert greeting.auth is None or isinstance(greeting.auth, dict)


def link_control(frame: Any) -> None:
    """A link's numbering header (receiver) or ack (sender)."""
    if isinstance(frame, list) and frame[:1] == ["ack"]:
        if not (len(frame) == 2 and type(frame[1]) is int):
            raise RemoteProtocolError("not an ack")
        sender = LinkSender()
        sender.add([["x"]] * 3)
        sender.acknowledged(frame[1])
        return
    numbering = Numbering("fuzz", Inbound(accepted=2, handled=2))
    numbering.number(frame)


def client_request(frame: Any) -> None:
    if isinstance(frame, Oversized):
        oversized_request_id(frame.prefix)
        return
    decode_request(frame, LIMITS)


def client_reply(frame: Any) -> None:
    decode_reply(frame)


HELLOS = [
    ["hello-peer", "p1", "127.0.0.1:7400", "feedfacefeedface", {"protocol": PEER_PROTOCOL}],
    ["hello-peer", "p1", "127.0.0.1:7400", "feedfacefeedface",
     {"protocol": PEER_PROTOCOL, "challenge": new_challenge()}],
    ["hello-peer", "p1", "127.0.0.1:7400", "feedfacefeedface", 12,
     {"protocol": PEER_PROTOCOL, "challenge": new_challenge(), "proof": "ab" * 32}],
    ClientHello(3, 5.0, True, "s" * 32, "t" * 32).frame(),
    ClientHello(3).frame(),
    [AUTH_FRAME, "ab" * 32],
    ["seq", 3, 2],
    ["ack", 2],
]  # fmt: skip
REQUESTS = [
    *(encode_request(r) for r in [
        InsertRequest(1, (b"a", b"bc")),
        InsertRequest(2, (b"a",), "jobs", True, 3, None),
        RemoveRequest(3, 2, "jobs", None, 100, 1000, 3),
        RemoveRequest(4, 1),
        RemoveRequest(5, 9, "jobs.dlq", None, None, 1000, None, True, fetch=True, look=True),
        LeaseRequest(6, "ack", (1, 2)),
        LeaseRequest(7, "extend", (4,), 5000),
        CreateRequest(8, "jobs", False, 3, 4),
        ConfigureRequest(9, "jobs", 5),
        DeleteRequest(10, "jobs"),
        PeekRequest(11, "jobs"),
        StatsRequest(12),
        LeaveRequest(13),
        JoinClusterRequest(14, "127.0.0.1:7400"),
        RemoveMemberRequest(15, ("p1", "10.0.0.1:7400")),
    ]),
    ["stats", 16, {"queue": "jobs"}],
]  # fmt: skip
REPLIES = [
    encode_reply(r)
    for r in [
        Welcome("p", "queue", 3, {"frame_bytes_max": 100}),
        More(3, (Removed(b"a", 1, 2),)),
        Done(4, (Removed(None, 1, None), Removed(b"x", 2, 3, LeaseGrant(5, 2, "nack")))),
        Done(5, (Inserted(1, 2), Inserted(3, 4))),
        Done(6, (Created(True),)),
        Done(7, (Configured("queue", 5, 1),)),
        Done(8, (Deleted(2, 9),)),
        Done(9, (LeaseAnswer(True), LeaseAnswer(False))),
        Done(10, (MembersRemoved((RemovedMember("p1", None, "nothing"),), ("p2",)),)),
        StatsReply(11, {"processes": 1}),
        ErrorReply(12, "no", "timeout"),
        ErrorReply(None, "bye", None),
    ]
]


TARGETS = (
    "frame decoder", "handshakes", "peer messages", "link control", "client requests",
    "client replies",
)  # fmt: skip


@functools.cache
def targets() -> dict[str, tuple[list[Any], Callable[[Any], None], bool]]:
    """name: (valid frames to mutate, what the daemon or client does with one, whether
    its decoder skips oversized frames as a client session's does)."""
    peers = peer_samples()
    return {
        "frame decoder": (HELLOS + REQUESTS + peers[:20], lambda f: None, False),
        "handshakes": (HELLOS, handshake, False),
        "peer messages": ([["msg", i % 3, m] for i, m in enumerate(peers)], peer_message, False),
        "link control": ([["seq", 3, 2], ["ack", 2], ["seq", 1, 1]], link_control, False),
        "client requests": (REQUESTS, client_request, True),
        "client replies": (REPLIES, client_reply, False),
    }


@pytest.mark.parametrize("name", TARGETS)
def test_every_decoder_takes_or_refuses_mutated_input_and_nothing_else(name: str) -> None:
    print(f"fuzz seed {SEED} (replay with SKUEUE_FUZZ_SEED={SEED})")
    samples, check, skip_oversized = targets()[name]
    rng = random.Random(f"{SEED}-{name}")
    refused = 0
    began = time.monotonic()
    tracemalloc.start()
    try:
        for i in range(INPUTS_PER_TARGET):
            frame = samples[i % len(samples)]
            try:
                got = through_the_wire(frame, rng, skip_oversized)
            except RemoteProtocolError:
                refused += 1
                continue
            refused += refused_or_taken(check, got)
        left, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    seconds = time.monotonic() - began
    print(
        f"{name}: {INPUTS_PER_TARGET} inputs, {refused} refused, in {seconds:.1f} s; "
        f"memory peak {peak / 1e6:.1f} MB, left {left / 1e6:.1f} MB"
    )
    # Mutations must reach the refusals, and some must still be taken (or the fuzzer
    # only tests the first check of each decoder).
    assert 0.05 * INPUTS_PER_TARGET < refused < 0.98 * INPUTS_PER_TARGET, refused
    assert peak < PEAK_BYTES_MAX and left < LEFT_BYTES_MAX, (peak, left)
