"""Seed 000's relaxed distributed priority queue, simulated as its Section 4 does.

Theory of operation
-------------------
The design (Lin and Liang, "A Scalable Relaxed Distributed Priority Queue"): ``n``
subqueues, each a local priority queue.  A client adds an element to one subqueue and
pops by peeking at ``k`` distinct random subqueues and popping the one whose head is the
most urgent.  Its error measure is the PEI, the popped element index: the popped
element's global index among all elements present, that is the number of present
elements with a strictly more urgent priority; a perfect priority queue always pops 0.

What is simulated, one parameter per variable of the paper's §4.1:

- ``subqueues`` (n), ``peeks`` (k) distinct subqueues per peek ("peek at N different
  random nodes"; the seed's simulation code draws them with replacement), so k = n
  peeks see every head;
- ``lag`` (L, the consumer lag): the system is filled with L elements, and every pop is
  followed by one add, so L elements are present at every pop ("if each client adds one
  element and then pops one element, this number remains constant");
- priorities uniformly random and continuous.  Only their order matters, so element
  ``i`` gets rank ``perm[i]`` of a seeded random permutation (the ranks of i.i.d.
  continuous priorities are exactly a uniform permutation); rank 0 is the most urgent.
  A Fenwick tree over ranks counts the present elements, so a PEI costs O(log L);
- ``strategy``: *peek before pop* (add to a random subqueue; pop the best head of k),
  *peek before add* (pop a random subqueue; add to the one of k peeked subqueues where
  the new element would have the fewest elements ahead of it: the paper's "adding new
  element to the peeked queue with the highest top priority" as the seed's own
  simulation code does it), and *no peek* (both random);
- ``second_choice``: Figure 7's client policy: if the element actually popped is less
  urgent than the second-best head the peek saw, it goes back (abort) and the client
  pops the subqueue of that second-best head instead;
- ``clients`` (c): the simulation runs in rounds; in each, every client peeks, then
  every client pops the subqueue it chose and adds one element, in turn.  So the j-th
  pop of a round comes after j - 1 other pops since its peek, and may take another
  (less urgent) element than the one it peeked: §4.3's concurrency, interleaved the way
  the seed's simulation interleaves it.  With one client a pop follows its peek at
  once: the atomic peeks of §4.2.  A client whose chosen subqueue is empty when it pops
  (or whose peeks found only empty subqueues) pops nothing that round; those retries
  are counted.

Measurement follows the seed's protocol: fill, then measure ``pops`` pops (10 000 in its
figures).  With a lag much larger than that, the pops see the freshly filled system, not
a steady state; ``warmup`` unmeasured pops first (e.g. L, one turnover) show the steady
state instead, where the strategies without peeks before the pop do differently (see
the README's comparison).

Pure and deterministic: the seed decides everything; no I/O, no clock.
"""

from __future__ import annotations

import bisect
import enum
import random
from dataclasses import dataclass


class Strategy(enum.Enum):
    """Where the client spends its peeks (seed 000, §4.1 and Figure 3)."""

    PEEK_BEFORE_POP = "peek-before-pop"
    PEEK_BEFORE_ADD = "peek-before-add"
    NO_PEEK = "no-peek"


@dataclass(frozen=True, slots=True)
class RelaxedConfig:
    subqueues: int = 20  # n
    peeks: int = 2  # k, distinct subqueues per peek
    lag: int = 10_000  # L, elements present at every pop
    clients: int = 1  # c, clients whose peeks and pops interleave
    pops: int = 10_000  # measured pops
    warmup: int = 0  # unmeasured pops first
    strategy: Strategy = Strategy.PEEK_BEFORE_POP
    second_choice: bool = False  # Figure 7's policy
    seed: int = 0

    def __post_init__(self) -> None:
        if self.subqueues < 1 or self.clients < 1 or self.lag < 1:
            raise ValueError("subqueues, clients and lag must be at least 1")
        if not 1 <= self.peeks <= self.subqueues:
            raise ValueError(f"peeks must be 1 to subqueues ({self.subqueues})")
        if self.pops < 0 or self.warmup < 0:
            raise ValueError("pops and warmup must not be negative")

    def describe(self) -> str:
        """Stable one-liner, e.g. ``peek-before-pop n=20 k=2 L=10000 c=1 seed=0``."""
        second = " second-choice" if self.second_choice else ""
        warmup = f" warmup={self.warmup}" if self.warmup else ""
        return (
            f"{self.strategy.value}{second} n={self.subqueues} k={self.peeks} L={self.lag} "
            f"c={self.clients}{warmup} seed={self.seed}"
        )


