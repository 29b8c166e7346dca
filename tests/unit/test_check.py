"""Consistency checkers: known-answer histories, generated histories and their mutations.

The helpers at the top (``legal_history``, the mutations, ``replays``) are also
used by ``tests/property/test_checkers_agree.py``.
"""

from __future__ import annotations

import random
import re
import time
from collections import deque
from collections.abc import Callable

import attrs
import pytest

from skueue.check.checker import (
    ExactLimitError,
    Verdict,
    check,
    check_certificate,
    check_exact,
    check_patterns,
)
from skueue.check.history import INSERT_OPS, Record
from tests.histories.known import HISTORIES, documented_verdicts, history_files, load

MODELS = ("sc", "linearizable")
INSERT = {"queue": "enqueue", "stack": "push"}
REMOVE = {"queue": "dequeue", "stack": "pop"}

# ---------------------------------------------------------------------------
# Generated histories
# ---------------------------------------------------------------------------


def legal_history(
    rng: random.Random,
    *,
    structure: str = "queue",
    processes: int = 3,
    ops: int = 20,
    timing: str = "lin",
    insert_ratio: float = 0.55,
    overlap: int = 2,
    drain: bool = False,
) -> list[Record]:
    """A history of a sequential queue/stack driven by several processes.

    Step ``t`` of the simulation is the op's linearization point and its
    ``ord``.  ``timing`` places the real-time intervals:

    - ``"lin"``: each interval contains ``10 t``, widened by up to
      ``10 * overlap`` on each side, so ops overlap yet ``ord`` stays a valid
      linearization;
    - ``"sequential"``: disjoint intervals, so the only admissible order (both
      models) is ``ord`` order when there is a single process, and the only
      linearization is ``ord`` order in any case;
    - ``"random"``: each process runs on its own clock, unrelated to the
      others: sequentially consistent, usually not linearizable.

    ``drain`` appends removals until the structure is empty, and one more that
    returns empty.
    """
    procs = [chr(ord("A") + i) for i in range(processes)]
    seqs = dict.fromkeys(procs, 0)
    clocks = dict.fromkeys(procs, 0)
    contents: deque[str] = deque()
    out: list[Record] = []

    def emit(p: str, op: str, value: str | None) -> None:
        t = len(out)
        if timing == "lin":
            inv = 10 * t - rng.randint(0, 10 * overlap)
            resp = 10 * t + rng.randint(0, 10 * overlap)
        elif timing == "sequential":
            inv, resp = 10 * t, 10 * t + 5
        elif timing == "random":
            inv = clocks[p] + rng.randint(0, 30)
            resp = inv + rng.randint(0, 30)
            clocks[p] = resp + 1
        else:
            raise ValueError(timing)
        out.append(Record(p, seqs[p], op, value, inv, resp, ord=t))
        seqs[p] += 1

    def remove(p: str) -> None:
        v = None
        if contents:
            v = contents.popleft() if structure == "queue" else contents.pop()
        emit(p, REMOVE[structure], v)

    for _ in range(ops):
        p = rng.choice(procs)
        if rng.random() < insert_ratio:
            v = f"{p}{seqs[p]}"
            contents.append(v)
            emit(p, INSERT[structure], v)
        else:
            remove(p)
    if drain:
        while contents:
            remove(rng.choice(procs))
        remove(rng.choice(procs))
    return out


def replays(records: list[Record], structure: str) -> bool:
    """Does this exact order satisfy a plain deque?  The test's own tiny oracle."""
    d: deque[str] = deque()
    for r in records:
        if r.op in INSERT_OPS:
            assert r.value is not None
            d.append(r.value)
        elif r.value is None:
            if d:
                return False
        elif not d or (d.popleft() if structure == "queue" else d.pop()) != r.value:
            return False
    return True


def leftover(records: list[Record], structure: str) -> int:
    d: deque[str | None] = deque()
    for r in sorted(records, key=lambda r: r.ord or 0):
        if r.op in INSERT_OPS:
            d.append(r.value)
        elif r.value is not None and d:
            d.popleft() if structure == "queue" else d.pop()
    return len(d)


