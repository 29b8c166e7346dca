"""No source module over MODULE_LINES_MAX lines (issue 29): a module that long does more
than one job, and is split by job, each part named for its job.

Source is every ``.py`` file of the checkout but the tests: the packages, the command
line, the benchmarks, the scripts, the deployment tools, and any folder added later.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

MODULE_LINES_MAX = 600

ROOT = Path(__file__).resolve().parents[2]
# Folders that hold no project source: the tests, and what tools make in a checkout.
NOT_SOURCE = {"tests", "build", "dist", "node_modules", "__pycache__"}


def source_folder(folder: Path) -> bool:
    name = folder.name
    return not (
        name in NOT_SOURCE
        or name.startswith(".")  # .venv, .git, the tools' caches
        or name.endswith(".egg-info")
        or (folder / "pyvenv.cfg").exists()  # a virtual environment under another name
    )


def source_modules(folder: Path = ROOT) -> Iterator[Path]:
    for path in sorted(folder.iterdir()):
        if path.is_symlink():  # skueue/cli -> ../cli and the like: counted where they are
            continue
        if path.is_dir() and source_folder(path):
            yield from source_modules(path)
        elif path.is_file() and path.suffix == ".py":
            yield path


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_scan_sees_the_project_source() -> None:
    """Else the size check below would pass on nothing."""
    found = {p.relative_to(ROOT).as_posix() for p in source_modules()}
    for module in ("skueue/__init__.py", "cli/skueue.py", "bench/bench_support.py",
                   "deploy/local_cluster.py"):  # fmt: skip
        assert module in found
    assert not any(m.startswith(("tests/", ".venv/")) for m in found)


def test_no_source_module_is_over_the_limit() -> None:
    sizes = {p.relative_to(ROOT).as_posix(): line_count(p) for p in source_modules()}
    over = sorted(((n, m) for m, n in sizes.items() if n > MODULE_LINES_MAX), reverse=True)
    assert not over, (
        f"{len(over)} modules over MODULE_LINES_MAX = {MODULE_LINES_MAX} lines "
        "(split each by job): " + ", ".join(f"{m} ({n} lines)" for n, m in over)
    )
