"""Property: both storage engines behave like a plain dict under any sequence of appends,
removes, reads, syncs, clean reopens and crashes.

Hypothesis draws the engine's seed and the number of steps; the seed alone replays the
program (``run_program(engine, seed, steps)``, printed on failure).  The model is a dict
``record -> (position, ticket, element)`` for the live state plus a copy of it at the last
sync.  After every step the store's ``len`` and, after every reopen or crash, its whole
``live()`` listing and every element must match the model.

- A clean reopen (close, open again) must give the live state exactly.
- A crash must keep every synced record exactly and bring back none that was removed and
  synced.  The memory engine must fall back to the synced state exactly.  The paged
  engine is abandoned without a sync, as a dying process is, and the kernel still holds
  its page cache, so unsynced appends and removes may or may not have survived: each one
  may go either way, but what survives must be exact, and the model then adopts it.

Pages are tiny (4 KiB data pages, 16 slots an index page, 2-3 mapped pages) so that page
rolls, evictions and garbage collection happen within a few steps.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.dht.storage import MemoryEntryStore, UnknownRecord
from skueue.dht.storage.paged import PagedEntryStore

PAGE = 4096
Entry = tuple[int, int, bytes]


class Harness:
    """One engine under test plus the dict model it must match."""

    def __init__(self, engine: str, directory: Path, rng: random.Random) -> None:
        self.engine = engine
        self.directory = directory
        self.mapped = rng.choice([2, 3])
        self.store: Any = self._open() if engine == "paged" else MemoryEntryStore()
        self.model: dict[int, Entry] = {}
        self.durable: dict[int, Entry] = {}
        self.highest = -1
        self.durable_highest = -1  # ids up to here were synced: never handed out again

    def _open(self) -> PagedEntryStore:
        store = PagedEntryStore(
            self.directory, page_bytes=PAGE, index_page_slots=16, mapped_pages_max=self.mapped
        )
        assert store.recovery.corrupt == (), store.recovery.describe()
        return store

    def append(self, rng: random.Random) -> None:
        size = rng.choice([0, 1, 100, 1000, rng.randrange(PAGE + 1)])
        entry = (rng.randrange(1, 2**63), rng.randrange(-(2**40), 2**40), rng.randbytes(size))
        record = self.store.append(*entry)
        assert record > self.highest, f"record {record} after {self.highest}"
        self.highest = record
        self.model[record] = entry

    def remove(self, rng: random.Random) -> None:
        if self.model and rng.random() < 0.9:
            record = rng.choice(list(self.model))
            self.store.remove(record)
            del self.model[record]
        else:
            record = rng.randrange(-1, self.highest + 2)
            if record not in self.model:
                with pytest.raises(UnknownRecord):
                    self.store.remove(record)

    def read(self, rng: random.Random) -> None:
        record = rng.randrange(-1, self.highest + 2)
        if record in self.model:
            assert self.store.read(record) == self.model[record][2], f"record {record}"
        else:
            with pytest.raises(UnknownRecord):
                self.store.read(record)

    def sync(self, rng: random.Random) -> None:
        self.store.sync()
        self.durable = dict(self.model)
        self.durable_highest = self.highest

    def reopen(self, rng: random.Random) -> None:
        if self.engine == "paged":
            self.store.close()
            self.store = self._open()
        else:  # a memory store does not outlive its object: a clean stop is sync + crash
            self.store.sync()
            self.store.crash()
        self.durable = dict(self.model)
        self.durable_highest = self.highest
        self.check_all()

    def crash(self, rng: random.Random) -> None:
        if self.engine == "memory":
            self.store.crash()
            self.model = dict(self.durable)
            self.highest = self.durable_highest  # unsynced appends' ids come again
            self.check_all()
            return
        self.store.abandon()
        self.store = self._open()
        found = {record: (position, ticket) for record, position, ticket in self.store.live()}
        for record, entry in self.durable.items():
            if record in self.model:  # synced and not removed since: must be there exactly
                assert found.get(record) == entry[:2], f"synced record {record} lost"
        for record in found:
            assert record in self.model or record in self.durable, f"{record} came back"
        self.model = {r: self.model.get(r) or self.durable[r] for r in found}
        self.durable = dict(self.model)
        assert self.store.next_record - 1 >= self.durable_highest, "a synced id comes again"
        self.highest = self.durable_highest = self.store.next_record - 1
        self.check_all()

    def check_all(self) -> None:
        listed = list(self.store.live())
        expected = [(r, e[0], e[1]) for r, e in sorted(self.model.items())]
        assert listed == expected
        for record, entry in self.model.items():
            assert self.store.read(record) == entry[2], f"record {record}"


STEPS: list[tuple[float, Callable[[Harness, random.Random], None]]] = [
    (0.40, Harness.append),
    (0.25, Harness.remove),
    (0.15, Harness.read),
    (0.12, Harness.sync),
    (0.04, Harness.reopen),
    (0.04, Harness.crash),
]


def run_program(engine: str, seed: int, steps: int, directory: Path) -> None:
    rng = random.Random(seed)
    harness = Harness(engine, directory, rng)
    weights = [w for w, _ in STEPS]
    try:
        for step in range(steps):
            (action,) = rng.choices([a for _, a in STEPS], weights)
            try:
                action(harness, rng)
                assert len(harness.store) == len(harness.model)
            except AssertionError as e:
                raise AssertionError(f"step {step} ({action.__name__}): {e}") from None
        harness.reopen(rng)
    finally:
        if engine == "paged":
            harness.store.abandon()


@pytest.mark.parametrize("engine", ["memory", "paged"])
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 150))
def test_engines_match_a_dict(
    engine: str, seed: int, steps: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    replay = f"replay with: run_program({engine!r}, seed={seed}, steps={steps}, directory=...)"
    if currently_in_test_context():
        note(replay)
    directory = tmp_path_factory.mktemp("store")
    try:
        run_program(engine, seed, steps, directory)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{replay}") from None
