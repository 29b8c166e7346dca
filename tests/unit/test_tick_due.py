"""When a daemon should tick (Process.tick_due): at once when operations wait anywhere in
the process, at the idle pace when only empty batches can go, never NOW with nothing to
fire (that would spin)."""

from __future__ import annotations

from skueue.core.effects import Send
from skueue.core.ops import OpKind, Structure
from skueue.core.process import Process, TickDue
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
