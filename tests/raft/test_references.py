"""Every claim test in tests/raft names the section it checks, so that a failure points
at the rule it broke (docs/replication.md §9)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

HERE = Path(__file__).parent
REFERENCE = re.compile(r"Reference: (Raft §\d|thesis §\d|docs/replication\.md §\d)")


def test_every_claim_names_its_section() -> None:
    """Each ``test_*`` function of tests/raft (this file aside) has a docstring whose
    ``Reference:`` line cites Raft, the thesis or the design note by section."""
    tests = 0
    missing = []
    for path in sorted(HERE.glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                tests += 1
                if not REFERENCE.search(ast.get_docstring(node) or ""):
                    missing.append(f"{path.name}::{node.name}")
    assert tests >= 10
    assert not missing, f"claim tests without a Reference: line: {missing}"