Mutation = Callable[[list[Record], random.Random], list[Record] | None]


def _removals(records: list[Record], *, full: bool) -> list[int]:
    return [
        i for i, r in enumerate(records) if r.op not in INSERT_OPS and (r.value is not None) == full
    ]


def swap_results(records: list[Record], rng: random.Random) -> list[Record] | None:
    full = _removals(records, full=True)
    if len(full) < 2:
        return None
    i, j = rng.sample(full, 2)
    out = list(records)
    out[i] = attrs.evolve(records[i], value=records[j].value)
    out[j] = attrs.evolve(records[j], value=records[i].value)
    return out


def duplicate_value(records: list[Record], rng: random.Random) -> list[Record] | None:
    full = _removals(records, full=True)
    if not full:
        return None
    i = rng.choice(full)
    others = [j for j in range(len(records)) if j != i and records[j].op not in INSERT_OPS]
    if not others:
        return None
    j = rng.choice(others)
    out = list(records)
    out[j] = attrs.evolve(records[j], value=records[i].value)
    return out


def drop_removal(records: list[Record], rng: random.Random) -> list[Record] | None:
    """Lose one element: its removal disappears (check with ``drained=True``)."""
    full = _removals(records, full=True)
    if not full:
        return None
    gone = records[rng.choice(full)]
    out = []
    for r in records:
        if r is gone:
            continue
        if r.process == gone.process and r.seq > gone.seq:
            r = attrs.evolve(r, seq=r.seq - 1)
        out.append(r)
    return out


def false_empty(records: list[Record], rng: random.Random) -> list[Record] | None:
    full = _removals(records, full=True)
    if not full:
        return None
    i = rng.choice(full)
    out = list(records)
    out[i] = attrs.evolve(records[i], value=None)
    return out


def relabel(records: list[Record], rng: random.Random) -> list[Record] | None:
    """Queue ops become stack ops and back: LIFO order in a queue, FIFO in a stack."""
    swap = {"enqueue": "push", "dequeue": "pop", "push": "enqueue", "pop": "dequeue"}
    out = [attrs.evolve(r, op=swap[r.op]) for r in records]
    new = "stack" if records[0].op in ("enqueue", "dequeue") else "queue"
    if replays(sorted(out, key=lambda r: r.ord or 0), new):
        return None  # both disciplines agree on this run: not a mutation
    return out


VALUE_MUTATIONS: dict[str, Mutation] = {
    "swap-results": swap_results,
    "duplicate-value": duplicate_value,
    "false-empty": false_empty,
    "relabel": relabel,
}


def swap_insert_and_removal_ords(records: list[Record], rng: random.Random) -> list[Record] | None:
    full = _removals(records, full=True)
    if not full:
        return None
    i = rng.choice(full)
    j = next(k for k, r in enumerate(records) if r.op in INSERT_OPS and r.value == records[i].value)
    out = list(records)
    out[i] = attrs.evolve(records[i], ord=records[j].ord)
    out[j] = attrs.evolve(records[j], ord=records[i].ord)
    return out


def shuffle_ords(records: list[Record], rng: random.Random) -> list[Record] | None:
    ords = [r.ord for r in records]
    rng.shuffle(ords)
    if ords == [r.ord for r in records]:
        return None
    return [attrs.evolve(r, ord=o) for r, o in zip(records, ords, strict=True)]


# ---------------------------------------------------------------------------
# Known-answer histories (tests/histories: each file with its verdicts and why)
# ---------------------------------------------------------------------------


def _known() -> list[tuple[str, str, bool]]:
    return [
        (name, model, expected[i])
        for name, expected in sorted(documented_verdicts().items())
        for i, model in enumerate(MODELS)
    ]




def test_every_known_history_is_documented() -> None:
    table = documented_verdicts()
    files = {p.name for p in history_files()}
    assert files, f"no histories under {HISTORIES}"
    assert files == set(table), f"undocumented: {files - set(table)}, absent: {set(table) - files}"


