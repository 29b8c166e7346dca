"""bench/replica_check_cost.py builds the state it says, and two builds of it digest alike
(the digest depends on the state, not on the store's record ids or the run)."""

from __future__ import annotations

from pathlib import Path

from skueue.runtime.applied_state import state_digest
from tests.unit.bench_scripts import load_bench


def test_the_state_holds_the_elements_asked_and_digests_alike(tmp_path: Path) -> None:
    bench = load_bench("replica_check_cost")
    one, store_one = bench.filled(300, tmp_path / "one")
    two, store_two = bench.filled(300, tmp_path / "two")
    smaller, store_three = bench.filled(200, tmp_path / "three")
    try:
        assert one.process.entries() == 300 and smaller.process.entries() == 200
        assert state_digest(one, {}, {}) == state_digest(two, {}, {})
        assert state_digest(one, {}, {}) != state_digest(smaller, {}, {})
    finally:
        for store in (store_one, store_two, store_three):
            store.close()
