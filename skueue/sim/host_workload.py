"""The workload of a hosts simulation (skueue/sim/hosts.py): one script of operations that
the clients take in turn.

The default queue's inserts and removes, and on named queues what a test asks for: a
priority queue ``pq`` made with ``pq_levels`` levels (enqueues at random levels,
dequeues, peeks, a new delivery limit now and then), and a name ``d`` deleted now and
then and made again as a queue or a stack.  Each queue's operations keep their order;
the lists are interleaved at random.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

PQ = "pq"
"""The priority queue of ``pq_levels`` levels (its operations: ``pq_operations``)."""
D = "d"
"""The name deleted and made again, as a queue or a stack (``d_operations``)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """One operation of the workload."""

    kind: str  # insert, remove, peek, delete, create or configure
    queue: str | None = None  # None: the default queue
    stack: bool | None = None  # None: the queue's own structure
    priority: int = 0  # an insert's level (a queue with levels)
    levels: int = 1  # a create's priority levels
    limit: int = 0  # a configure's delivery limit (0: none)
    may_lease: bool = True  # a remove that may take a lease (lease_ratio draws it)


class WorkloadConfig(Protocol):
    """What of a run's config makes its workload (``HostsConfig`` has it)."""

    @property
    def operations(self) -> int: ...
    @property
    def insert_ratio(self) -> float: ...
    @property
    def pq_levels(self) -> int: ...
    @property
    def pq_operations(self) -> int: ...
    @property
    def d_operations(self) -> int: ...


def workload(config: WorkloadConfig, rng: random.Random) -> tuple[list[Plan], set[str]]:
    """The script, its next plan last, and the named queues it makes (their other
    operations wait for the create's answer)."""
    default = [Plan("insert") if rng.random() < config.insert_ratio else Plan("remove")
               for _ in range(config.operations)]  # fmt: skip
    lists, made = [default], set()
    if config.pq_levels:
        pq = [Plan("create", PQ, levels=config.pq_levels)]
        made.add(PQ)
        for _ in range(config.pq_operations):
            roll = rng.random()
            if roll < 0.55:  # up to one past the last level: it goes to the last
                pq.append(Plan("insert", PQ, priority=rng.randrange(config.pq_levels + 1)))
            elif roll < 0.8:
                pq.append(Plan("remove", PQ))
            elif roll < 0.97:
                pq.append(Plan("peek", PQ))
            else:  # its delivery limit changes (leased removes that name none follow it)
                pq.append(Plan("configure", PQ, limit=rng.choice((0, 1, 3))))
        lists.append(pq)
    if config.d_operations:
        d, stack = [], False
        for _ in range(config.d_operations):
            roll = rng.random()
            if roll < 0.08:
                d.append(Plan("delete", D))
                stack = rng.random() < 0.5  # the next incarnation's structure
            else:
                kind = "insert" if roll < 0.6 else "remove"
                d.append(Plan(kind, D, stack=stack, may_lease=False))
        lists.append(d)
    script = interleave(rng, lists)
    script.reverse()  # pop() takes them in order
    return script, made


def interleave(rng: random.Random, lists: list[list[Plan]]) -> list[Plan]:
    """The lists' items, each list's in its order, interleaved uniformly at random."""
    rest = [list(reversed(items)) for items in lists if items]
    out: list[Plan] = []
    while rest:
        pick = rng.randrange(sum(len(r) for r in rest))
        for r in rest:
            if pick < len(r):
                out.append(r.pop())
                break
            pick -= len(r)
        rest = [r for r in rest if r]
    return out
