"""The distributed checks give the single-machine checkers' verdicts.

One batch of histories goes through :func:`check_histories` in a single run (every stage
costs Spark a fixed overhead, so one run of many histories is far cheaper than many
runs): random legal histories and their mutants (as in ``tests/property``), histories of
both simulators and their mutants, the known-answer histories, a simulator history with
two dequeue results swapped, and two histories that cannot be checked at all.

For every history and both models: the distributed certificate fails iff
``check_certificate`` does, the distributed patterns flag iff ``check_patterns`` does, and
the decided verdict equals ``check(method="auto")``'s, which on small histories is the
exact checker's.  A failing case names the history and its seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs
import pytest
from pyspark.sql import SparkSession

from skueue.analysis.checks import MODELS, HistoryCheck, check_histories
from skueue.check.checker import check, check_certificate, check_patterns
from skueue.check.history import Record
from skueue.core.ops import Structure
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.rounds import SyncConfig, SyncSim
from tests.histories.known import history_files, load
from tests.property.test_checkers_agree import jitter_time
from tests.unit.test_check import (
    drop_removal,
    duplicate_value,
    false_empty,
    legal_history,
    relabel,
    shuffle_ords,
    swap_insert_and_removal_ords,
    swap_results,
)
from tests.unit.test_unproven import swap_two_dequeues

pytestmark = pytest.mark.spark

Mutation = Callable[[list[Record], random.Random], list[Record] | None]
MUTATIONS: list[Mutation | None] = [
    None, swap_results, duplicate_value, false_empty, drop_removal, relabel, shuffle_ords,
    swap_insert_and_removal_ords, jitter_time,
]


@attrs.frozen
class Case:
    name: str
    records: list[Record]
    drained: bool = False


def _cases() -> list[Case]:
    cases = []
    rng = random.Random(20_26)
    for i in range(36):
        seed = rng.randrange(1 << 30)
        r = random.Random(seed)
        kind = ("queue", "stack")[i % 2]
        timing = r.choice(["lin", "random", "sequential"])
        drain = r.random() < 0.3
        h = legal_history(r, structure=kind, processes=r.randint(1, 4),
                          ops=r.randint(4, 22), timing=timing, drain=drain)
        mutation = MUTATIONS[i % len(MUTATIONS)]
        if mutation is not None:
            h = mutation(h, r) or h
        if i % 5 == 4:
            h = [attrs.evolve(x, ord=None) for x in h]  # no certificate: patterns and exact
        name = f"legal-{kind}-{timing}-seed{seed}-{getattr(mutation, '__name__', 'none')}"
        cases.append(Case(name, h, drain))
    for structure in Structure:
        for seed in (1, 2):
            sync = SyncSim(SyncConfig(processes=6, structure=structure, rounds=12, rate=3,
                                      seed=seed)).run().records
            cases.append(Case(f"sync-{structure.value}-seed{seed}", sync))
            small = AsyncSim(AsyncConfig(processes=3, structure=structure, operations=14,
                                         seed=seed)).run().records
            cases.append(Case(f"async-{structure.value}-seed{seed}", small, drained=True))
            mutant = swap_results(small, random.Random(seed)) or small
            cases.append(Case(f"async-{structure.value}-seed{seed}-swap", mutant, drained=True))
    big = SyncSim(SyncConfig(processes=8, rounds=30, rate=5, seed=7)).run().records
    cases.append(Case("sync-queue-n8-seed7-swapped-dequeues", swap_two_dequeues(big)))
    for path in history_files():
        cases.append(Case(f"known-{path.name}", load(path.name)))
    return cases


INVALID = {
    "two-records-one-seq": [Record("A", 0, "enqueue", "x", 0, 1), Record("A", 0, "dequeue",
                                                                         "x", 2, 3)],
    "queue-and-stack": [Record("A", 0, "enqueue", "x", 0, 1), Record("A", 1, "pop", "x", 2, 3)],
}


@pytest.fixture(scope="module")
def checked(spark: SparkSession) -> dict[str, tuple[Case, HistoryCheck]]:
    cases = _cases()
    cases += [Case(name, recs) for name, recs in INVALID.items()]
    rows = [
        (hid, c.name, r.process, r.seq, r.op, r.value, float(r.invoke), float(r.response),
         r.position, r.ord, c.drained)
        for hid, c in enumerate(cases) for r in c.records
    ]
    df = spark.createDataFrame(rows, "hid int, file string, process string, seq long, "
                               "op string, value string, invoke double, response double, "
                               "position long, ord long, drained boolean")
    results = check_histories(spark, df, {i: c.name for i, c in enumerate(cases)})
    return {r.name: (cases[r.hid], r) for r in results}


def test_verdicts_equal_the_python_checkers(
    checked: dict[str, tuple[Case, HistoryCheck]],
) -> None:
    failures = []
    for name, (case, result) in checked.items():
        if name in INVALID:
            continue
        recs, drained = case.records, case.drained
        for model in MODELS:
            mine = result.verdicts[model]
            auto = check(recs, model=model, drained=drained)
            if (mine.ok, mine.decided, mine.method) != (auto.ok, auto.decided, auto.method):
                failures.append(f"{name} {model}: spark {mine.describe()} | python "
                                f"{auto.describe()}")
            pat = check_patterns(recs, model=model, drained=drained)
            if pat.ok != (result.first("patterns", model) is None):
                failures.append(f"{name} {model} patterns: spark "
                                f"{result.first('patterns', model)} | python {pat.reason}")
            if result.certified:
                cert = check_certificate(recs, model=model, drained=drained)
                if cert.ok != (result.first("certificate", model) is None):
                    failures.append(f"{name} {model} certificate: spark "
                                    f"{result.first('certificate', model)} | python {cert.reason}")
    assert not failures, "\n".join(failures)


def test_the_batch_exercises_every_outcome(
    checked: dict[str, tuple[Case, HistoryCheck]],
) -> None:
    """Guards the agreement test against a batch that only ever passes."""
    results = [r for _, r in checked.values() if r.problem is None]
    methods = {(r.verdicts["linearizable"].method, r.verdicts["linearizable"].ok,
                r.verdicts["linearizable"].decided) for r in results}
    assert {("certificate", True, True), ("exact", True, True), ("exact", False, True),
            ("certificate", False, False)} <= methods
    checks = {f.check for r in results for f in r.findings}
    assert {"replay", "duplicate", "fresh", "false empty/FIFO", "LIFO", "lost", "real time",
            "program order", "causality"} <= checks
    assert any(not r.verdicts["linearizable"].ok and r.verdicts["sc"].ok for r in results)


def test_swapped_dequeues_are_unproven_not_a_violation(
    checked: dict[str, tuple[Case, HistoryCheck]],
) -> None:
    """Their certificate fails, but the history is linearizable (tests/unit/
    test_unproven.py): a "no" decided by the certificate was a false proof."""
    case, result = checked["sync-queue-n8-seed7-swapped-dequeues"]
    assert result.records == len(case.records) > 100  # beyond the exact search
    for model in MODELS:
        v = result.verdicts[model]
        assert (v.ok, v.decided, v.method) == (False, False, "certificate"), v.describe()
        assert "certificate replay" in (v.reason or "")
        assert "no violation pattern matched" in (v.reason or "")


def test_unchecked_histories_say_why(checked: dict[str, tuple[Case, HistoryCheck]]) -> None:
    assert "share one process and seq" in (checked["two-records-one-seq"][1].problem or "")
    assert "mixes queue and stack" in (checked["queue-and-stack"][1].problem or "")
    assert not checked["queue-and-stack"][1].verdicts
