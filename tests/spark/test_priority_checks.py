"""The distributed checks on queues with priority levels and on named queues (issue 14):
the same verdicts as the single-machine checkers, queue by queue.

One batch goes through :func:`check_histories` in a single run: random legal priority
histories (a reference priority queue decides every dequeue) and their mutants, among
them a dequeue of a less urgent element while a more urgent one waits and FIFO broken
within a level; simulated priority histories (the adversarial scheduler with churn) and
mutants of them; the same without ``ord`` (patterns and exact search); a large history
with one injected priority violation, beyond the exact search; and a history of two named
queues, each with its own ``ord``.  For every unit and both models: the distributed
certificate fails iff ``check_certificate`` does, the patterns flag iff ``check_patterns``
does, and the verdict equals ``check(method="auto")``'s.  A failing case names its seed.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from pyspark.sql import SparkSession

from skueue.analysis.checks import MODELS, HistoryCheck, check_histories
from skueue.check.checker import check, check_certificate, check_patterns
from skueue.check.history import Record
from skueue.core.ops import Structure
from skueue.sim.adversary import AsyncConfig
from tests.property.test_priority_schedules import PrioritySim
from tests.unit.test_check import false_empty, legal_history, shuffle_ords, swap_results

pytestmark = pytest.mark.spark

SCHEMA = (
    "hid int, file string, process string, seq long, op string, value string, "
    "invoke double, response double, position long, ord long, drained boolean, "
    "queue string, priority long"
)


def record_row(hid: int, name: str, r: Record, drained: bool = False) -> tuple[Any, ...]:
    """One record as a row of ``SCHEMA``."""
    return (hid, name, r.process, r.seq, r.op, r.value, float(r.invoke), float(r.response),
            r.position, r.ord, drained, r.queue, r.priority)  # fmt: skip


def legal_priority_history(
    rng: random.Random,
    *,
    levels: int,
    processes: int,
    ops: int,
    drain: bool,
    queue: str | None = None,
) -> list[Record]:
    """A sequential priority queue (a deque per level) driven by several processes; step
    ``t`` is the op's ``ord`` and lies inside its interval, so ``ord`` linearizes it."""
    procs = [chr(ord("A") + i) for i in range(processes)]
    seqs = dict.fromkeys(procs, 0)
    contents: list[deque[str]] = [deque() for _ in range(levels)]
    out: list[Record] = []

    def emit(p: str, op: str, value: str | None, level: int = 0) -> None:
        t = len(out)
        inv, resp = 10 * t - rng.randint(0, 20), 10 * t + rng.randint(0, 20)
        out.append(
            Record(p, seqs[p], op, value, inv, resp, ord=t, queue=queue, priority=level or None)
        )
        seqs[p] += 1

    def remove(p: str) -> None:
        held = next((d for d in contents if d), None)
        emit(p, "dequeue", held.popleft() if held else None)

    for _ in range(ops):
        p = rng.choice(procs)
        if rng.random() < 0.6:
            level = rng.randrange(levels)
            contents[level].append(f"{p}{seqs[p]}")
            emit(p, "enqueue", f"{p}{seqs[p]}", level)
        else:
            remove(p)
    if drain:
        while any(contents):
            remove(rng.choice(procs))
        remove(rng.choice(procs))
    return out


def _removed(records: list[Record]) -> dict[str, int]:
    return {r.value: i for i, r in enumerate(records) if r.op == "dequeue" and r.value}


def _swap(
    records: list[Record], rng: random.Random, related: Callable[[int, int], bool]
) -> list[Record] | None:
    """Two dequeues, the first of an element of level ``la`` and the later of level
    ``lb`` with ``related(la, lb)``, give each other's results."""
    level = {r.value: r.priority or 0 for r in records if r.op == "enqueue"}
    where = _removed(records)
    pairs = [(a, b) for a in where for b in where
             if a != b and related(level[a], level[b]) and where[a] < where[b]]  # fmt: skip
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    out = list(records)
    out[where[a]] = attrs.evolve(records[where[a]], value=b)
    out[where[b]] = attrs.evolve(records[where[b]], value=a)
    return out


def swap_across_levels(records: list[Record], rng: random.Random) -> list[Record] | None:
    """The less urgent element comes out while the more urgent one waits."""
    return _swap(records, rng, lambda la, lb: la < lb)


def swap_within_level(records: list[Record], rng: random.Random) -> list[Record] | None:
    """FIFO broken within one level."""
    return _swap(records, rng, lambda la, lb: la == lb)


def relevel(records: list[Record], rng: random.Random) -> list[Record] | None:
    """One enqueue says another level than the one its element was served at."""
    ins = [i for i, r in enumerate(records) if r.op == "enqueue"]
    if not ins:
        return None
    i = rng.choice(ins)
    out = list(records)
    out[i] = attrs.evolve(
        records[i],
        priority=(records[i].priority or 0) + rng.choice([1, 2])
        if rng.random() < 0.5 or not records[i].priority
        else None,
    )
    return out


