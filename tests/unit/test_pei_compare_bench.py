"""bench/pei_compare.py and skueue/sim/pei_sweep.py (issue 14 item 6): seed 000's figures
with Skueue on the same axes.  Smoke-sized runs: every figure, both designs, files and
plots written, Skueue's PEI 0 checked, and a Skueue PEI above 0 refused."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import skueue.sim.pei_sweep as sweep
from tests.unit.bench_scripts import load_bench

bench = load_bench("pei_compare")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTS = ("pei_distribution", "pei_vs_lag", "pei_vs_n", "pei_vs_k", "pei_vs_clients")


def test_every_figure_has_both_designs_and_skueue_pops_index_0() -> None:
    rows = [sweep.run(p) for p in sweep.points(sweep.SMOKE)]
    assert all(tuple(r) == sweep.ROW_FIELDS for r in rows)
    for figure in sweep.FIGURES:
        designs = {r["design"] for r in rows if r["figure"] == figure}
        assert designs == {"relaxed", "skueue"}, figure
    skueue = [r for r in rows if r["design"] == "skueue"]
    assert all(r["max"] == 0 and r["mean"] == 0 for r in skueue)
    assert all(int(r["pops"]) > 0 for r in skueue)  # type: ignore[arg-type]
    assert all(float(r["mean_rounds"]) > 1 for r in skueue)  # type: ignore[arg-type]
    # Rounds per request of the measured requests only: not the create, not the prefill.
    paper_load = sweep.SKUEUE_RATE * sweep.SMOKE.skueue_rounds
    assert {r["requests"] for r in skueue if r["figure"] != "clients"} == {paper_load}
    relaxed = [r for r in rows if r["design"] == "relaxed"]
    assert all(r["pops"] == sweep.SMOKE.pops for r in relaxed)
    assert max(float(r["mean"]) for r in relaxed) > 1  # type: ignore[arg-type]


def test_the_lag_sweep_measures_both_protocols_for_every_strategy() -> None:
    points = [p for p in sweep.lag_points(sweep.SMOKE) if isinstance(p, sweep.RelaxedPoint)]
    seen = {(p.config.strategy, p.config.lag, p.config.warmup) for p in points}
    lags = sweep.SMOKE.lags
    assert seen == {(s, lag, w) for s in sweep.Strategy for lag in lags for w in (0, lag)}


def test_main_writes_tables_csvs_json_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main(["--smoke", "--jobs", "1", "--out", str(tmp_path)]) == 0
    for name in PLOTS:
        assert (tmp_path / f"{name}.png").read_bytes().startswith(PNG_MAGIC), name
    for figure in sweep.FIGURES:
        with (tmp_path / f"pei_{figure}.csv").open() as f:
            rows = list(csv.DictReader(f))
        assert {r["design"] for r in rows} == {"relaxed", "skueue"}
        assert {r["max"] for r in rows if r["design"] == "skueue"} == {"0"}
    report = json.loads((tmp_path / "pei_compare.json").read_text())
    assert report["scale"]["pops"] == sweep.SMOKE.pops
    assert len(report["rows"]) == len(sweep.points(sweep.SMOKE))
    out = capsys.readouterr().out
    for title in ("Figure 3", "Figure 4", "Figure 5", "Figures 6 and 7"):
        assert f"## {title}" in out
    assert "of the pops took the most urgent element" in out

    # The tables and plots come back from the files alone.
    for name in PLOTS:
        (tmp_path / f"{name}.png").unlink()
    assert bench.main(["--smoke", "--replot", "--out", str(tmp_path)]) == 0
    assert all((tmp_path / f"{name}.png").exists() for name in PLOTS)
    assert tables(capsys.readouterr().out) == tables(out)


def tables(text: str) -> list[list[str]]:
    """Each section's title and table, without the run's closing line."""
    return [section.split("\n\n")[:2] for section in text.split("## ")[1:]]


def test_a_skueue_pei_above_zero_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sweep, "pei_by_order", lambda records: [0, 3, 0])
    code = bench.main(["--smoke", "--jobs", "1", "--figures", "k", "--out", str(tmp_path)])
    assert code == 1
    assert "Skueue popped a less urgent element" in capsys.readouterr().err