@pytest.mark.parametrize(("name", "model", "expected"), _known())
def test_known_history_exact(name: str, model: str, expected: bool) -> None:
    v = check_exact(load(name), model=model)
    assert v.ok is expected, v.describe()
    assert (v.reason is None) is expected
    assert v.model == model and v.method == "exact"


@pytest.mark.parametrize(("name", "model", "expected"), _known())
def test_known_history_auto_and_patterns(name: str, model: str, expected: bool) -> None:
    records = load(name)
    v = check(records, model=model)
    assert (v.ok, v.method) == (expected, "exact"), v.describe()
    # Patterns must never flag a consistent history; the known violations are all
    # simple enough for them to catch.
    p = check_patterns(records, model=model)
    assert p.ok is expected, f"{name}: {p.describe()}"


@pytest.mark.parametrize(("name", "model", "expected"), _known())
def test_known_history_without_ord_fails_certificate(name: str, model: str, expected: bool) -> None:
    v = check_certificate(load(name), model=model)
    assert not v.ok and v.reason is not None and v.reason.startswith("no ord on record")


def test_known_reasons_name_the_records() -> None:
    v = check_exact(load("not-sc-fifo-queue.jsonl"), model="sc")
    assert v.reason is not None and "Q#0 dequeue -> p2" in v.reason
    v = check_exact(load("sc-not-lin-stale-empty-queue.jsonl"), model="linearizable")
    assert v.reason is not None and "Q#0 dequeue -> empty" in v.reason
    v = check_patterns(load("sc-not-lin-stale-empty-stack.jsonl"), model="linearizable")
    assert v.reason is not None and v.reason.startswith("false empty") and "real time" in v.reason
    v = check_patterns(load("sc-not-lin-real-time-order-queue.jsonl"), model="linearizable")
    assert v.reason is not None and v.reason.startswith("FIFO") and "real time" in v.reason


# ---------------------------------------------------------------------------
# Legal generated histories pass every method
# ---------------------------------------------------------------------------

CASES = [
    (seed, structure, timing)
    for seed in range(6)
    for structure in ("queue", "stack")
    for timing in ("lin", "sequential", "random")
]


@pytest.mark.parametrize(("seed", "structure", "timing"), CASES)
def test_legal_histories_pass(seed: int, structure: str, timing: str) -> None:
    rng = random.Random(seed)
    drain = seed % 2 == 0
    records = legal_history(
        rng, structure=structure, processes=3, ops=24, timing=timing, drain=drain
    )
    models = ("sc",) if timing == "random" else MODELS
    for model in models:
        for v in (
            check_exact(records, model=model, drained=drain),
            check_certificate(records, model=model, drained=drain),
            check_patterns(records, model=model, drained=drain),
            check(records, model=model, drained=drain),
        ):
            assert v.ok, f"seed={seed}: {v.describe()}"


def test_drained_flag_demands_an_empty_end() -> None:
    rng = random.Random(7)
    for _ in range(50):
        records = legal_history(rng, ops=12, insert_ratio=0.8)
        if leftover(records, "queue"):
            break
    else:
        pytest.fail("generator never left elements behind")
    assert check_exact(records, model="sc").ok
    assert not check_exact(records, model="sc", drained=True).ok
    assert not check_certificate(records, model="sc", drained=True).ok
    v = check_patterns(records, model="sc", drained=True)
    assert not v.ok and v.reason is not None and v.reason.startswith("lost")


# ---------------------------------------------------------------------------
# Mutations are caught
# ---------------------------------------------------------------------------


def _mutants(
    mutation: Mutation, structure: str, timing: str, processes: int
) -> list[tuple[int, list[Record]]]:
    found = []
    for seed in range(40):
        rng = random.Random(seed)
        records = legal_history(
            rng, structure=structure, processes=processes, ops=16, timing=timing, drain=True
        )
        mutated = mutation(records, rng)
        if mutated is not None:
            found.append((seed, mutated))
        if len(found) == 6:
            break
    assert found, "mutation never applied"
    return found


