"""Seed 000's experiments as data, with Skueue's priority queue on the same axes.

Theory of operation
-------------------
Seed 000 (the relaxed distributed priority queue) measures its "peek k, pop one" design
by the PEI, the popped element index, in five experiments (its §4, Figures 2-7).  Each
becomes a list of points here, and each point one flat :data:`Row`:

- ``lag`` (Figure 3): n = 20, k = 2, the three strategies, L from 10 to 10^5, each
  with the seed's protocol (fill, then measure) and in the steady state; Skueue with
  n = 20 processes, prefilled with L elements, 10 requests a round;
- ``n`` (Figure 4): k = 10, L = 20 000, n from 100 to 1 000; Skueue with n processes,
  10 requests a round;
- ``k`` (Figure 5): n = 100, L = 20 000, k from 1 to 100; Skueue has no k: one point
  at n = 100;
- ``clients`` (Figures 6 and 7): n = 100, k = 10, L = 20 000, c clients, the basic
  policy and the second choice; Skueue with n = 100 processes and c new requests every
  round.

Figure 2 (the PEI distribution of one run) is :func:`distribution`.

Skueue's side is a queue made with :data:`LEVELS` priority levels in the synchronous
simulator (SPEC §9's load: requests to random processes, half of them enqueues at a
uniformly random level), prefilled so that dequeues find elements.  Its PEI comes from
:func:`skueue.check.pei.pei_by_order` on the recorded history, and its cost is the
paper's metric, mean rounds per request.  Two differences in what the numbers mean:

- Skueue's priorities are levels (at most 16), FIFO within a level, and its PEI counts
  an element of the same level inserted earlier as ahead of the popped one.  The seed's
  priorities are continuous and unique, so only strictly more urgent elements count.
  Skueue's PEI of 0 is the stricter claim: most urgent level first, and the oldest
  element of that level.
- The seed's "c concurrent clients" each have one pop in flight; Skueue's point at c is
  c new requests every round (open loop), so at least c are in flight.

This module reads a wall clock (``wall_seconds``) but is otherwise pure: no files, no
processes, no plotting.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Final

import attrs

from skueue.check.pei import PeiSummary, pei_by_order
from skueue.sim.relaxed_pq import RelaxedConfig, Strategy, simulate
from skueue.sim.rounds import SyncConfig, SyncSim

Row = dict[str, str | int | float | None]
"""One finished point; keys are :data:`ROW_FIELDS`."""

ROW_FIELDS: Final = (
    "figure",
    "design",  # "relaxed" or "skueue"
    "strategy",  # a Strategy value, "+second-choice" for Figure 7; "levels-16" for Skueue
    "n",  # subqueues, or Skueue's processes
    "k",  # peeks; None for Skueue
    "lag",  # consumer lag; Skueue's prefill
    "clients",  # concurrent clients; Skueue's requests per round
    "warmup",  # unmeasured pops before the measured ones (relaxed)
    "seed",
    "pops",  # pops that returned an element (the PEI sample size)
    "median",
    "mean",
    "p90",
    "p99",
    "max",
    "mean_rounds",  # Skueue: mean rounds per request (SPEC §9); None for the relaxed design
    "requests",  # Skueue: requests measured
    "wall_seconds",
)
FIGURES: Final = ("lag", "n", "k", "clients")
LEVELS: Final = 16
"""Skueue's priority levels in every run: the most a queue may have (``PRIORITIES_MAX``)."""
SKUEUE: Final = f"levels-{LEVELS}"
SECOND_CHOICE: Final = "+second-choice"

# Skueue's runs: SPEC §9's 10 requests a round; 300 rounds (3 000 requests) per point.
SKUEUE_RATE: Final = 10


@attrs.frozen
class RelaxedPoint:
    figure: str
    config: RelaxedConfig

    def describe(self) -> str:
        return f"{self.figure}: relaxed {self.config.describe()}"

    @property
    def cost(self) -> float:
        """Rough relative run time, to start the longest runs first in a pool."""
        c = self.config
        return (c.lag + 2 * (c.warmup + c.pops)) * (1 + c.peeks / 20)


