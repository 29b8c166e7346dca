"""The installed shape: one ``skueue`` package with lean dependencies, and the Spark extra.

``pip install skueue`` must bring the daemon, the client and the simulators and nothing
heavy; ``overlay/``, ``dht/`` and ``cli/`` are installed inside the package (through the
symlinks ``skueue/overlay -> ../overlay`` and so on), never as top-level packages of
their own.  The wheel is built offline from a copy of the sources (no build isolation,
so no download), which takes about a second.

The Spark commands, run where pyspark or matplotlib is missing, say in one line which
extra to install instead of printing a traceback.
"""

from __future__ import annotations

import email.parser
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the build reads: the metadata, the README (its long description) and the sources.
BUILD_INPUTS = ("pyproject.toml", "README.md", "skueue", "overlay", "dht", "cli")
INSTALLED_INSIDE = ("overlay", "dht", "cli")
LEAN = {
    "trio", "anyio", "rich", "msgpack", "mmh3", "attrs", "structlog", "google-crc32c",
    "prometheus-client", "cryptography",
}  # fmt: skip
SPARK_EXTRA = {"pyspark", "matplotlib"}
NEVER_LEAN = SPARK_EXTRA | {"pytest", "hypothesis", "pytest-trio", "redis"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(out), str(src)],
        check=True, capture_output=True, text=True, timeout=120,
    )
    (built,) = out.glob("skueue-*.whl")
    return zipfile.ZipFile(built)


def _requirements(wheel: zipfile.ZipFile) -> list[tuple[str, str]]:
    """``(distribution name, marker)`` of every Requires-Dist line."""
    (meta,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    message = email.parser.Parser().parsestr(wheel.read(meta).decode())
    out = []
    for line in message.get_all("Requires-Dist") or []:
        spec, _, marker = line.partition(";")
        name = spec.strip().split("[")[0]
        for stop in "<>=!~ ":
            name = name.split(stop)[0]
        out.append((name.lower(), marker.strip()))
    return out


def test_wheel_holds_one_package_with_overlay_dht_and_cli_inside(
    wheel: zipfile.ZipFile,
) -> None:
    names = wheel.namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"skueue", "skueue-0.1.0.dist-info"}, tops
    for folder in INSTALLED_INSIDE:
        sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / folder).rglob("*.py")
                   if "__pycache__" not in p.parts}
        assert sources, folder
        assert {f"skueue/{s}" for s in sources} <= set(names), folder
    assert "skueue/core/process.py" in names
    assert "skueue/cli/skueued.py" in names


def test_wheel_requires_only_the_lean_set_unless_an_extra_asks(wheel: zipfile.ZipFile) -> None:
    requirements = _requirements(wheel)
    plain = {name for name, marker in requirements if not marker}
    assert plain == LEAN
    assert not plain & NEVER_LEAN
    spark = {name for name, marker in requirements if marker == 'extra == "spark"'}
    assert spark == SPARK_EXTRA
    dev = {name for name, marker in requirements if marker == 'extra == "dev"'}
    assert {"skueue", "pytest", "hypothesis"} <= dev


def _run_blocked(
    blocked: set[str], argv: list[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    # A module set to None in sys.modules cannot be imported: as if it were not installed.
    code = (f"import sys; sys.modules.update(dict.fromkeys({sorted(blocked)!r}))\n"
            "from skueue.cli.skueue import main\n"
            f"sys.exit(main({argv!r}))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, timeout=60)


@pytest.mark.parametrize("blocked", sorted(SPARK_EXTRA))
@pytest.mark.parametrize(
    "argv",
    [["analyze", "history.jsonl"], ["experiment", "--max-n", "2", "--figures", "2"]],
    ids=["analyze", "experiment"],
)
def test_spark_commands_without_the_extra_say_so_in_one_line(
    blocked: str, argv: list[str], tmp_path: Path
) -> None:
    (tmp_path / "history.jsonl").write_text("")
    done = _run_blocked({blocked}, argv, tmp_path)
    prog = f"skueue {argv[0]}"
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f"{prog}: error: needs the spark extra: pip install 'skueue[spark]' "
        f"({blocked} not installed)\n"
    )
    assert done.stdout == ""
    assert not (tmp_path / "skueue-experiment").exists()


def test_the_other_commands_work_without_the_extra(tmp_path: Path) -> None:
    done = _run_blocked(SPARK_EXTRA, ["sim", "--processes", "2", "--rounds", "3"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["linearizable"] is True
