"""The log's terms as runs (replication/terms.py) say what a term per index would,
through appends, truncations and compactions drawn at random."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from skueue.replication.terms import TermRuns

steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 2)),  # long runs, and new ones
        st.tuples(st.just("truncate"), st.integers(0, 40)),
        st.tuples(st.just("drop"), st.integers(0, 40)),
    ),
    max_size=60,
)


@given(base=st.integers(0, 5), ops=steps)
def test_runs_agree_with_a_term_per_index(base: int, ops: list[tuple[str, int]]) -> None:
    runs = TermRuns(base)
    model: dict[int, int] = {}  # index -> term, the indexes base + 1 .. last
    last = base
    for op, x in ops:
        if op == "append":
            last += 1
            model[last] = x
            runs.append(x)
        elif op == "truncate" and x > runs.base:  # a log never truncates its snapshot
            for index in range(x, last + 1):
                model.pop(index, None)
            last = min(last, x - 1)
            runs.truncate_from(x)
        elif op == "drop" and runs.base <= x <= last:
            for index in range(runs.base + 1, x + 1):
                del model[index]
            runs.drop_through(x)
        assert runs.last == last
        assert {i: runs.at(i) for i in range(runs.base + 1, last + 1)} == model
        assert runs.last_term() == (model[last] if last > runs.base else None)
        assert len(runs.starts) == len(runs.terms) <= len(model)
        for i in model:
            start = runs.run_start(i)
            assert all(model[j] == model[i] for j in range(start, i + 1))
            assert start - 1 == runs.base or model[start - 1] != model[i]


def test_a_compaction_inside_a_run_starts_that_run_after_it() -> None:
    runs = TermRuns(0)
    for term in (1, 1, 1, 2):
        runs.append(term)
    runs.drop_through(1)
    assert (runs.base, runs.starts, runs.terms) == (1, [2, 4], [1, 2])
    assert runs.run_start(3) == 2 and runs.at(2) == 1 and runs.at(4) == 2