@attrs.frozen
class SkueuePoint:
    figure: str
    n: int
    lag: int  # prefill
    rate: int  # requests per round
    rounds: int
    seed: int = 0

    def describe(self) -> str:
        return (
            f"{self.figure}: skueue {SKUEUE} n={self.n} prefill={self.lag} rate={self.rate} "
            f"rounds={self.rounds} seed={self.seed}"
        )

    @property
    def cost(self) -> float:
        # A simulated request costs far more than a relaxed pop: weigh it accordingly.
        return 300 * (self.lag + self.rate * self.rounds) * math.log2(self.n + 1)


Point = RelaxedPoint | SkueuePoint


def run(point: Point) -> Row:
    """One point as a row; top-level so that a process pool can pickle it."""
    if isinstance(point, RelaxedPoint):
        return relaxed_row(point)
    return skueue_row(point)


def relaxed_row(point: RelaxedPoint) -> Row:
    c = point.config
    started = time.perf_counter()
    result = simulate(c)
    wall = time.perf_counter() - started
    strategy = c.strategy.value + (SECOND_CHOICE if c.second_choice else "")
    return _row(
        point.figure,
        "relaxed",
        strategy,
        c.subqueues,
        c.peeks,
        c.lag,
        c.clients,
        c.warmup,
        c.seed,
        result.pei,
        None,
        None,
        wall,
    )


def skueue_row(point: SkueuePoint) -> Row:
    """Skueue's queue with :data:`LEVELS` levels: PEI on the anchor's order (must be 0
    at every pop; the caller checks) and mean rounds per request of the measured
    requests (the setup's create and prefill left out)."""
    config = SyncConfig(
        processes=point.n,
        rounds=point.rounds,
        rate=point.rate,
        priorities=LEVELS,
        prefill=point.lag,
        seed=point.seed,
    )
    started = time.perf_counter()
    records = SyncSim(config).run().records
    wall = time.perf_counter() - started
    latencies = [r.response - r.invoke for r in records if r.phase is None]
    return _row(
        point.figure,
        "skueue",
        SKUEUE,
        point.n,
        None,
        point.lag,
        point.rate,
        0,
        point.seed,
        pei_by_order(records),
        statistics.fmean(latencies),
        len(latencies),
        wall,
    )


def _row(
    figure: str,
    design: str,
    strategy: str,
    n: int,
    k: int | None,
    lag: int,
    clients: int,
    warmup: int,
    seed: int,
    pei: Sequence[int],
    mean_rounds: float | None,
    requests: int | None,
    wall: float,
) -> Row:
    s = PeiSummary.of(pei)
    return {
        "figure": figure,
        "design": design,
        "strategy": strategy,
        "n": n,
        "k": k,
        "lag": lag,
        "clients": clients,
        "warmup": warmup,
        "seed": seed,
        "pops": s.count,
        "median": s.median,
        "mean": s.mean,
        "p90": s.p90,
        "p99": s.p99,
        "max": s.max,
        "mean_rounds": mean_rounds,
        "requests": requests,
        "wall_seconds": wall,
    }


# -- the sweeps --------------------------------------------------------------------------


@attrs.frozen
class Scale:
    """How much of each sweep to run.  The defaults are the seed's settings (its §4 and
    the runs behind its figures: 10 000 measured pops; n = 20, k = 2 against the lag;
    k = 10 against n; n = 100 against k and against the clients; a large lag of
    20 000), with lags up to 10^5 and n up to 1 000."""

    pops: int = 10_000
    seeds: int = 3
    lag_n: int = 20
    lag_k: int = 2
    lags: tuple[int, ...] = (10, 100, 1_000, 3_000, 10_000, 30_000, 100_000)
    distribution_lag: int = 10_000  # Figure 2's run, at n = lag_n and k = lag_k
    large_lag: int = 20_000
    sizes_k: int = 10
    sizes: tuple[int, ...] = tuple(range(100, 1001, 100))
    large_n: int = 100  # n of the k and clients figures
    peeks: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 10, 15, 20, 30, 50, 100)
    clients_k: int = 10
    clients: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200)
    skueue_lags: tuple[int, ...] = (100, 1_000, 10_000)
    skueue_sizes: tuple[int, ...] = (100, 200, 400, 700, 1_000)
    skueue_rounds: int = 300
    skueue_prefill: int = 2_000
    """Skueue's prefill where the axis is not the lag: enough that dequeues find
    elements; the lag figure shows that its PEI and rounds do not depend on it."""


