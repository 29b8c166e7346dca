"""A failed certificate proves nothing (issue 28, item 20).

The certificate replays a history in the anchor's ``ord`` order: a pass proves the
history consistent, a failure only that this one order is no witness.  A simulator
history with two dequeue results swapped fails it, is too large for the exact search at
its default limit, and matches no violation pattern; it was reported as a violation
"decided by the anchor's ord certificate (a proof)".  The exact search, given room,
finds it linearizable: that verdict was false.  It must be *unproven*, saying what would
decide it.
"""

from __future__ import annotations

import attrs

from skueue.check.checker import EXACT_OPS_MAX, Verdict, check, check_exact, check_patterns
from skueue.check.history import Record
from skueue.sim.rounds import SyncConfig, SyncSim

MODELS = ("linearizable", "sc")


def swap_two_dequeues(records: list[Record]) -> list[Record]:
    """The first two dequeues that returned elements give each other's results."""
    hits = [i for i, r in enumerate(records) if r.op == "dequeue" and r.value is not None]
    i, j = hits[0], hits[1]
    out = list(records)
    out[i] = attrs.evolve(records[i], value=records[j].value)
    out[j] = attrs.evolve(records[j], value=records[i].value)
    return out


def swapped_history() -> list[Record]:
    big = SyncSim(SyncConfig(processes=8, rounds=30, rate=5, seed=7)).run().records
    return swap_two_dequeues(big)


def test_the_swapped_history_is_in_truth_linearizable() -> None:
    """What makes a "no" for it false: the exact search, given room, finds a witness."""
    history = swapped_history()
    assert len(history) > EXACT_OPS_MAX
    for model in MODELS:
        assert check_exact(history, model=model, ops_max=2 * len(history)).ok
        assert check_patterns(history, model=model).ok


def test_a_failed_certificate_beyond_the_exact_search_is_unproven() -> None:
    history = swapped_history()
    for model in MODELS:
        v = check(history, model=model)
        assert not v.decided and not v.ok, v.describe()
        assert v.describe().startswith(f"{model}/certificate/queue: UNPROVEN: ")
        reason = v.reason or ""
        assert "the ord certificate fails (certificate replay" in reason
        assert "proves only that the anchor's order is no witness" in reason
        assert "no violation pattern matched" in reason
        assert "the exact search would decide it" in reason
        assert f"({len(history)} ops > {EXACT_OPS_MAX})" in reason


def test_a_violation_the_patterns_prove_stays_a_violation() -> None:
    """A failed certificate plus a matching pattern is a proven violation, by the pattern."""
    history = swapped_history()
    taken = next(r for r in history if r.op == "dequeue" and r.value is not None)
    duplicated = [*history, attrs.evolve(taken, process="extra", seq=0, ord=10_000,
                                         invoke=10_000, response=10_001)]
    for model in MODELS:
        v = check(duplicated, model=model)
        assert (v.ok, v.decided, v.method) == (False, True, "patterns"), v.describe()
        assert "VIOLATION" in v.describe()


def test_a_proven_violation_of_one_queue_outweighs_an_unproven_one() -> None:
    unsure = [attrs.evolve(r, queue="a") for r in swapped_history()]
    wrong = [Record("q", 0, "enqueue", "x", 0, 1, queue="b", ord=0),
             Record("q", 1, "dequeue", "y", 2, 3, queue="b", ord=1)]  # y was never enqueued
    v = check(unsure + wrong)
    assert (v.ok, v.decided) == (False, True), v.describe()
    assert "queue 'b'" in (v.reason or "")
    alone = check(unsure)
    assert (alone.ok, alone.decided) == (False, False)


def test_describe_says_unproven() -> None:
    v = Verdict(False, "sc", "certificate", "queue", "why", decided=False)
    assert v.describe() == "sc/certificate/queue: UNPROVEN: why"
