"""The three checking methods agree with each other and with a brute-force oracle.

- On tiny histories the exact search must give exactly the verdict of a naive
  enumeration of all admissible orders (no memo, no pruning), so its memo and
  its lookahead pruning are never unsound and never too weak.
- A valid certificate proves consistency: whenever ``certificate`` passes,
  ``exact`` must pass.
- Patterns are sound: whenever ``patterns`` flags, ``exact`` must flag, and on
  legal histories patterns never flag.

Every example is driven by one ``random.Random(seed)``; hypothesis prints the
seed (and the other drawn arguments) of a failing example, and
``print_blob=True`` adds the blob that replays it with ``@reproduce_failure``.
Raise ``SKUEUE_PROPERTY_EXAMPLES`` for a longer run.
"""

from __future__ import annotations

import os
import random
from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from skueue.check.checker import check_certificate, check_exact, check_patterns
from skueue.check.history import INSERT_OPS, Record
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

EXAMPLES = int(os.environ.get("SKUEUE_PROPERTY_EXAMPLES", "600"))
MODELS = ("sc", "linearizable")


def jitter_time(records: list[Record], rng: random.Random) -> list[Record] | None:
    """Move one op's interval: breaks real time in ways no value mutation does."""
    if not records:
        return None
    i = rng.randrange(len(records))
    r = records[i]
    shift = rng.choice([-1, 1]) * rng.randint(5, 60)
    width = rng.randint(0, 15)
    out = list(records)
    out[i] = Record(r.process, r.seq, r.op, r.value, r.invoke + shift, r.invoke + shift + width)
    return out


MUTATIONS = {
    "none": None,
    "swap-results": swap_results,
    "duplicate-value": duplicate_value,
    "false-empty": false_empty,
    "drop-removal": drop_removal,
    "relabel": relabel,
    "shuffle-ords": shuffle_ords,
    "swap-ords": swap_insert_and_removal_ords,
    "jitter-time": jitter_time,
}


def brute_force(records: list[Record], structure: str, realtime: bool, drained: bool) -> bool:
    """Is there an admissible order?  Plain enumeration, the slowest possible oracle."""
    values = [r.value for r in records if r.op in INSERT_OPS]
    if len(set(values)) != len(values):
        return False  # elements must be unique
    # before[i]: the index of the op its process issued just before op i, or -1.
    before = [-1] * len(records)
    last: dict[str, int] = {}
    for i in sorted(range(len(records)), key=lambda i: (records[i].process, records[i].seq)):
        before[i] = last.get(records[i].process, -1)
        last[records[i].process] = i

    def go(placed: set[int], contents: deque[str]) -> bool:
        if len(placed) == len(records):
            return not (drained and contents)
        unplaced = [i for i in range(len(records)) if i not in placed]
        for i in unplaced:
            r = records[i]
            if before[i] >= 0 and before[i] not in placed:
                continue
            if realtime and any(records[j].response < r.invoke for j in unplaced if j != i):
                continue
            nxt = deque(contents)
            if r.op in INSERT_OPS:
                assert r.value is not None
                nxt.append(r.value)
            elif r.value is None:
                if nxt:
                    continue
            elif not nxt or (nxt.popleft() if structure == "queue" else nxt.pop()) != r.value:
                continue
            if go(placed | {i}, nxt):
                return True
        return False

    return go(set(), deque())


def _history(
    seed: int, structure: str, timing: str, mutation: str, ops: int
) -> tuple[list[Record], bool]:
    rng = random.Random(seed)
    drain = rng.random() < 0.3
    records = legal_history(
        rng,
        structure=structure,
        processes=rng.randint(1, 4),
        ops=ops,
        timing=timing,
        insert_ratio=rng.uniform(0.3, 0.8),
        overlap=rng.randint(0, 3),
        drain=drain,
    )
    fn = MUTATIONS[mutation]
    mutated = fn(records, rng) if fn is not None and records else None
    if mutated is None:
        return records, True
    # Wrong ords leave the history itself legal.
    return mutated, mutation in ("shuffle-ords", "swap-ords")


def _structure(records: list[Record], default: str) -> str:
    if not records:
        return default
    return "queue" if records[0].op in ("enqueue", "dequeue") else "stack"


histories = {
    "seed": st.integers(min_value=0, max_value=2**32 - 1),
    "structure": st.sampled_from(["queue", "stack"]),
    "timing": st.sampled_from(["lin", "sequential", "random"]),
    "mutation": st.sampled_from(sorted(MUTATIONS)),
}


@settings(deadline=None, print_blob=True, max_examples=EXAMPLES)
@given(**histories, ops=st.integers(min_value=0, max_value=7))
def test_exact_matches_brute_force(
    seed: int, structure: str, timing: str, mutation: str, ops: int
) -> None:
    records, legal = _history(seed, structure, timing, mutation, ops)
    st_ = _structure(records, structure)
    for model in MODELS:
        for drained in (False, True):
            realtime = model == "linearizable"
            expected = brute_force(records, st_, realtime, drained)
            v = check_exact(records, model=model, drained=drained)
            assert v.ok is expected, f"seed={seed} {model} drained={drained}: {v.describe()}"
            _agree(records, model, drained, v.ok, seed)


@settings(deadline=None, print_blob=True, max_examples=max(EXAMPLES // 3, 10))
@given(**histories, ops=st.integers(min_value=8, max_value=40))
def test_methods_agree_on_larger_histories(
    seed: int, structure: str, timing: str, mutation: str, ops: int
) -> None:
    records, legal = _history(seed, structure, timing, mutation, ops)
    for model in MODELS:
        for drained in (False, True):
            v = check_exact(records, model=model, drained=drained)
            _agree(records, model, drained, v.ok, seed)
            if legal and (timing != "random" or model == "sc"):
                ends_empty = drained_ok(records)
                if not drained or ends_empty:
                    assert v.ok, f"seed={seed} {model}: legal history rejected: {v.describe()}"


def drained_ok(records: list[Record]) -> bool:
    ins = {r.value for r in records if r.op in INSERT_OPS}
    rem = {r.value for r in records if r.op not in INSERT_OPS and r.value is not None}
    return ins == rem


def _agree(records: list[Record], model: str, drained: bool, exact_ok: bool, seed: int) -> None:
    cert = check_certificate(records, model=model, drained=drained)
    if cert.ok:
        assert exact_ok, f"seed={seed} {model}: certificate passed, exact failed"
    pat = check_patterns(records, model=model, drained=drained)
    if not pat.ok:
        assert not exact_ok, f"seed={seed} {model}: unsound pattern: {pat.reason}"


@settings(deadline=None, print_blob=True, max_examples=max(EXAMPLES // 6, 10))
@given(
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    structure=st.sampled_from(["queue", "stack"]),
    timing=st.sampled_from(["lin", "sequential", "random"]),
    ops=st.integers(min_value=0, max_value=600),
)
def test_patterns_never_flag_large_legal_histories(
    seed: int, structure: str, timing: str, ops: int
) -> None:
    # Too large for the search: the certificate proves them legal instead.
    records, _ = _history(seed, structure, timing, "none", ops)
    models = ("sc",) if timing == "random" else MODELS
    for model in models:
        for drained in (False, True):
            if drained and not drained_ok(records):
                continue
            assert check_certificate(records, model=model, drained=drained).ok, f"seed={seed}"
            v = check_patterns(records, model=model, drained=drained)
            assert v.ok, f"seed={seed} {model}: unsound pattern: {v.reason}"
