"""Join, Leave and update-phase messages survive the wire unchanged, and malformed ones
are refused with RemoteProtocolError only."""

from __future__ import annotations

import msgpack
import pytest

from skueue.core.errors import RemoteProtocolError
from skueue.core.membership.state import NODE_BYTES_MAX, split_entries
from skueue.core.messages.membership import MEMBERSHIP_KINDS, Departing, HandoverPart
from skueue.core.ops import Structure
from skueue.core.parts.membership_state import HANDOVER_BYTES_MAX
from skueue.overlay.labels import Kind, node_ref
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.wire.framing import FRAME_BYTES_MAX, pack
from skueue.wire.peer import decode_message, encode_message


def churn_messages() -> list[object]:
    seen: list[object] = []
    for structure in Structure:
        # Small handovers, so that they go in pieces (HandoverPart) too.
        config = AsyncConfig(
            6,
            structure,
            60,
            0.6,
            seed=4,
            joins=3,
            leaves=3,
            value_bytes=200,
            handover_bytes_max=2048,
        )
        sim = AsyncSim(config)
        apply = sim._apply

        def spy(process, effects, apply=apply):  # type: ignore[no-untyped-def]
            seen.extend(e.message for e in effects if hasattr(e, "message"))
            return apply(process, effects)

        sim._apply = spy  # type: ignore[method-assign]
        sim.run()
    return seen


def test_every_membership_message_round_trips() -> None:
    messages = churn_messages()
    kinds = {type(m).__name__ for m in messages}
    # A churn run between processes sends every kind except those that stay inside one
    # process in these runs; all that were sent must come back equal.
    assert {
        "JoinRequest",
        "Integrate",
        "Departing",
        "HandoverPart",
        "StageDone",
        "UpdateOver",
    } <= kinds
    for m in messages:
        raw = msgpack.unpackb(msgpack.packb(encode_message(m), use_bin_type=True), raw=False)  # type: ignore[arg-type]
        assert decode_message(raw) == m


@pytest.mark.parametrize("kind", sorted(MEMBERSHIP_KINDS))
def test_wrong_arity_and_types_are_remote_protocol_errors(kind: str) -> None:
    for rest in ([], [None], [1, 2, 3, 4, 5, 6, 7], [["x", 9]], ["p", True]):
        try:
            decode_message([kind, *rest])
        except RemoteProtocolError:
            continue
        # A few kinds take exactly these shapes (Absorbed, UpdateOver take nothing).
        assert rest == [] and kind in ("Absorbed", "UpdateOver"), (kind, rest)


# -- handovers in bounded pieces (issue 8, item 8) ---------------------------------------


def frame_size(message: object) -> int:
    """Bytes on the wire of the peer frame that carries ``message``, header included."""
    return len(pack(["msg", 0, encode_message(message)]))  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [2048, 5000])
def test_no_handover_message_exceeds_the_limit(limit: int) -> None:
    """Churn runs with large elements: every message any process sends, encoded as a
    peer frame, fits ``handover_bytes_max``, and the big handovers did go in pieces."""
    sizes: dict[str, int] = {}
    for structure in Structure:
        sim = AsyncSim(
            AsyncConfig(
                5,
                structure,
                100,
                0.9,
                seed=7,
                joins=2,
                leaves=3,
                value_bytes=300,
                handover_bytes_max=limit,
            )
        )
        apply = sim._apply

        def spy(process, effects, apply=apply):  # type: ignore[no-untyped-def]
            for e in effects:
                if hasattr(e, "message"):
                    kind = type(e.message).__name__
                    sizes[kind] = max(sizes.get(kind, 0), frame_size(e.message))
            return apply(process, effects)

        sim._apply = spy  # type: ignore[method-assign]
        sim.run()
    assert {"HandoverPart", "Departing", "Integrate"} <= set(sizes), sizes
    assert max(sizes.values()) <= limit, sizes


def test_a_daemon_holding_41_mib_leaves_in_frames_under_the_limit() -> None:
    """The case of issue 8: 41 entries of 1 MiB each leave in pieces of at most the
    core's default ``handover_bytes_max`` (4 MiB), far under the 16 MiB frame limit."""
    me, pred, succ = (node_ref(f"10.0.0.{i}:7400", Kind.LEFT) for i in (1, 2, 3))
    entries = [("default", p, 0, bytes([p]) * (1 << 20)) for p in range(1, 42)]
    pieces = split_entries(entries, HANDOVER_BYTES_MAX, NODE_BYTES_MAX * 2)
    messages: list[object] = [HandoverPart(me, i, piece) for i, piece in enumerate(pieces[:-1])]
    messages.append(Departing(me, succ, pieces[-1], (), len(pieces) - 1))
    assert len(messages) > 10
    assert all(frame_size(m) <= HANDOVER_BYTES_MAX for m in messages)
    assert all(frame_size(m) < FRAME_BYTES_MAX for m in messages)
    carried = [e for m in messages for e in m.entries]  # type: ignore[attr-defined]
    assert carried == entries, "every entry exactly once, in order"
    assert pred != me


def test_an_element_larger_than_a_piece_goes_alone() -> None:
    big = ("default", 1, 0, b"x" * 5000)
    small = [("default", p, 0, b"y") for p in range(2, 5)]
    pieces = split_entries([*small[:1], big, *small[1:]], 2048)
    assert (big,) in pieces
    assert sorted(e for piece in pieces for e in piece) == sorted([big, *small])