@pytest.mark.parametrize("structure", ["queue", "stack"])
@pytest.mark.parametrize("name", sorted(VALUE_MUTATIONS))
def test_value_mutations_are_caught(name: str, structure: str) -> None:
    # Disjoint intervals force one linearization; one process forces one SC order.
    # Either way the mutated results cannot fit it.
    mutation = VALUE_MUTATIONS[name]
    for model, processes in (("linearizable", 3), ("sc", 1)):
        for seed, records in _mutants(mutation, structure, "sequential", processes):
            st = "stack" if (name == "relabel") == (structure == "queue") else "queue"
            for v in (
                check_exact(records, model=model, structure=st),
                check_certificate(records, model=model, structure=st),
                check(records, model=model),
            ):
                assert not v.ok, f"{name} seed={seed} {model}: {v.describe()}"


@pytest.mark.parametrize("structure", ["queue", "stack"])
def test_lost_element_is_caught_in_a_drained_run(structure: str) -> None:
    for seed, records in _mutants(drop_removal, structure, "lin", 3):
        for model in MODELS:
            for v in (
                check_exact(records, model=model, drained=True),
                check_certificate(records, model=model, drained=True),
                check_patterns(records, model=model, drained=True),
            ):
                assert not v.ok, f"seed={seed}: {v.describe()}"


@pytest.mark.parametrize("structure", ["queue", "stack"])
def test_patterns_catch_duplicates_and_false_empties(structure: str) -> None:
    for model, processes in (("linearizable", 3), ("sc", 1)):
        for mutation in (duplicate_value, false_empty):
            for seed, records in _mutants(mutation, structure, "sequential", processes):
                v = check_patterns(records, model=model)
                assert not v.ok, f"{mutation.__name__} seed={seed}: {v.describe()}"


def test_patterns_catch_swapped_queue_results() -> None:
    # With disjoint intervals the earlier dequeue now returns the later element,
    # which real-time FIFO (or causality, if it was not even enqueued yet) rejects.
    for seed, records in _mutants(swap_results, "queue", "sequential", 3):
        v = check_patterns(records, model="linearizable")
        assert not v.ok, f"seed={seed}"


def test_patterns_catch_lifo_in_a_queue_by_one_process() -> None:
    records = [
        Record("A", 0, "enqueue", "x", 0, 1),
        Record("A", 1, "enqueue", "y", 2, 3),
        Record("A", 2, "dequeue", "y", 4, 5),
        Record("A", 3, "dequeue", "x", 6, 7),
    ]
    for model in MODELS:
        v = check_patterns(records, model=model)
        assert not v.ok and v.reason is not None and v.reason.startswith("FIFO")


def test_patterns_real_time_lifo() -> None:
    # x then y pushed by different processes, strictly one after the other; y
    # pushed before x's pop began, yet y's pop starts after x's pop ended.
    records = [
        Record("A", 0, "push", "x", 0, 1),
        Record("B", 0, "push", "y", 2, 3),
        Record("C", 0, "pop", "x", 4, 5),
        Record("D", 0, "pop", "y", 6, 7),
    ]
    assert check_patterns(records, model="sc").ok
    assert check_exact(records, model="sc").ok
    v = check_patterns(records, model="linearizable")
    assert not v.ok and v.reason is not None and "LIFO" in v.reason and "real time" in v.reason
    assert not check_exact(records, model="linearizable").ok


# ---------------------------------------------------------------------------
# Certificates are verified, never trusted
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("structure", ["queue", "stack"])
@pytest.mark.parametrize("mutation", [swap_insert_and_removal_ords, shuffle_ords])
def test_wrong_certificate_is_caught(mutation: Mutation, structure: str) -> None:
    for seed, records in _mutants(mutation, structure, "lin", 3):
        in_order = sorted(records, key=lambda r: r.ord or 0)
        valid = replays(in_order, structure) and all(
            a.seq < b.seq
            for i, a in enumerate(in_order)
            for b in in_order[i + 1 :]
            if a.process == b.process
        )
        if valid and leftover(records, structure) == 0:
            continue  # the shuffle happened to produce another valid order
        v = check_certificate(records, model="sc", drained=True)
        assert not v.ok and v.reason is not None, f"seed={seed}"
        # The history itself is still legal: the exact search says so, and auto
        # lets the search overrule the bad certificate.
        assert check_exact(records, model="linearizable", drained=True).ok
        a = check(records, model="linearizable", drained=True)
        assert (a.ok, a.method) == (True, "exact"), a.describe()