def with_peeks(records: list[Record], rng: random.Random, every: int = 3) -> list[Record]:
    """The history with a peek by process "P" after every ``every``-th op in ``ord``
    order: it sees the reference's head then, and shares that op's interval."""
    contents: dict[int, deque[str]] = {}
    level = {r.value: r.priority or 0 for r in records if r.op == "enqueue"}
    out: list[Record] = []
    for t, r in enumerate(sorted(records, key=lambda r: r.ord)):  # type: ignore[arg-type, return-value]
        out.append(attrs.evolve(r, ord=2 * t))
        if r.op == "enqueue":
            contents.setdefault(level[r.value], deque()).append(r.value)  # type: ignore[arg-type]
        elif r.value is not None:
            contents[level[r.value]].remove(r.value)
        if t % every == 0:
            head = next((q[0] for _, q in sorted(contents.items()) if q), None)
            out.append(Record("P", t, "peek", head, r.invoke, r.response, ord=2 * t + 1,
                              queue=r.queue))  # fmt: skip
    return out


def wrong_peek(records: list[Record], rng: random.Random) -> list[Record] | None:
    """One peek says it saw another element than the head (or nothing)."""
    peeks = [i for i, r in enumerate(records) if r.op == "peek"]
    values = sorted({r.value for r in records if r.op == "enqueue"})  # type: ignore[type-var]
    if not peeks:
        return None
    i = rng.choice(peeks)
    others = [v for v in [*values, None] if v != records[i].value]
    out = list(records)
    out[i] = attrs.evolve(records[i], value=rng.choice(others))
    return out


MUTATIONS = [
    None,
    swap_across_levels,
    swap_within_level,
    relevel,
    swap_results,
    false_empty,
    shuffle_ords,
]


@attrs.frozen
class Case:
    name: str
    records: list[Record]
    drained: bool = False


def simulated(seed: int, levels: int) -> list[Record]:
    result = PrioritySim(AsyncConfig(3, Structure.QUEUE, 0, 0.6, seed), levels, 60).run()
    return [r for r in result.records if r.queue == "pq" and r.op != "create"]


def _cases() -> list[Case]:
    cases = []
    rng = random.Random(14)
    for i in range(28):
        seed = rng.randrange(1 << 30)
        r = random.Random(seed)
        drain = r.random() < 0.4
        h = legal_priority_history(
            r,
            levels=r.choice([2, 3, 4]),
            processes=r.randint(1, 3),
            ops=r.randint(6, 24),
            drain=drain,
        )
        mutation = MUTATIONS[i % len(MUTATIONS)]
        if mutation is not None:
            h = mutation(h, r) or h
        if i % 4 == 3:
            h = [attrs.evolve(x, ord=None) for x in h]
        cases.append(
            Case(
                f"legal-seed{seed}-{getattr(mutation, '__name__', 'none')}"
                f"{'-no-ord' if i % 4 == 3 else ''}",
                h,
                drain,
            )
        )
    for seed in (1, 2):
        sim = simulated(seed, levels=4)
        cases.append(Case(f"sim-seed{seed}", sim))
        cases.append(Case(f"sim-seed{seed}-no-ord", [attrs.evolve(x, ord=None) for x in sim]))
        cases.append(
            Case(f"sim-seed{seed}-across", swap_across_levels(sim, random.Random(seed)) or sim)
        )
        cases.append(Case(f"sim-seed{seed}-peek", wrong_peek(sim, random.Random(seed)) or sim))
    big = legal_priority_history(random.Random(7), levels=4, processes=4, ops=300, drain=True)
    cases.append(Case("big", big, drained=True))
    cases.append(Case("big-across", swap_across_levels(big, random.Random(7)) or big, True))
    cases.append(Case("big-within", swap_within_level(big, random.Random(7)) or big, True))
    unordered = [attrs.evolve(x, ord=None) for x in cases[-2].records]
    cases.append(Case("big-across-no-ord", unordered, True))  # the patterns decide
    cases.append(Case("big-no-ord", [attrs.evolve(x, ord=None) for x in big], True))
    peeked = with_peeks(big, random.Random(8))
    cases.append(Case("big-peeks", peeked, True))  # past the exact search: the certificate
    cases.append(Case("big-wrong-peek", wrong_peek(peeked, random.Random(8)) or peeked, True))
    small = with_peeks(legal_priority_history(random.Random(9), levels=2, processes=2, ops=12,
                                              drain=True), random.Random(9))  # fmt: skip
    cases.append(Case("small-wrong-peek", wrong_peek(small, random.Random(9)) or small, True))
    two = legal_priority_history(
        random.Random(3), levels=3, processes=2, ops=40, drain=True, queue="pq"
    )
    plain = [attrs.evolve(x, queue="jobs") for x in legal_history(random.Random(3), ops=30)]
    cases.append(Case("two-queues", two + [attrs.evolve(x, seq=x.seq + 100) for x in plain]))
    return cases


