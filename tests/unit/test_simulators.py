"""The drivers: determinism, the idle-tick shortcut, stuck-run diagnosis, injected bugs."""

from __future__ import annotations

import collections
import dataclasses

import pytest

import skueue.core.node.virtual_node
from skueue.check.checker import check
from skueue.core.batch import RunGrant
from skueue.core.messages.stages import Grants
from skueue.core.ops import OpKind, Structure
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.cluster import build_cluster, process_ids
from skueue.sim.rounds import SimStuck, SyncConfig, SyncSim


@pytest.mark.parametrize("structure", list(Structure))
def test_skipping_idle_ticks_changes_nothing(structure: Structure) -> None:
    """Ticking only touched processes must give exactly the history of ticking all."""
    base = SyncConfig(processes=13, structure=structure, rounds=60, seed=7)
    fast = SyncSim(base).run()
    slow = SyncSim(dataclasses.replace(base, tick_all=True)).run()
    assert fast.records == slow.records
    assert fast.rounds_run == slow.rounds_run
    assert fast.network_messages == slow.network_messages


@pytest.mark.parametrize("structure", list(Structure))
def test_same_seed_same_history(structure: Structure) -> None:
    a = AsyncSim(AsyncConfig(7, structure, 40, 0.6, seed=99)).run()
    b = AsyncSim(AsyncConfig(7, structure, 40, 0.6, seed=99)).run()
    c = AsyncSim(AsyncConfig(7, structure, 40, 0.6, seed=100)).run()
    assert a.records == b.records and a.steps == b.steps
    assert [r.invoke for r in a.records] != [r.invoke for r in c.records]


def test_one_process_is_a_plain_queue() -> None:
    """With one process, Enqueue/Dequeue have exactly the semantics of a classical queue."""
    sim = SyncSim(SyncConfig(processes=1, rounds=0))
    process = sim.order[0]
    outbox: list = []
    for kind in [OpKind.ENQUEUE] * 3 + [OpKind.DEQUEUE] * 4 + [OpKind.ENQUEUE, OpKind.DEQUEUE]:
        sim.submit(process, kind, outbox)
    sim.drain()
    results = [
        r.value for r in sorted(sim.recorder.records, key=lambda r: r.seq) if r.op == "dequeue"
    ]
    assert results == ["p0-0", "p0-1", "p0-2", None, "p0-7"]


def test_one_process_is_a_plain_stack() -> None:
    sim = SyncSim(SyncConfig(processes=1, rounds=0, structure=Structure.STACK))
    process = sim.order[0]
    outbox: list = []
    kinds = [OpKind.PUSH, OpKind.PUSH, OpKind.POP, OpKind.PUSH, OpKind.POP, OpKind.POP, OpKind.POP]
    for kind in kinds:
        sim.submit(process, kind, outbox)
    sim.drain()
    results = [r.value for r in sorted(sim.recorder.records, key=lambda r: r.seq) if r.op == "pop"]
    assert results == ["p0-1", "p0-3", "p0-0", None]


def test_a_lost_message_is_diagnosed() -> None:
    """A run that cannot finish names the node and what it waits for."""
    sim = SyncSim(SyncConfig(processes=5, rounds=5, drain_rounds_max=300, seed=3))
    for _ in range(5):
        sim.step(generate=True)
    # Lose every grant in flight: their receivers wait forever.
    dropped = [s for s in sim.inbox if isinstance(s.message, Grants)]
    while not dropped:
        sim.step(generate=False)
        dropped = [s for s in sim.inbox if isinstance(s.message, Grants)]
    sim.inbox = [s for s in sim.inbox if not isinstance(s.message, Grants)]
    with pytest.raises(SimStuck) as stuck:
        sim.drain()
    assert "waits for grants for its batch" in str(stuck.value)
    assert dropped[0].to.describe() in str(stuck.value)


def test_cluster_needs_a_process() -> None:
    with pytest.raises(ValueError):
        build_cluster([], Structure.QUEUE)
    assert process_ids(3) == ["p0", "p1", "p2"]


def test_an_injected_ordering_bug_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness can fail: hand out each run's positions back to front and the checkers
    see one process's own elements come out in the wrong order."""
    monkeypatch.setattr(
        RunGrant, "position", lambda self, i: self.first + (self.available - 1 - i) * self.step
    )
    verdicts = []
    for seed in range(5):
        records = SyncSim(SyncConfig(processes=3, rounds=60, rate=10, seed=seed)).run().records
        verdicts.append(check(records, model="sc").ok)
    assert not any(verdicts)


def test_an_injected_loss_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop every tenth Put at the DHT and the drain check notices the lost elements."""
    original = skueue.core.node.virtual_node.VirtualNode._store
    counter = collections.Counter[str]()

    def lossy(self, put):  # type: ignore[no-untyped-def]
        counter["puts"] += 1
        if counter["puts"] % 10 == 0:
            return []
        return original(self, put)

    monkeypatch.setattr(skueue.core.node.virtual_node.VirtualNode, "_store", lossy)
    with pytest.raises(SimStuck):
        # Gets for the lost Puts wait forever: the run cannot become quiescent.
        AsyncSim(AsyncConfig(5, Structure.QUEUE, 60, 0.7, seed=1, max_steps=50_000)).run()
