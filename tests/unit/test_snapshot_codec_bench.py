"""bench/snapshot_codec.py (issue 31, stage 3): each host holds every element inserted,
comes back equal through both codecs (checked inside ``measure``), and the table is
printed with the command.  A tiny run; no timing is asserted."""

from __future__ import annotations

from typing import Any

import pytest

from skueue.core.ops import Structure
from skueue.dht.storage.memory import MemoryEntryStore
from tests.unit.bench_scripts import load_bench

bench = load_bench("snapshot_codec")


def test_main_prints_the_table_with_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    rows = bench.main(["--elements", "2500", "--batch", "300", "--repeats", "1"])
    assert [r["host"] for r in rows] == [name for name, _, _ in bench.HOSTS]
    assert all(r["elements"] == 2500 and r["codec_bytes"] > 0 for r in rows)
    printed = capsys.readouterr().out
    assert "command: .venv/bin/python bench/snapshot_codec.py --elements 2500" in printed
    assert "| queue, memory | 2,500 |" in printed and "| stack, entry store | 2,500 |" in printed


def test_a_store_keeps_the_elements_out_of_both_snapshots() -> None:
    store = MemoryEntryStore[Any]()
    host = bench.filled_host(1000, 200, 250, store, Structure.QUEUE)
    row = bench.measure("queue, entry store", host, store, 1)
    assert row["elements"] == 1000 and len(store._live) == 1000
    assert row["codec_bytes"] < 1000 * 200 and row["pickle_bytes"] < 1000 * 200