SMOKE: Final = Scale(
    pops=300,
    seeds=1,
    lag_n=6,
    lags=(10, 300),
    distribution_lag=300,
    large_lag=600,
    sizes=(10, 20),
    large_n=12,
    peeks=(1, 2, 12),
    clients_k=3,
    clients=(1, 4),
    skueue_lags=(20,),
    skueue_sizes=(4, 8),
    skueue_rounds=10,
    skueue_prefill=20,
)
"""A few seconds in all: every figure, every design, tiny sizes (tests, ``--smoke``)."""


def points(scale: Scale = Scale(), figures: Sequence[str] = FIGURES) -> list[Point]:
    """Every point of the chosen figures at ``scale``."""
    makers = {"lag": lag_points, "n": size_points, "k": peek_points, "clients": client_points}
    return [p for f in figures for p in makers[f](scale)]


def lag_points(s: Scale) -> Iterator[Point]:
    """Figure 3: the three strategies against the lag, each measured twice: the seed's
    protocol (fill, then measure) and the steady state (L unmeasured pops first)."""
    for lag in s.lags:
        for strategy in Strategy:
            k = 1 if strategy is Strategy.NO_PEEK else s.lag_k
            for warmup in (0, lag):
                for seed in range(s.seeds):
                    config = RelaxedConfig(s.lag_n, k, lag, 1, s.pops, warmup, strategy, seed=seed)
                    yield RelaxedPoint("lag", config)
    for lag in s.skueue_lags:
        yield SkueuePoint("lag", s.lag_n, lag, SKUEUE_RATE, s.skueue_rounds)


def size_points(s: Scale) -> Iterator[Point]:
    """Figure 4: PEI against n at fixed k (the seed's equation 1)."""
    for n in s.sizes:
        for seed in range(s.seeds):
            config = RelaxedConfig(n, min(s.sizes_k, n), s.large_lag, 1, s.pops, seed=seed)
            yield RelaxedPoint("n", config)
    for n in s.skueue_sizes:
        yield SkueuePoint("n", n, s.skueue_prefill, SKUEUE_RATE, s.skueue_rounds)


def peek_points(s: Scale) -> Iterator[Point]:
    """Figure 5: PEI against k at n = ``large_n`` (Skueue, which has no k: one point)."""
    for k in s.peeks:
        for seed in range(s.seeds):
            yield RelaxedPoint("k", RelaxedConfig(s.large_n, k, s.large_lag, 1, s.pops, seed=seed))
    yield SkueuePoint("k", s.large_n, s.skueue_prefill, SKUEUE_RATE, s.skueue_rounds)


def client_points(s: Scale) -> Iterator[Point]:
    """Figures 6 and 7: PEI against concurrent clients, with the basic policy and with
    the second choice; Skueue with that many new requests every round."""
    for c in s.clients:
        for second in (False, True):
            for seed in range(s.seeds):
                config = RelaxedConfig(
                    s.large_n, s.clients_k, s.large_lag, c, s.pops, second_choice=second, seed=seed
                )
                yield RelaxedPoint("clients", config)
    requests = SKUEUE_RATE * s.skueue_rounds
    for c in s.clients:
        # About the same number of requests at every rate, but never fewer rounds than
        # a third of the run at the paper's rate: long enough to be past the start.
        rounds = max(s.skueue_rounds // 3, requests // c)
        yield SkueuePoint("clients", s.large_n, s.skueue_prefill, c, rounds)


def distribution(s: Scale) -> list[tuple[int, int]]:
    """Figure 2: ``(index, pops)`` for every PEI value of one run (seed 0), ascending."""
    config = RelaxedConfig(s.lag_n, s.lag_k, s.distribution_lag, 1, s.pops)
    return sorted(Counter(simulate(config).pei).items())