def _ordered(*specs: tuple[str, int, str, str | None, int, int, int | None]) -> list[Record]:
    return [Record(p, s, op, v, i, r, ord=o) for p, s, op, v, i, r, o in specs]


def test_certificate_reasons() -> None:
    base = _ordered(
        ("A", 0, "enqueue", "x", 0, 1, 0),
        ("B", 0, "enqueue", "y", 2, 3, 1),
        ("C", 0, "dequeue", "x", 4, 5, 2),
        ("C", 1, "dequeue", "y", 6, 7, 3),
    )
    assert check_certificate(base, model="linearizable").ok

    def reason(records: list[Record], model: str = "linearizable") -> str:
        v = check_certificate(records, model=model)
        assert not v.ok and v.reason is not None
        return v.reason

    assert reason([*base[:3], attrs.evolve(base[3], ord=None)]).startswith("no ord on record C#1")
    assert "ord 2 is on two records" in reason([*base[:3], attrs.evolve(base[3], ord=2)])
    swapped_po = _ordered(("C", 0, "dequeue", None, 0, 1, 1), ("C", 1, "dequeue", None, 2, 3, 0))
    assert "program order" in reason(swapped_po, "sc")
    # x responded (1) before y was invoked (2); ordering y first replays fine
    # (y and x are then dequeued in that order) but breaks real time.
    rt = _ordered(
        ("A", 0, "enqueue", "x", 0, 1, 1),
        ("B", 0, "enqueue", "y", 2, 3, 0),
        ("C", 0, "dequeue", "y", 4, 5, 2),
        ("C", 1, "dequeue", "x", 6, 7, 3),
    )
    assert "real time" in reason(rt)
    assert check_certificate(rt, model="sc").ok
    assert not check_exact(rt, model="linearizable").ok
    assert check_exact(rt, model="sc").ok
    wrong_value = [*base[:2], attrs.evolve(base[2], value="y"), attrs.evolve(base[3], value="x")]
    assert "replay" in reason(wrong_value)
    dup = [*base[:1], attrs.evolve(base[1], value="x")]
    assert reason(dup).startswith("duplicate")


def test_certificate_scales() -> None:
    rng = random.Random(1)
    records = legal_history(rng, processes=50, ops=200_000, overlap=5)
    started = time.perf_counter()
    v = check_certificate(records, model="linearizable")
    elapsed = time.perf_counter() - started
    assert v.ok, v.describe()
    assert elapsed < 5, f"certificate took {elapsed:.1f}s for 200k records"
    started = time.perf_counter()
    assert check_patterns(records, model="linearizable").ok
    assert time.perf_counter() - started < 10


# ---------------------------------------------------------------------------
# The exact search: speed and limits
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("structure", ["queue", "stack"])
def test_exact_handles_sixty_ops_quickly(structure: str) -> None:
    started = time.perf_counter()
    for seed in range(4):
        rng = random.Random(seed)
        for timing, model in (("lin", "linearizable"), ("random", "sc")):
            records = legal_history(rng, structure=structure, processes=4, ops=60, timing=timing)
            assert check_exact(records, model=model).ok
            for mutation in (swap_results, false_empty):
                mutated = mutation(records, rng)
                if mutated is not None:
                    check_exact(mutated, model=model)  # either verdict; it must just finish
    assert time.perf_counter() - started < 10


def test_exact_refuses_large_histories() -> None:
    records = legal_history(random.Random(0), ops=150)
    with pytest.raises(ExactLimitError, match="refuses 150 ops"):
        check_exact(records, model="sc")
    with pytest.raises(ValueError):
        check_exact(records, model="sc", ops_max=100)
    assert check_exact(records, model="linearizable", ops_max=200).ok


