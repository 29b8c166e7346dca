"""Ctrl-C during ``skueue analyze`` or ``skueue experiment``: exit 130, nothing printed.

A terminal sends SIGINT to its whole foreground process group, so each command runs in a
process group of its own and the signal goes to the group, as the terminal would send it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180.0
"""Until the command says its Spark job runs (a JVM start on a busy machine included)."""
EXIT_TIMEOUT_S = 60.0
LINES_AFTER_CTRL_C_MAX = 1


def interrupted(args: list[str], running: str, wait_s: float = 1.0) -> tuple[int, str, str]:
    """Run ``skueue ARGS``, press Ctrl-C ``wait_s`` after stderr shows ``running``; return
    the exit status, stderr before the Ctrl-C and stderr after it.

    Stderr must close soon after the exit: a JVM left behind would hold it open."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "skueue.cli.skueue", *args], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    lines: list[str] = []
    assert proc.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not any(running in line for line in lines):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.1)
        time.sleep(wait_s)
        assert proc.poll() is None, "the command finished before the Ctrl-C"
        before = len(lines)
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(EXIT_TIMEOUT_S)
        reader.join(EXIT_TIMEOUT_S)
        assert not reader.is_alive(), "something the command started still holds its stderr"
    finally:
        # Whatever is left of its process group (the command, a JVM in the group) goes.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return code, "".join(lines[:before]), "".join(lines[before:])


def assert_quiet(code: int, before: str, after: str, *, lines_max: int | None = None) -> None:
    assert code == 130, before + after
    if lines_max is not None:
        assert len(after.splitlines()) <= lines_max, after
    for noise in ("Traceback", "ERROR", "Exception"):
        assert noise not in after, after


@pytest.mark.spark
def test_ctrl_c_during_analyze_is_quiet(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    subprocess.run(
        [sys.executable, "-m", "skueue.cli.skueue", "sim", "-n", "8", "--rounds", "4000",
         "--history", str(history)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True,
        capture_output=True, timeout=120,
    )
    assert_quiet(*interrupted(
        ["analyze", str(history), "--master", "local[2]", "--out", str(tmp_path / "out")],
        running="checking",
    ), lines_max=LINES_AFTER_CTRL_C_MAX)


@pytest.mark.spark
def test_ctrl_c_during_experiment_is_quiet(tmp_path: Path) -> None:
    # Five points of n = 64 with many rounds: far longer than the test waits.
    assert_quiet(*interrupted(
        ["experiment", "--figures", "2", "--min-n", "64", "--max-n", "64", "--rounds",
         "50000", "--master", "local[2]", "--out", str(tmp_path)],
        running="points done",
    ), lines_max=LINES_AFTER_CTRL_C_MAX)


@pytest.mark.spark
def test_ctrl_c_while_spark_starts_leaves_no_jvm_behind(tmp_path: Path) -> None:
    # Interrupting the JVM's launch left it running for good, with a Java stack trace.
    # Spark's own start-up lines may follow the Ctrl-C here: the JVM finishes starting.
    assert_quiet(*interrupted(
        ["experiment", "--figures", "2", "--max-n", "4", "--master", "local[1]",
         "--out", str(tmp_path)],
        running="points on", wait_s=0.3,
    ))
