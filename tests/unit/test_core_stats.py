"""The core's account of itself for drivers: update phases and batch counts in
``Process.stats()`` and ``Process.batch_counts()`` (skueue/core/stats.py; issue 15)."""

from __future__ import annotations

from skueue.core.process import Process
from skueue.overlay.labels import Kind
from skueue.sim.rounds import SyncConfig, SyncSim

ROUNDS_MAX = 5_000


def test_a_join_shows_as_an_update_phase_with_its_stages_and_is_counted() -> None:
    sim = SyncSim(SyncConfig(processes=3, rounds=0, seed=1, tick_all=True))
    for _ in range(20):
        sim.step(generate=False)
    old = list(sim.order)
    assert all(
        n.phases_entered == 0 == n.phase_stage for p in old for n in p.stats().nodes.values()
    )
    joiner = Process.create_joining("new", old[0].nodes[Kind.LEFT].me, sim.config.structure)
    sim.add_process(joiner, joiner.join())
    stages: set[int] = set()
    for _ in range(ROUNDS_MAX):
        sim.step(generate=False)
        stages |= {n.phase_stage for p in old for n in p.stats().nodes.values()}
        if joiner.joined and not any(s.member.phase for p in old for s in p.nodes.values()):
            break
    else:
        raise AssertionError("the join did not go through")
    assert {1, 2, 3} <= stages  # quiet, joins, leaves
    for p in old:
        nodes = p.stats().nodes.values()
        assert all(n.phases_entered == 1 and n.phase_stage == 0 for n in nodes), p.stats()


def test_batch_counts_follow_the_batches_each_node_sends() -> None:
    sim = SyncSim(SyncConfig(processes=2, rounds=0, seed=1, tick_all=True))
    p = sim.order[0]
    before = p.batch_counts()
    for _ in range(10):
        sim.step(generate=False)
    after = p.batch_counts()
    stats = p.stats().nodes
    assert len(after) == 3 and all(a[0] > b[0] for a, b in zip(after, before, strict=True))
    assert [a[0] for a in after] == [stats[k.name.lower()].batches_sent for k in p.nodes]
