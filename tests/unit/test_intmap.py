"""IntMap (skueue.dht.intmap) behaves as a dict of positive ints, through growth, removals,
shrinking and pickling, and takes a fraction of a dict's memory."""

from __future__ import annotations

import pickle
import tracemalloc

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from skueue.dht.intmap import IntMap

keys = st.one_of(st.integers(1, 64), st.integers(1, 2**63 - 1), st.sampled_from([1 << 40, 1 << 20]))
ops = st.lists(st.tuples(st.sampled_from(["set", "pop", "pickle"]), keys, st.integers(0, 2**40)),
               max_size=400)


@given(ops)
def test_it_behaves_as_a_dict(script: list[tuple[str, int, int]]) -> None:
    m, model = IntMap(), {}
    for op, key, value in script:
        note(f"{op} {key} {value}")
        if op == "set":
            m[key] = value
            model[key] = value
        elif op == "pop":
            if key in model:
                assert m.pop(key) == model.pop(key)
            else:
                with pytest.raises(KeyError):
                    m.pop(key)
        else:
            m = pickle.loads(pickle.dumps(m))
        assert len(m) == len(model)
        assert (key in m) == (key in model)
    assert sorted(m.items()) == sorted(model.items())


def test_a_drained_map_gives_its_memory_back_and_keys_must_be_positions() -> None:
    m = IntMap()
    for k in range(1, 100_001):
        m[k * 7] = k
    big = len(pickle.dumps(m))
    for k in range(1, 100_001):
        del m[k * 7]
    assert len(m) == 0 and len(pickle.dumps(m)) < big // 100
    with pytest.raises(ValueError, match="at least 1"):
        m[0] = 1


def test_it_takes_a_fraction_of_a_dicts_memory() -> None:
    n = 200_000
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        m = IntMap()
        for k in range(n):
            m[(k + 1) * 3] = 10**9 + k
        used = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert used < 50 * n, f"{used / n:.0f} bytes per entry"
