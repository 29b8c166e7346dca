"""When a daemon should tick (Process.tick_due): at once when operations wait anywhere in
the process, at the idle pace when only empty batches can go, never NOW with nothing to
fire (that would spin)."""

from __future__ import annotations

import pytest

from skueue.core.effects import Send
from skueue.core.ops import OpKind, Structure
from skueue.core.process import Process, TickDue
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.cluster import build_cluster, process_ids


def settle(processes: dict[str, Process]) -> None:
    """Tick and deliver until every process is quiet and nothing is on its way."""
    for _ in range(1000):
        pending = [e for p in processes.values() for e in p.tick() if isinstance(e, Send)]
        while pending:
            s = pending.pop()
            out = processes[s.to.process].handle(s.to, s.message)
            pending.extend(e for e in out if isinstance(e, Send))
        if all(p.tick_due() is not TickDue.NOW for p in processes.values()):
            return


def test_an_operation_makes_its_process_tick_at_once() -> None:
    processes = build_cluster(process_ids(1), Structure.QUEUE)
    (solo,) = processes.values()
    settle(processes)
    assert solo.tick_due() is TickDue.IDLE  # an idle tree: only empty batches can go
    solo.submit(solo.new_op(OpKind.ENQUEUE, b"x"))
    # The intake node waits for its own process's children: they must not wait for the
    # idle pace, or every lone operation pays it.
    assert solo.tick_due() is TickDue.NOW
    effects = solo.tick()
    assert [type(e).__name__ for e in effects if not isinstance(e, Send)] == ["Complete"]


def test_now_only_when_some_node_can_fire() -> None:
    processes = build_cluster(process_ids(3), Structure.QUEUE)
    settle(processes)
    waiting = 0
    for p in processes.values():
        p.submit(p.new_op(OpKind.ENQUEUE, b"v"))
        p.tick()  # fires what it can; its nodes then wait for grants or children
        if not any(n.can_fire() for n in p.nodes.values()):
            waiting += 1
            # Nothing can fire, whatever waits: a tick would change nothing, so no NOW.
            assert p.tick_due() is TickDue.NOTHING
    assert waiting, "no process ended up waiting: the case was not exercised"


@pytest.mark.parametrize("seed", range(6))
def test_now_means_a_tick_fires_even_during_update_phases(seed: int) -> None:
    """An adversarial run with joins and leaves, its processes' own ticks replaced by
    the daemon's rule: whenever tick_due() says NOW, the tick must start a batch.  (A
    node in an update phase does not batch; counted as able to fire, it made a process
    with client operations waiting tick in a loop for the whole phase.)"""
    config = AsyncConfig(6, Structure.QUEUE, 80, 0.6, seed=seed, joins=2, leaves=2)
    sim = AsyncSim(config)
    phases = 0
    for _ in range(4000):
        if sim.finished():
            break
        sim.step()
        for p in sim.order:
            in_phase = any(n.member.phase is not None for n in p.nodes.values())
            if in_phase and phases < 20 and p.joined and not p.leaving:
                phases += 1
                sim._submit(p, OpKind.ENQUEUE)  # a client's operation waits there
            if p.tick_due() is TickDue.NOW:
                effects = p.tick()
                assert p.last_tick_fired, f"seed {seed}: NOW, but {p.describe()}"
                sim._apply(p, effects)
    assert phases, "no update phase happened: the case was not exercised"
