"""The suite's own scheduling (tests/conftest.py): tests that share a resource run on one
xdist worker, one after the other.  Nothing fails when the grouping silently stops
working (pytest 9.2 with xdist 3.8 did just that), so this runs a small suite the way
scripts/test runs the real one and looks at where each test ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import SHARED_RESOURCE_GROUPS, shared_resource_group

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
TEST_FILE = """
import os
from pathlib import Path

import pytest


@pytest.mark.parametrize("i", range(6))
def test_where(i: int) -> None:
    with Path(os.environ["WHERE_FILE"]).open("a") as f:
        f.write(f"{__name__} {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""


def test_every_group_names_test_files_that_exist() -> None:
    root = CONFTEST.parents[1]
    for group, prefixes in SHARED_RESOURCE_GROUPS.items():
        for prefix in prefixes:
            assert (root / prefix).exists(), f"{group}: {prefix} does not exist"


def test_a_test_id_gets_the_group_of_its_file_and_others_none() -> None:
    assert shared_resource_group("tests/faults/test_pause.py::test_x[1]") == "faults"
    assert shared_resource_group("tests/e2e/test_netns_partition.py::test_y") == "netns"
    assert shared_resource_group("tests/e2e/test_cluster.py::test_z") is None
    assert shared_resource_group("tests/unit/test_faults.py::test_w") is None


def test_the_tests_of_a_group_run_on_one_worker(tmp_path: Path) -> None:
    # A small suite with the checkout's conftest: two files of a group, two outside.
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    for name in ("faults/test_a.py", "faults/test_b.py", "e2e/test_c.py", "e2e/test_d.py"):
        path = tmp_path / "tests" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TEST_FILE)
    where = tmp_path / "where.txt"
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "--rootdir", str(tmp_path), str(tmp_path / "tests")],
        cwd=tmp_path, env={**os.environ, "WHERE_FILE": str(where)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    workers: dict[str, set[str]] = {}
    for module, worker in (line.split() for line in where.read_text().splitlines()):
        workers.setdefault(module.rsplit(".", 1)[-1], set()).add(worker)
    assert set(workers) == {"test_a", "test_b", "test_c", "test_d"}, workers
    # The group's twelve tests on one worker.  (Without the grouping they spread over
    # both; where the others run is the scheduler's business.)
    assert len(workers["test_a"] | workers["test_b"]) == 1, workers