def test_exact_state_budget() -> None:
    records = legal_history(random.Random(3), processes=5, ops=60, timing="random")
    with pytest.raises(ExactLimitError, match="gave up after 50 states"):
        check_exact(records, model="sc", states_max=50)


def test_empty_history_is_consistent() -> None:
    for model in MODELS:
        for f in (check_exact, check_certificate, check_patterns):
            assert f([], model=model, drained=True).ok
    # Certificates: an empty history has nothing to certify; auto falls to the search.
    assert check([], drained=True).method == "exact"


# ---------------------------------------------------------------------------
# Auto and the API surface
# ---------------------------------------------------------------------------


def test_auto_picks_the_strongest_affordable_method() -> None:
    rng = random.Random(5)
    small = legal_history(rng, ops=20)
    assert check(small).method == "certificate"
    no_ord = [attrs.evolve(r, ord=None) for r in small]
    assert check(no_ord).method == "exact"
    big = legal_history(rng, ops=500)
    big_no_ord = [attrs.evolve(r, ord=None) for r in big]
    v = check(big_no_ord)
    assert (v.ok, v.method) == (True, "patterns")
    assert "not a proof" in v.describe()
    wrong = shuffle_ords(big, rng)
    assert wrong is not None
    v = check(wrong)
    # A wrong certificate proves nothing, and the history is legal: unproven, not "no".
    assert (v.ok, v.decided, v.method) == (False, False, "certificate")
    assert v.reason is not None and "too large for it" in v.reason


def test_bad_arguments() -> None:
    records = [Record("A", 0, "enqueue", "x", 0, 1)]
    with pytest.raises(ValueError, match="model"):
        check(records, model="strict")
    with pytest.raises(ValueError, match="method"):
        check(records, method="magic")
    with pytest.raises(ValueError, match="history is a queue"):
        check(records, structure="stack")
    with pytest.raises(ValueError, match="share process"):
        check(records + records)


def test_verdict_describe() -> None:
    assert Verdict(True, "sc", "exact", "queue", None).describe() == "sc/exact/queue: ok"
    bad = Verdict(False, "linearizable", "certificate", "stack", "boom")
    assert bad.describe() == "linearizable/certificate/stack: VIOLATION: boom"
    assert re.search("not a proof", Verdict(True, "sc", "patterns", "queue", None).describe())


# -- named queues: each queue is its own object ---------------------------------------------


def _two_queue_history(b_first_out: str) -> list[Record]:
    """Queue a: enq x, enq y, deq -> x.  Queue b: enq u, enq v, deq -> ``b_first_out``.
    Ranks restart at 0 in every queue, and the processes use both queues."""
    return [
        Record("P", 0, "enqueue", "x", 0, 1, 1, 0, None, "a"),
        Record("P", 1, "enqueue", "u", 2, 3, 1, 0, None, "b"),
        Record("Q", 0, "enqueue", "y", 4, 5, 2, 1, None, "a"),
        Record("Q", 1, "enqueue", "v", 6, 7, 2, 1, None, "b"),
        Record("P", 2, "dequeue", "x", 8, 9, 1, 2, None, "a"),
        Record(
            "Q", 2, "dequeue", b_first_out, 10, 11, 1 if b_first_out == "u" else 2, 2, None, "b"
        ),  # fmt: skip
    ]


@pytest.mark.parametrize("method", ["auto", "exact", "certificate", "patterns"])
def test_a_history_of_named_queues_is_checked_queue_by_queue(method: str) -> None:
    ok = check(_two_queue_history("u"), method=method)
    assert ok.ok, ok.describe()
    bad = check(_two_queue_history("v"), method=method)  # b's FIFO broken, a's fine
    assert not bad.ok and bad.reason is not None and bad.reason.startswith("queue 'b': ")
    # Taken as one queue, the same records are wrong (two enqueues at rank 0): only the
    # split makes them right.
    merged = [attrs.evolve(r, queue=None) for r in _two_queue_history("u")]
    assert not check(merged, method="certificate").ok
