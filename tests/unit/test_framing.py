"""Length-prefixed msgpack frames: the sans-IO decoder, without sockets."""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skueue.core.errors import RemoteProtocolError
from skueue.wire.framing import (
    FRAME_BYTES_MAX,
    HEADER_BYTES,
    OVERSIZED_PREFIX_BYTES,
    BufferBudget,
    BufferBudgetExceeded,
    FrameDecoder,
    Oversized,
    pack,
    pack_many,
    unpack_payload,
)

FRAMES = [
    ["hello-client", 1],
    ["insert", 7, [b"a", b"\x00" * 300]],
    ["done", 7, [[1, 2], [3, None]]],
    ["stats", 9, {"processes": 3, "members": []}],
    [],
    "text",
    None,
]


def header(length: int) -> bytes:
    return struct.pack(">I", length)


def test_pack_is_a_big_endian_length_then_msgpack() -> None:
    blob = pack(["x", 1])
    payload = msgpack.packb(["x", 1], use_bin_type=True)
    assert blob == header(len(payload)) + payload
    assert HEADER_BYTES == 4


def test_frames_come_out_whole_from_one_feed() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(pack_many(FRAMES)) == FRAMES
    assert decoder.pending_bytes == 0


def test_frames_split_at_every_byte_come_out_once_and_in_order() -> None:
    blob = pack_many(FRAMES)
    decoder = FrameDecoder()
    got: list[Any] = []
    for i in range(len(blob)):
        got += decoder.feed(blob[i : i + 1])
        assert decoder.pending_bytes == len(blob[: i + 1]) - len(pack_many(got))
    assert got == FRAMES
    assert decoder.pending_bytes == 0


@given(st.lists(st.integers(1, 64), max_size=30))
def test_frames_split_anywhere_come_out_the_same(cuts: list[int]) -> None:
    blob = pack_many(FRAMES)
    decoder = FrameDecoder()
    got: list[Any] = []
    at = 0
    for size in cuts:
        got += decoder.feed(blob[at : at + size])
        at += size
    got += decoder.feed(blob[at:])
    assert got == FRAMES


def test_a_truncated_frame_stays_pending() -> None:
    blob = pack(["remove", 1, 1])
    decoder = FrameDecoder()
    assert decoder.feed(blob[:-1]) == []
    assert decoder.pending_bytes == len(blob) - 1
    assert decoder.feed(blob[-1:]) == [["remove", 1, 1]]


def test_an_empty_feed_is_harmless() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(bytearray()) == []


@pytest.mark.parametrize("length", [FRAME_BYTES_MAX + 1, 1 << 31, 0xFFFFFFFF])
def test_an_over_limit_prefix_is_rejected_from_the_header_alone(length: int) -> None:
    """The header is enough: the decoder does not wait for (or buffer) the body."""
    decoder = FrameDecoder()
    with pytest.raises(RemoteProtocolError, match="exceeds the limit"):
        decoder.feed(header(length))
    assert decoder.pending_bytes == HEADER_BYTES


def test_an_over_limit_prefix_is_rejected_when_its_header_arrives_in_pieces() -> None:
    decoder = FrameDecoder(frame_bytes_max=100)
    blob = header(101) + b"x" * 10
    for i in range(HEADER_BYTES - 1):
        assert decoder.feed(blob[i : i + 1]) == []
    with pytest.raises(RemoteProtocolError):
        decoder.feed(blob[HEADER_BYTES - 1 :])


def test_an_over_limit_frame_after_good_ones_is_rejected() -> None:
    decoder = FrameDecoder(frame_bytes_max=100)
    with pytest.raises(RemoteProtocolError):
        decoder.feed(pack(["ok"]) + header(101))


def test_a_frame_exactly_at_the_limit_is_accepted() -> None:
    value = b"y" * 90
    payload = msgpack.packb(value, use_bin_type=True)
    decoder = FrameDecoder(frame_bytes_max=len(payload))
    assert decoder.feed(pack(value)) == [value]
    with pytest.raises(RemoteProtocolError):
        FrameDecoder(frame_bytes_max=len(payload) - 1).feed(pack(value))


