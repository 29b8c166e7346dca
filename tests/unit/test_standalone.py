"""The checkout stands alone: nothing in it reads or points at a folder beside it.

A user's clone has only what is committed.  Known-answer histories, docs and fixtures
live inside the checkout (``tests/histories``, ``docs/``); `.ci/run` also runs the suite
from a copy with nothing beside it.  This test names the offending line at once.
"""

from __future__ import annotations

import re
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
SCANNED = ("README.md", "docs", "deploy", "scripts", "bench", "tests", "skueue", "cli",
           "overlay", "dht", ".ci", "pyproject.toml")
OUTSIDE = re.compile(r"\.\./shared\b|\.parent\s*/\s*[\"']shared[\"']")
"""A relative path out of the checkout into ``shared``, as text or as a pathlib join."""


def _text_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        path = TOP / name
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        files += [p for p in candidates if p.is_file() and p.suffix not in {".png", ".pyc"}
                  and "__pycache__" not in p.parts and p != Path(__file__).resolve()]
    return files


def test_nothing_points_outside_the_checkout() -> None:
    found = []
    for path in _text_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(TOP)}:{number}: {line.strip()}")
    assert not found, "reads or points outside the checkout:\n" + "\n".join(found)


def test_the_pattern_catches_both_forms() -> None:
    assert OUTSIDE.search("see ../shared/ARCHITECTURE.md")
    assert OUTSIDE.search('Path(__file__).resolve().parents[2].parent / "shared" / "h"')
    assert not OUTSIDE.search("--out /shared/analysis")