@pytest.fixture(scope="module")
def checked(spark: SparkSession) -> list[tuple[Case, HistoryCheck]]:
    cases = _cases()
    rows = [record_row(hid, c.name, r, c.drained) for hid, c in enumerate(cases) for r in c.records]
    results = check_histories(
        spark, spark.createDataFrame(rows, SCHEMA), {i: c.name for i, c in enumerate(cases)}
    )
    return [(cases[r.hid], r) for r in results]


def test_verdicts_equal_the_python_checkers(checked: list[tuple[Case, HistoryCheck]]) -> None:
    failures = []
    for case, result in checked:
        assert result.problem is None, result.problem
        recs = [r for r in case.records if r.queue == result.queue]
        for model in MODELS:
            mine = result.verdicts[model]
            auto = check(recs, model=model, drained=case.drained)
            if (mine.ok, mine.decided, mine.method) != (auto.ok, auto.decided, auto.method):
                failures.append(
                    f"{result.label} {model}: spark {mine.describe()} | python {auto.describe()}"
                )
            pat = check_patterns(recs, model=model, drained=case.drained)
            if pat.ok != (result.first("patterns", model) is None):
                failures.append(
                    f"{result.label} {model} patterns: spark "
                    f"{result.first('patterns', model)} | python {pat.reason}"
                )
            if result.certified:
                cert = check_certificate(recs, model=model, drained=case.drained)
                if cert.ok != (result.first("certificate", model) is None):
                    failures.append(
                        f"{result.label} {model} certificate: spark "
                        f"{result.first('certificate', model)} | python "
                        f"{cert.reason}"
                    )
    assert not failures, "\n".join(failures)


def test_the_batch_exercises_every_outcome(checked: list[tuple[Case, HistoryCheck]]) -> None:
    """Guards the agreement test against a batch that only ever passes."""
    methods = {
        (r.verdicts["linearizable"].method, r.verdicts["linearizable"].ok) for _, r in checked
    }
    assert {
        ("certificate", True),
        ("certificate", False),
        ("exact", True),
        ("exact", False),
        ("patterns", True),
        ("patterns", False),
    } <= methods
    checks = {(f.family, f.check) for _, r in checked for f in r.findings}
    assert {
        ("certificate", "replay"),
        ("patterns", "priority"),
        ("patterns", "false empty/FIFO"),
    } <= checks
    assert any(r.levels for _, r in checked) and any(not r.levels for _, r in checked)


def test_an_injected_priority_violation_is_flagged_at_scale(
    checked: list[tuple[Case, HistoryCheck]],
) -> None:
    by_name = {r.name: r for _, r in checked}
    assert by_name["big"].verdicts["linearizable"].ok
    assert by_name["big"].records > 100  # beyond the exact search: the certificate decides
    for name in ("big-across", "big-within"):
        # The certificate fails, which proves nothing; the patterns prove the violation.
        assert "certificate replay" in (by_name[name].first("certificate", "sc") or "")
        v = by_name[name].verdicts["linearizable"]
        assert (v.ok, v.decided, v.method) == (False, True, "patterns"), v.describe()
    across = by_name["big-across"]
    assert "more urgent levels" in (across.first("certificate", "sc") or "")
    assert across.first("patterns", "linearizable") is not None


def test_named_queues_are_checked_apart(checked: list[tuple[Case, HistoryCheck]]) -> None:
    units = {r.queue: r for case, r in checked if case.name == "two-queues"}
    assert set(units) == {"pq", "jobs"}
    assert units["pq"].levels and not units["jobs"].levels
    for unit in units.values():
        assert unit.verdicts["linearizable"].ok and unit.verdicts["linearizable"].method == (
            "certificate"
        ), unit.verdicts["linearizable"].describe()
    assert units["pq"].label.endswith("queue pq")


def test_a_wrong_peek_is_found_by_the_certificate_at_scale(
    checked: list[tuple[Case, HistoryCheck]],
) -> None:
    """The distributed checks leave peeks out; they are checked apart (analysis/peeks.py),
    and a wrong one fails the certificate where the exact search cannot go."""
    by_name = {case.name: result for case, result in checked}
    assert any(r.op == "peek" for c, _ in checked if c.name == "big-peeks" for r in c.records)
    assert by_name["big-peeks"].verdicts["linearizable"].ok
    wrong = by_name["big-wrong-peek"].verdicts["linearizable"]
    # No pattern checks peeks, and a failed certificate proves nothing: flagged, unproven.
    assert not wrong.ok and wrong.method == "certificate" and "peek" in (wrong.reason or "")
    assert not wrong.decided
    small = by_name["small-wrong-peek"].verdicts["linearizable"]
    assert not small.ok and small.method == "exact"
