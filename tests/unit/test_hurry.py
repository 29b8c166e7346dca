"""Hurry hints: a daemon ticks only when Process.tick_due says NOW (else at a slow idle
pace), so a lone operation must not wait for that pace anywhere in the tree.  These
tests drive processes the way a daemon whose idle pace never comes would: deliver every
message at once, tick only the processes that are due NOW."""

from __future__ import annotations

import random
from typing import Any

import pytest

from skueue.core.effects import Complete, Effect, Send
from skueue.core.errors import RemoteProtocolError
from skueue.core.messages.stages import Hurry
from skueue.core.ops import OpKind, Structure
from skueue.core.process import Process, TickDue
from skueue.sim.cluster import build_cluster
from skueue.wire.peer import encode_message

# Four processes whose tree is three processes deep (found by printing trees of random
# addresses): the deepest leaf needs hints both up and down the tree.
ADDRESSES = [f"127.0.0.1:{port}" for port in (41726, 42411, 49098, 45176)]
STEPS_MAX = 200


def paced_cluster(
    structure: Structure, *, hurry: bool, addresses: list[str] = ADDRESSES
) -> dict[str, Process]:
    processes = build_cluster(addresses, structure, hurry=hurry)
    for _ in range(5):  # every tree edge has carried batches: the tree is idle, not new
        for p in processes.values():
            deliver(processes, p.tick(), [])
    return processes


def deliver(processes: dict[str, Process], effects: list[Effect], seen: list[Any]) -> None:
    """Deliver everything now, recording each message sent (encoded) and completion."""
    pending = list(effects)
    while pending:
        effect = pending.pop(0)
        if isinstance(effect, Send):
            seen.append(encode_message(effect.message))
            pending.extend(processes[effect.to.process].handle(effect.to, effect.message))
        else:
            seen.append(effect)


def lone_operation(processes: dict[str, Process], at: str, kind: OpKind) -> list[Any]:
    """Submit one operation at ``at`` and run NOW ticks until none is due; returns what
    was sent and completed."""
    seen: list[Any] = []
    p = processes[at]
    deliver(processes, p.submit(p.new_op(kind, b"x" if kind.inserts else None)), seen)
    for _ in range(STEPS_MAX):
        due = [q for q in processes.values() if q.tick_due() is TickDue.NOW]
        if not due:
            return seen
        for q in due:
            deliver(processes, q.tick(), seen)
    raise AssertionError(f"still NOW after {STEPS_MAX} steps: hints spin")


def completions(seen: list[Any]) -> int:
    return sum(isinstance(x, Complete) for x in seen)


def hurry_messages() -> list[Any]:
    """Encoded Hurry messages from a paced run (for the wire's every-kind test)."""
    processes = paced_cluster(Structure.QUEUE, hurry=True)
    seen = lone_operation(processes, ADDRESSES[2], OpKind.ENQUEUE)
    return [m for m in seen if isinstance(m, list) and m[0] == "Hurry"]


@pytest.mark.parametrize("structure", list(Structure))
@pytest.mark.parametrize("size", [2, 3, 4, 6, 8])
def test_a_lone_operation_completes_without_the_idle_pace(structure: Structure, size: int) -> None:
    """In clusters of random addresses (so of many tree shapes), an operation submitted
    at each process in turn completes with NOW ticks only, and the ticks stop."""
    insert, remove = (
        (OpKind.ENQUEUE, OpKind.DEQUEUE)
        if structure is Structure.QUEUE
        else (OpKind.PUSH, OpKind.POP)
    )
    rng = random.Random(size)
    for _ in range(30):
        addresses = [f"127.0.0.1:{port}" for port in rng.sample(range(30000, 60000), size)]
        processes = paced_cluster(structure, hurry=True, addresses=addresses)
        for at in addresses:
            for kind in (insert, remove):
                seen = lone_operation(processes, at, kind)
                assert completions(seen) == 1, (addresses, at, kind, seen)


def test_without_hints_some_lone_operation_waits_for_the_idle_pace() -> None:
    """The case above is a real one: with the hints off, an operation at the deepest
    leaf (its batch still in flight at an idle parent) waits for a paced tick."""
    processes = paced_cluster(Structure.QUEUE, hurry=False)
    stuck = [
        at
        for at in ADDRESSES
        if completions(lone_operation(processes, at, OpKind.ENQUEUE)) == 0
    ]
    assert stuck


def test_hints_go_only_to_other_processes_and_only_once_per_batch() -> None:
    processes = paced_cluster(Structure.QUEUE, hurry=True)
    p = processes[ADDRESSES[2]]
    first = p.submit(p.new_op(OpKind.ENQUEUE, b"x"))
    hints = [e for e in first if isinstance(e, Send) and isinstance(e.message, Hurry)]
    assert hints
    assert all(e.to.process != p.process_id for e in hints)
    # A second operation before anything moved asks nobody again.
    again = p.submit(p.new_op(OpKind.ENQUEUE, b"y"))
    assert not [e for e in again if isinstance(e, Send) and isinstance(e.message, Hurry)]


def test_a_hint_claiming_to_come_from_the_same_process_is_refused() -> None:
    processes = paced_cluster(Structure.QUEUE, hurry=True)
    p = processes[ADDRESSES[0]]
    left, middle = (p.node_ref(k) for k in sorted(p.nodes)[:2])
    with pytest.raises(RemoteProtocolError):
        p.handle(left, Hurry(middle))


def test_an_idle_cluster_sends_no_hints() -> None:
    processes = paced_cluster(Structure.QUEUE, hurry=True)
    seen: list[Any] = []
    for p in processes.values():
        deliver(processes, p.tick(), seen)
    assert not [m for m in seen if isinstance(m, list) and m[0] == "Hurry"]
