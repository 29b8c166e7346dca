"""bench/storage_engine.py (issue 11): every scenario moves every item through each engine
and reads back what was appended; a broken engine is caught; the report is written.
Tiny runs; no timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.bench_scripts import load_bench

bench = load_bench("storage_engine")


@pytest.mark.parametrize("scenario", bench.SCENARIOS)
@pytest.mark.parametrize("engine", bench.ENGINES)
def test_every_item_goes_through_and_comes_back_right(
    engine: str, scenario: str, tmp_path: Path
) -> None:
    row = bench.measure(engine, scenario, items=300, item_bytes=1024, sync_every=64,
                        page_bytes=64 * 1024, burst=16, directory=tmp_path)  # fmt: skip
    assert row["wrong"] == 0 and row["left"] == 0
    assert row["mb_per_s"] > 0 and row["seed_mb_per_s"] in (166.0, 333.0)
    assert list(tmp_path.iterdir()) == []  # the store's directory was removed
    if engine == "paged":
        assert row["fsync_policy"] == "sync every 64 appends and removes"
        # 300 KiB through 64 KiB pages: consumed pages were collected, the heads stay.
        assert row["pages_left"] == {"index": [0], "data": [4]}


class Lying(bench.MemoryEntryStore):  # type: ignore[misc]
    """Returns a wrong element for record 5."""

    def read(self, record: int) -> Any:
        element = super().read(record)
        return element + b"!" if record == 5 else element


def test_a_wrong_element_is_counted() -> None:
    data = bench.payloads(8)
    assert bench.sequential(Lying(), 20, data, 0, 4) == 1
    assert bench.interleaved(Lying(), 20, data, 3, 4) == 1
    assert bench.interleaved(bench.MemoryEntryStore(), 20, data, 3, 4) == 0


def test_main_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "storage.json"
    rows = bench.main(["--items", "200", "--sync-every", "0,50", "--page-bytes", "65536",
                       "--dir", str(tmp_path), "--out", str(out)])  # fmt: skip
    assert len(rows) == 3 * 2 + 3  # paged: 3 scenarios x 2 policies; memory: 3
    report = json.loads(out.read_text())
    assert report["rows"] == rows
    printed = capsys.readouterr().out
    assert "| paged | sequential | one final sync | 200 |" in printed
    assert "| CPU µs/item | median MB/s | seed 004 MB/s | ours/seed |" in printed
    for row in rows:  # best of the repeats, their median, and the best run's CPU time
        assert row["median_mb_per_s"] == sorted(row["repeats_mb_per_s"])[1]  # of 3
        assert row["mb_per_s"] == max(row["repeats_mb_per_s"]) and row["cpu_us_per_item"] > 0


def test_the_ab_script_alternates_two_checkouts_and_reports_medians(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ab = load_bench("storage_engine_ab")
    out = tmp_path / "ab.json"
    report = ab.main(["--base", str(ab.HERE), "--rounds", "3", "--items", "300",
                      "--scenarios", "sequential", "--sync-every", "0,64",
                      "--dir", str(tmp_path), "--out", str(out)])  # fmt: skip
    assert [(r["scenario"], r["fsync_policy"]) for r in report["rows"]] == [
        ("sequential", "one final sync"),
        ("sequential", "sync every 64 appends and removes"),
    ]
    for row in report["rows"]:
        assert len(row["base_runs"]) == len(row["this_runs"]) == 3
        assert row["this_median"] == sorted(row["this_runs"])[1]
    assert json.loads(out.read_text()) == report
    assert "| sequential | one final sync |" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ab.json"]  # stores removed
