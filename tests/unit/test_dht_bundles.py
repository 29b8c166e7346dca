"""DHT bundles: one message per destination node per step instead of one per operation,
with nothing else changed (skueue/core/dht_bundles.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from skueue.check.checker import check
from skueue.core import dht_bundles, process
from skueue.core.batch import Batch
from skueue.core.dht_bundles import DHT_MESSAGE_OVERHEAD_BYTES, bundle_dht
from skueue.core.effects import Complete, Effect, Send
from skueue.core.membership.state import HANDOVER_OVERHEAD_BYTES
from skueue.core.messages.stages import BatchUp, DhtBundle, Get, GetReply, Put, PutAck
from skueue.core.ops import Structure
from skueue.dht.keys import POSITIONS_PER_BLOCK
from skueue.overlay.labels import Kind, node_ref
from skueue.sim.rounds import SyncConfig, SyncSim

A = node_ref("127.0.0.1:1", Kind.LEFT)
B = node_ref("127.0.0.1:2", Kind.MIDDLE)
ME = node_ref("127.0.0.1:3", Kind.LEFT)
BUDGET = 1 << 20


def put(i: int, element: bytes = b"e") -> Put:
    """A Put in block ``i``: Puts for consecutive positions of one block would go as one
    run (tests/unit/test_dht_runs.py), these only share the destination."""
    position = i * POSITIONS_PER_BLOCK
    return Put(None, position, element, 0, ME, position, True)


def kinds(effects: list[Effect]) -> list[Any]:
    out: list[Any] = []
    for e in effects:
        if isinstance(e, Send):
            m = e.message
            inner = [type(x).__name__ for x in m.messages] if isinstance(m, DhtBundle) else None
            out.append((e.to, type(m).__name__, inner))
        else:
            out.append(type(e).__name__)
    return out


def test_messages_for_one_node_go_as_one_bundle_where_the_first_was() -> None:
    done = Complete(1, b"v", 0, 1)
    effects: list[Effect] = [
        Send(A, put(1)), done, Send(B, Get(None, 2, 0, ME, 2)), Send(A, PutAck(3)),
        Send(A, GetReply(4, 5, b"x")),
    ]  # fmt: skip
    assert kinds(bundle_dht(effects, BUDGET)) == [
        (A, "DhtBundle", ["Put", "PutAck", "GetReply"]),
        "Complete",
        (B, "Get", None),  # alone: sent as it is
    ]


def test_another_kind_of_message_to_the_same_node_is_not_overtaken() -> None:
    effects: list[Effect] = [
        Send(A, put(1)), Send(A, put(2)), Send(A, BatchUp(ME, Batch(), 0)),
        Send(A, put(3)), Send(A, put(4)),
    ]  # fmt: skip
    assert kinds(bundle_dht(effects, BUDGET)) == [
        (A, "DhtBundle", ["Put", "Put"]),
        (A, "BatchUp", None),
        (A, "DhtBundle", ["Put", "Put"]),
    ]


def test_a_bundle_stays_under_its_item_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dht_bundles, "DHT_BUNDLE_ITEMS_MAX", 3)
    out = bundle_dht([Send(A, put(i)) for i in range(1, 8)], BUDGET)
    assert kinds(out) == [
        (A, "DhtBundle", ["Put"] * 3),
        (A, "DhtBundle", ["Put"] * 3),
        (A, "Put", None),
    ]


def test_a_bundle_stays_under_its_byte_budget_and_a_huge_element_goes_alone() -> None:
    element = b"x" * 1000
    per_message = len(element) + DHT_MESSAGE_OVERHEAD_BYTES
    budget = HANDOVER_OVERHEAD_BYTES + 3 * per_message  # room for three
    effects: list[Effect] = [Send(A, put(i, element)) for i in range(1, 6)]
    effects.append(Send(A, put(6, b"y" * (4 * per_message))))
    effects.append(Send(A, put(7, element)))
    out = bundle_dht(effects, budget)
    shapes = [
        len(e.message.messages) if isinstance(e.message, DhtBundle) else 1
        for e in out
        if isinstance(e, Send)
    ]
    assert shapes == [3, 2, 1, 1]


def run_sim(structure: Structure) -> Any:
    config = SyncConfig(processes=8, structure=structure, rounds=60, rate=8, seed=5)
    return SyncSim(config).run()


@pytest.mark.parametrize("structure", list(Structure))
def test_bundling_saves_messages_and_keeps_the_history_correct(
    structure: Structure, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same rounds, same operations; a process handles a round's messages in another
    order with bundles (a bundle is where its first message was), so the histories may
    differ, and both must be correct: linearizable, no element out twice or out of
    nowhere."""
    bundled = run_sim(structure)
    monkeypatch.setattr(process, "bundle_dht", lambda effects, budget: effects)
    plain = run_sim(structure)
    for result in (bundled, plain):
        verdict = check(result.records, model="linearizable", method="certificate")
        assert verdict.ok, verdict.describe()
        inserted = Counter(r.value for r in result.records if r.op in ("enqueue", "push"))
        removed = Counter(r.value for r in result.records if r.op in ("dequeue", "pop") and r.value)
        assert not removed - inserted and max(removed.values()) == 1
        assert len(result.records) == len(plain.records)
    assert bundled.network_messages < 0.8 * plain.network_messages
