"""The core stays pure: protocol modules import no I/O, clocks or wire format.

(ARCHITECTURE.md, 'Layering': overlay, dht (but dht/storage) and the protocol modules of
skueue import no trio, msgpack, structlog, time or os; nothing imports cli.)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"trio", "msgpack", "structlog", "time", "os", "socket", "asyncio", "threading",
             "random", "pickle", "subprocess", "cli"}
# random is forbidden in the protocol core: randomness must be passed in by drivers.
PURE_DIRS = ["overlay", "dht"]
PURE_SKUEUE = ["anchor", "batch", "effects", "errors", "intake", "messages", "node", "ops",
               "process", "membership", "membership_messages", "membership_state", "joining",
               "leaving", "history", "check", "check_exact", "check_certificate",
               "check_patterns"]


def pure_files() -> list[Path]:
    files = [p for d in PURE_DIRS for p in (ROOT / d).glob("*.py")]
    files += [ROOT / "skueue" / f"{name}.py" for name in PURE_SKUEUE]
    return [f for f in files if f.exists()]


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_pure_core_exists() -> None:
    names = {p.stem for p in pure_files()}
    assert {"node", "process", "batch", "anchor", "routing", "tree", "table"} <= names


def test_the_core_imports_no_io_clock_or_wire_format() -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(imported_roots(p) & FORBIDDEN) for p in pure_files()
    }
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"pure modules import I/O or clocks: {offenders}"


def test_nothing_imports_the_cli() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for d in ("overlay", "dht", "skueue")
        for p in (ROOT / d).rglob("*.py")
        if "cli" in imported_roots(p)
    ]
    assert not offenders, f"library modules import cli: {offenders}"
