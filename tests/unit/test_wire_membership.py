"""Join, Leave and update-phase messages survive the wire unchanged, and malformed ones
are refused with RemoteProtocolError only."""

from __future__ import annotations

import msgpack
import pytest

from skueue.membership_messages import MEMBERSHIP_KINDS
from skueue.ops import Structure
from skueue.runtime.errors import RemoteProtocolError
from skueue.runtime.wire import decode_message, encode_message
from skueue.sim.adversary import AsyncConfig, AsyncSim


def churn_messages() -> list[object]:
    seen: list[object] = []
    for structure in Structure:
        sim = AsyncSim(AsyncConfig(6, structure, 60, 0.6, seed=4, joins=3, leaves=3))
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
    assert {"JoinRequest", "Integrate", "Departing", "StageDone", "UpdateOver"} <= kinds
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
