"""The daemon's CPU time and resident memory in its stats entry (issue 15, item 5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skueue.runtime.operations.usage import cpu_seconds, rss_bytes, usage

BUSY_S = 0.05


def test_cpu_seconds_grow_while_the_process_works() -> None:
    before = cpu_seconds()
    end = before + BUSY_S
    spins = 0
    while cpu_seconds() < end and spins < 2_000_000:
        spins += 1
    assert cpu_seconds() >= end


def test_rss_is_the_resident_pages_of_statm(tmp_path: Path) -> None:
    statm = tmp_path / "statm"
    statm.write_text("12345 678 90 1 0 2 0\n")
    assert rss_bytes(statm) == 678 * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("content", [None, "", "12345\n", "a b c\n"], ids=repr)
def test_rss_is_unknown_rather_than_wrong(tmp_path: Path, content: str | None) -> None:
    statm = tmp_path / "statm"
    if content is not None:
        statm.write_text(content)
    assert rss_bytes(statm) is None


def test_this_process_reports_its_own_figures() -> None:
    figures = usage()
    rss = figures["rss_bytes"]
    assert isinstance(rss, int) and 1_000_000 < rss < 100_000_000_000
    assert isinstance(figures["cpu_seconds"], float) and figures["cpu_seconds"] > 0
