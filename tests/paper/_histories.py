"""Histories from both simulators, shared by the paper tests (each run is cached).

Every case names the exact configuration that replays it, so a failing assertion can
print a one-line reproduction.  The configurations are small on purpose: the whole
``tests/paper`` directory has to stay well under a minute.
"""

from __future__ import annotations

from functools import cache

import attrs

from skueue.check.history import Record
from skueue.core.ops import Structure
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.rounds import SyncConfig, SyncSim


@attrs.frozen
class Case:
    driver: str  # "sync" or "async"
    processes: int
    seed: int
    insert_ratio: float
    structure: Structure = Structure.QUEUE
    rounds: int = 200  # sync only
    per_node_probability: float | None = None  # sync only
    operations: int = 150  # async only
    max_steps: int = 2_000_000  # async only: a stuck run fails after this many steps

    @property
    def id(self) -> str:
        rate = "" if self.per_node_probability is None else f"-p{self.per_node_probability}"
        ops = "" if self.driver == "sync" or self.operations == 150 else f"-ops{self.operations}"
        return (
            f"{self.driver}-{self.structure.value}-n{self.processes}-seed{self.seed}"
            f"-ins{self.insert_ratio}{rate}{ops}"
        )

    def config(self) -> SyncConfig | AsyncConfig:
        if self.driver == "sync":
            return SyncConfig(
                processes=self.processes,
                structure=self.structure,
                rounds=self.rounds,
                per_node_probability=self.per_node_probability,
                insert_ratio=self.insert_ratio,
                seed=self.seed,
            )
        return AsyncConfig(
            processes=self.processes,
            structure=self.structure,
            operations=self.operations,
            insert_ratio=self.insert_ratio,
            seed=self.seed,
            max_steps=self.max_steps,
        )

    @property
    def replay(self) -> str:
        """A Python expression that reruns this case."""
        sim = "SyncSim" if self.driver == "sync" else "AsyncSim"
        return f"{sim}({self.config()!r}).run()"


def _sync_cases(structure: Structure) -> list[Case]:
    return [
        Case("sync", 8, 1, 0.5, structure),
        Case("sync", 32, 2, 0.6, structure),
        Case("sync", 128, 3, 0.4, structure),
        # One request per process per round: batches with many runs (Theorem 18's load).
        Case("sync", 16, 4, 0.5, structure, rounds=60, per_node_probability=1.0),
    ]


def _async_cases(structure: Structure) -> list[Case]:
    return [
        Case("async", processes, seed, (0.4, 0.5, 0.6)[seed % 3], structure)
        for processes in (2, 5, 9)
        for seed in range(8)
    ]


QUEUE_SYNC = _sync_cases(Structure.QUEUE)
QUEUE_ASYNC = _async_cases(Structure.QUEUE)
QUEUE_CASES = QUEUE_SYNC + QUEUE_ASYNC
STACK_ASYNC = _async_cases(Structure.STACK)
# Longer schedules on two and three processes: the hazard that the stack's stage-4 wait
# removes (paper §VI: a Push's Put delayed past two later batches at the same position)
# needs many batches per process.  Without the wait, about 7% of these schedules leave
# a Pop waiting forever; a normal run needs under 4,000 steps, so 200,000 fails such a run
# quickly.
STACK_SWEEP = [
    Case("async", processes, seed, 0.5, Structure.STACK, operations=400, max_steps=200_000)
    for processes in (2, 3)
    for seed in range(30)
]


@cache
def history(case: Case) -> tuple[Record, ...]:
    config = case.config()
    if isinstance(config, SyncConfig):
        return tuple(SyncSim(config).run().records)
    return tuple(AsyncSim(config).run().records)


def ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


def ord_of(r: Record) -> int:
    """The record's rank in the anchor's order (every simulator record carries one)."""
    assert r.ord is not None, f"no ord: {r.describe()}"
    return r.ord


def position_of(r: Record) -> int:
    assert r.position is not None, f"no position: {r.describe()}"
    return r.position
