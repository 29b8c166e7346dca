"""The project's known-answer histories (this folder's README is their verdict table).

Shared by the local checkers' tests and the Spark checks' tests.  A history or a table
row missing fails the test that asked for it, with the path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skueue.check.history import Record, read_jsonl

HISTORIES = Path(__file__).resolve().parent
"""This folder: inside the checkout, so a clone's tests need nothing beside it."""


def documented_verdicts() -> dict[str, tuple[bool, bool]]:
    """``file -> (sequentially consistent, linearizable)`` from the README table."""
    readme = HISTORIES / "README.md"
    if not readme.is_file():
        pytest.fail(f"known-answer histories missing: expected {readme}", pytrace=False)
    yes = {"yes": True, "no": False}
    table: dict[str, tuple[bool, bool]] = {}
    for line in readme.read_text().splitlines():
        cells = [c.strip().strip("*").strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].endswith(".jsonl"):
            table[cells[0]] = (yes[cells[1].lower()], yes[cells[2].lower()])
    return table


def history_files() -> list[Path]:
    return sorted(HISTORIES.glob("*.jsonl"))


def load(name: str) -> list[Record]:
    path = HISTORIES / name
    if not path.is_file():
        pytest.fail(f"known-answer history missing: {path}", pytrace=False)
    with path.open() as f:
        return read_jsonl(f)