@dataclass(frozen=True, slots=True)
class RelaxedResult:
    config: RelaxedConfig
    pei: list[int]  # one per measured pop, in pop order
    retries: int  # turns without a pop: the chosen subqueue, or every peeked one, empty
    second_pops: int  # pops that took the second-best head (Figure 7's policy)


class _Fenwick:
    """Counts over ranks 0..size-1: add and "how many below" in O(log size)."""

    __slots__ = ("tree",)

    def __init__(self, size: int) -> None:
        self.tree = [0] * (size + 1)

    def add(self, rank: int, delta: int) -> None:
        tree = self.tree
        i = rank + 1
        while i < len(tree):
            tree[i] += delta
            i += i & -i

    def below(self, rank: int) -> int:
        tree = self.tree
        total, i = 0, rank
        while i > 0:
            total += tree[i]
            i -= i & -i
        return total


def simulate(config: RelaxedConfig) -> RelaxedResult:
    """Run the design with ``config`` and return the PEI of every measured pop."""
    cfg = config
    rng = random.Random(cfg.seed)
    n, k = cfg.subqueues, cfg.peeks
    total_pops = cfg.warmup + cfg.pops
    ranks = list(range(cfg.lag + total_pops))
    rng.shuffle(ranks)
    present = _Fenwick(len(ranks))
    # Each subqueue is a sorted list of negated ranks: its most urgent element is the
    # last one, so a pop is ``list.pop()`` and an add one ``insort``.
    subqueue: list[list[int]] = [[] for _ in range(n)]
    indices = range(n)
    peek_add = cfg.strategy is Strategy.PEEK_BEFORE_ADD
    peek_pop = cfg.strategy is Strategy.PEEK_BEFORE_POP
    second_choice = cfg.second_choice and peek_pop and k > 1

    def add(rank: int) -> None:
        key = -rank
        if peek_add:
            # Where the new element would stand nearest the head: the fewest elements
            # ahead of it (the seed's simulation); the first peeked wins a tie.
            target, ahead = -1, 0
            for j in rng.sample(indices, k):
                here = subqueue[j]
                at = len(here) - bisect.bisect_right(here, key)
                if target < 0 or at < ahead:
                    target, ahead = j, at
        else:
            target = rng.randrange(n)
        bisect.insort(subqueue[target], key)
        present.add(rank, 1)

    def choose() -> tuple[int, int, int] | None:
        """The peek: the subqueue to pop, and the second-best subqueue peeked with its
        head's rank (-1, -1 if none); None if it found only empty subqueues."""
        if not peek_pop:
            j = rng.randrange(n)
            return (j, -1, -1) if subqueue[j] else None
        best = second = -1
        best_key = second_key = 0  # negated ranks: the larger, the more urgent
        for j in rng.sample(indices, k):
            here = subqueue[j]
            if not here:
                continue
            key = here[-1]
            if best < 0 or key > best_key:
                second, second_key = best, best_key
                best, best_key = j, key
            elif second < 0 or key > second_key:
                second, second_key = j, key
        if best < 0:
            return None
        return best, second, -second_key if second >= 0 else -1

    for i in range(cfg.lag):
        add(ranks[i])
    next_element = cfg.lag
    pei: list[int] = []
    retries = second_pops = done = 0
    while done < total_pops:
        # One round: every client peeks, then every client pops what it chose, in turn
        # (the seed's simulation interleaves its concurrent pops the same way).
        choices = [choose() for _ in range(cfg.clients)]
        for choice in choices:
            if done == total_pops:
                break
            if choice is None:
                retries += 1
                continue
            target, second, second_rank = choice
            here = subqueue[target]
            # Figure 7: what the pop got is less urgent than the second-best head the
            # peek saw (or nothing), so it goes back (nothing changes) and the client
            # pops that second-best subqueue instead, whatever its head is now.
            if (
                second_choice
                and second >= 0
                and (not here or -here[-1] > second_rank)
                and subqueue[second]
            ):
                here = subqueue[second]
                second_pops += 1
            if not here:
                retries += 1
                continue
            rank = -here.pop()
            if done >= cfg.warmup:
                pei.append(present.below(rank))
            present.add(rank, -1)
            done += 1
            add(ranks[next_element])
            next_element += 1
    return RelaxedResult(cfg, pei, retries, second_pops)


def first_pop_expectation(subqueues: int, peeks: int) -> float:
    """Mean PEI of a pop that peeks ``peeks`` of ``subqueues`` subqueues filled with
    independently and uniformly placed elements, as the lag grows: the popped index is
    at least ``i`` exactly when none of the ``i`` most urgent elements sits in a peeked
    subqueue, so ``P(PEI >= i) = (1 - k/n)^i`` and the mean is ``n/k - 1``.  This is the
    shape of the paper's equation 1 (PEI = n * f(k)) for a freshly filled system."""
    return subqueues / peeks - 1
