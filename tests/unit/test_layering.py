"""The layers hold: a declarative contract (import-linter) and a fresh interpreter.

The contract lives in ``pyproject.toml`` (``[tool.importlinter]``): the core, the overlay
and the DHT import only what is listed, and so does the host layer, by a list of its own
(no I/O, clocks, randomness or wire format); the core is below the host, the host below
the wire, the wire below the runtime, the runtime below the client and the clusters, and
those below the CLI; nothing imports the CLI; the checkers, simulators and analysis run
without the runtime; and no sibling modules or packages import each other in a cycle.

The contract is shown to be able to fail: on a copy of the package, a core module that
imports trio, a host module that imports socket, msgpack or the wire, and an import cycle
each break it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE_PACKAGES = ["skueue.core", "skueue.host", "skueue.overlay", "skueue.dht"]
# What importing the pure layers may not add to a bare interpreter's modules.
# (attrs imports threading, which is why the core's classes are stdlib dataclasses.)
FORBIDDEN_ROOTS = {"trio", "anyio", "msgpack", "structlog", "socket", "asyncio", "threading",
                   "random", "selectors", "subprocess", "pickle", "logging", "attrs", "attr"}
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; " \
               "sys.exit(lint_imports_command())"


def lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )


def test_the_layering_contract_holds() -> None:
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "BROKEN" not in out.stdout
    assert "Contracts: 8 kept, 0 broken." in out.stdout


def copy_of_the_package(tmp_path: Path) -> Path:
    """The package and its contract, with the overlay/dht/cli links resolved."""
    shutil.copytree(ROOT / "skueue", tmp_path / "skueue",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "tests").mkdir()
    for name in ("__init__.py", "import_contracts.py"):  # the allowlist contract type
        shutil.copy(ROOT / "tests" / name, tmp_path / "tests" / name)
    return tmp_path


def add_import(module: Path, line: str) -> None:
    text = module.read_text(encoding="utf-8")
    anchor = "from __future__ import annotations\n"
    assert anchor in text
    module.write_text(text.replace(anchor, anchor + line + "\n", 1), encoding="utf-8")


def test_the_contract_fails_when_a_core_module_imports_trio(tmp_path: Path) -> None:
    copy = copy_of_the_package(tmp_path)
    add_import(copy / "skueue/core/batch.py", "import trio")
    out = lint_imports(copy, pythonpath=copy)
    assert out.returncode != 0, out.stdout
    assert "skueue.core.batch -> trio" in out.stdout


@pytest.mark.parametrize("module", ["pathlib", "datetime", "mmap"])
def test_the_purity_contract_is_an_allowlist(tmp_path: Path, module: str) -> None:
    """A module nobody listed as forbidden is refused all the same."""
    copy = copy_of_the_package(tmp_path)
    add_import(copy / "skueue/core/batch.py", f"import {module}")
    out = lint_imports(copy, pythonpath=copy)
    assert out.returncode != 0, out.stdout
    assert "Imports outside the allowlist" in out.stdout
    assert f"skueue.core.batch -> {module}" in out.stdout


@pytest.mark.parametrize("module", ["socket", "msgpack", "attrs", "time", "random"])
def test_the_host_layer_is_held_to_an_allowlist(tmp_path: Path, module: str) -> None:
    copy = copy_of_the_package(tmp_path)
    add_import(copy / "skueue/host/clients.py", f"import {module}")
    out = lint_imports(copy, pythonpath=copy)
    assert out.returncode != 0, out.stdout
    assert "The host is pure: it imports only what is listed BROKEN" in out.stdout
    assert f"skueue.host.clients -> {module}" in out.stdout


@pytest.mark.parametrize("module", ["skueue.wire.client_codec", "skueue.runtime.limits"])
def test_the_host_layer_imports_neither_the_wire_nor_the_runtime(
    tmp_path: Path, module: str
) -> None:
    """The wire's codecs are derived from the host's classes, never the other way round;
    the daemon drives the host, the host knows nothing of it."""
    copy = copy_of_the_package(tmp_path)
    add_import(copy / "skueue/host/replies.py", f"import {module}")
    out = lint_imports(copy, pythonpath=copy)
    assert out.returncode != 0, out.stdout
    assert "The host is pure: it imports only what is listed BROKEN" in out.stdout
    assert "skueue.host is not allowed to import skueue." in out.stdout  # the layers
    assert f"skueue.host.replies -> {module}" in out.stdout


def test_the_contract_fails_on_an_import_cycle(tmp_path: Path) -> None:
    copy = copy_of_the_package(tmp_path)
    # ops is imported by process (through batch); importing process back closes a cycle.
    add_import(copy / "skueue/core/ops.py", "import skueue.core.process")
    out = lint_imports(copy, pythonpath=copy)
    assert out.returncode != 0, out.stdout
    assert "No cycles are allowed in skueue.core" in out.stdout


def pure_modules() -> list[str]:
    names = []
    for package in PURE_PACKAGES:
        folder = ROOT / package.replace(".", "/")
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def modules_after(imports: list[str]) -> set[str]:
    code = (
        "import importlib, json, sys\n"
        f"for name in {imports!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True)
    return set(json.loads(out.stdout))


def test_importing_the_pure_layers_loads_no_io_in_a_fresh_interpreter() -> None:
    names = pure_modules()
    assert {"skueue.core.process", "skueue.core.batch", "skueue.overlay.routing",
            "skueue.dht.table", "skueue.host.requests", "skueue.host.replies"} <= set(names)
    added = modules_after(names) - modules_after([])
    loaded = sorted(m for m in added if m.split(".")[0] in FORBIDDEN_ROOTS)
    assert not loaded, f"importing the pure layers loaded {loaded}"
    assert any(m.startswith("skueue.core.") for m in added)


@pytest.mark.parametrize("entry", ["skueue", "skueue.core.process"])
def test_importing_skueue_loads_neither_client_nor_daemon(entry: str) -> None:
    added = modules_after([entry]) - modules_after([])
    assert not any(m.split(".")[0] in {"trio", "anyio", "structlog"} for m in added), added
    assert not any(m.startswith(("skueue.runtime", "skueue.client")) for m in added), added