MALFORMED = {
    "never-used byte": b"\xc1",
    "array missing elements": b"\x93\x01",
    "extra data after the object": msgpack.packb(["stats", 1]) + b"\x01",
    "string cut short": b"\xa5ab",
    "integer map key": b"\x81\x01\x02",
    "list map key (unhashable)": b"\x81\x91\x01\x02",
    "nested too deep": b"\x91" * 5000,
    "invalid utf-8 in a str": b"\xa2\xff\xfe",
    "empty payload": b"",
    "array header claims more than the frame holds": b"\xdd\xff\xff\xff\xff",
}


@pytest.mark.parametrize("payload", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_payload_is_a_remote_protocol_error(payload: bytes) -> None:
    with pytest.raises(RemoteProtocolError, match="malformed msgpack"):
        FrameDecoder().feed(header(len(payload)) + payload)


@given(st.binary(max_size=200))
def test_any_payload_decodes_or_raises_remote_protocol_error(payload: bytes) -> None:
    with contextlib.suppress(RemoteProtocolError):
        unpack_payload(payload)


@given(st.binary(max_size=300))
def test_any_byte_stream_decodes_or_raises_remote_protocol_error(data: bytes) -> None:
    decoder = FrameDecoder(frame_bytes_max=256)
    with contextlib.suppress(RemoteProtocolError):
        decoder.feed(data)


# -- oversized frames skipped, and the shared budget (issue 8, items 10 and 16) --------------


def test_an_oversized_frame_is_skipped_without_buffering_and_the_next_one_decodes() -> None:
    decoder = FrameDecoder(frame_bytes_max=100, skip_oversized=True)
    big = pack(["insert", 7, [b"x" * 5000]])
    got: list[Any] = []
    for i in range(0, len(big), 300):
        got += decoder.feed(big[i : i + 300])
        assert decoder.pending_bytes <= 300 + HEADER_BYTES  # never the whole frame
        assert decoder.in_frame or i + 300 >= len(big)
    ((skipped,),) = [got]
    assert isinstance(skipped, Oversized) and skipped.length == len(big) - HEADER_BYTES
    assert skipped.prefix == big[HEADER_BYTES : HEADER_BYTES + OVERSIZED_PREFIX_BYTES]
    assert not decoder.in_frame
    assert decoder.feed(pack(["stats", 1])) == [["stats", 1]]


def test_an_oversized_frame_and_good_ones_in_one_feed() -> None:
    decoder = FrameDecoder(frame_bytes_max=100, skip_oversized=True)
    blob = pack(["a"]) + pack([b"y" * 500]) + pack(["b"])
    got = decoder.feed(blob)
    assert got[0] == ["a"] and isinstance(got[1], Oversized) and got[2] == ["b"]
    assert decoder.pending_bytes == 0 and not decoder.in_frame


def test_the_budget_is_charged_for_partial_frames_only_and_given_back() -> None:
    budget = BufferBudget(1000)
    a, b = FrameDecoder(), FrameDecoder()
    a.attach(budget)
    b.attach(budget)
    blob = pack(b"z" * 900)
    assert a.feed(blob[:600]) == [] and budget.used == 600
    with pytest.raises(BufferBudgetExceeded, match="more than 1000 bytes"):
        b.feed(blob[:600])
    assert a.feed(blob[600:]) == [b"z" * 900] and budget.used == 0
    a.feed(blob[:10])
    a.release()
    assert budget.used == 0


def test_whole_frames_cost_no_budget() -> None:
    budget = BufferBudget(10)
    decoder = FrameDecoder()
    decoder.attach(budget)
    assert decoder.feed(pack_many([b"q" * 100] * 5)) == [b"q" * 100] * 5
    assert budget.used == 0
