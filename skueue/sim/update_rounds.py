"""Rounds an update phase takes (paper Theorem 17), in the synchronous simulator.

A ring of ``n`` processes settles for a few tree round trips; then ``joins`` processes
join (through one contact) and ``leaves`` processes leave, all at once, and the run goes
on until every join and leave went through.  The phase is timed from the round in which
the anchor issues the update grants to the round in which the last node hears "update
over".  Joins and leaves are reported in batches first, so the wait before the phase
(up to the trigger's age bound) is reported separately.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from skueue.core.process import Process
from skueue.overlay.labels import Kind
from skueue.sim.cluster import ring_problems, tree_height
from skueue.sim.rounds import SimStuck, SyncConfig, SyncSim

ROUNDS_MAX = 50_000


@dataclass(frozen=True, slots=True)
class PhaseTiming:
    processes: int
    joins: int
    leaves: int
    seed: int
    rounds_to_phase: int  # from the requests to the first update grants
    phase_rounds: int  # the update phase itself (all phases, if the trigger split them)
    phases: int
    tree_height_after: int
    wall_seconds: float


def measure_update_phase(n: int, joins: int, leaves: int, seed: int = 0) -> PhaseTiming:
    started = time.perf_counter()
    sim = SyncSim(SyncConfig(processes=n, rounds=0, seed=seed, tick_all=True))
    rng = random.Random(seed)
    # Let the first batches go round so that the tree runs in its steady rhythm.
    for _ in range(20):
        sim.step(generate=False)
    contact = sim.order[0].nodes[Kind.LEFT].me
    for i in range(joins):
        joiner = Process.create_joining(f"new{i}", contact, sim.config.structure)
        sim.add_process(joiner, joiner.join())
    for p in rng.sample(sim.order[1:n], min(leaves, n - 1)):
        p.leave()  # no leases in these runs: nothing to return
    asked_at = sim.round
    first_phase = None
    phase_rounds = 0
    phases = 0
    in_phase = False
    while True:
        sim.step(generate=False)
        now_in_phase = any(
            node.member.phase is not None
            for p in sim.order
            if not p.departed
            for node in p.nodes.values()
        )
        if now_in_phase:
            phase_rounds += 1
            if not in_phase:
                phases += 1
                first_phase = first_phase if first_phase is not None else sim.round
        in_phase = now_in_phase
        done = all(p.joined and not p.leaving for p in sim.order if not p.departed)
        if done and not in_phase:
            break
        if sim.round - asked_at > ROUNDS_MAX:
            raise SimStuck(f"update phase for n={n} joins={joins} leaves={leaves} not over")
    problems = ring_problems(sim.order)
    if problems:
        raise AssertionError("\n".join(problems[:10]))
    live = {pid: p for pid, p in sim.processes.items() if not p.departed}
    return PhaseTiming(
        n,
        joins,
        leaves,
        seed,
        (first_phase or sim.round) - asked_at,
        phase_rounds,
        phases,
        tree_height(live),
        round(time.perf_counter() - started, 2),
    )
