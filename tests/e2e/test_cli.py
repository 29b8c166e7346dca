"""The ``skueue`` command as a user runs it (issue 8, items 11-16 and 18): a subprocess
against a fake daemon that never answers, a fake that answers like a daemon, or a real
``skueued``.  Errors are one line and a non-zero exit, Ctrl-C is a quiet 130, a history
file is never truncated before a run, and values go in and come out byte for byte."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.daemons import Cluster, free_ports
from tests.unit.fake_daemon import FakeDaemon
from tests.unit.test_client import echo

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 60.0
StartCluster = Callable[..., Cluster]


def skueue_command() -> list[str]:
    return [sys.executable, "-m", "skueue.cli.skueue"]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SKUEUE_NODE"}
    env["PYTHONPATH"] = str(ROOT)
    return env


def skueue(*args: str, stdin: bytes = b"", timeout: float = RUN_TIMEOUT_S) -> Any:
    return subprocess.run(
        [*skueue_command(), *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=environment(),
        timeout=timeout,
        check=False,
    )


def error_lines(stderr: bytes) -> list[str]:
    return [ln for ln in stderr.decode(errors="replace").splitlines() if "error" in ln.lower()]


def assert_one_line_error(out: Any, code: int, *needles: str) -> str:
    err = out.stderr.decode(errors="replace")
    assert "Traceback" not in err and "ExceptionGroup" not in err, err
    lines = error_lines(out.stderr)
    assert len(lines) == 1, err
    assert out.returncode == code, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def dead_address() -> str:
    return f"127.0.0.1:{free_ports(1)[0]}"


# -- item 11: --timeout on every client command --------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["enqueue", "x"],
        ["dequeue", "-n", "2"],
        ["stats"],
        ["leave"],
        ["join", "127.0.0.1:1"],
        ["bench", "--ops", "4", "--clients", "1"],
    ],
)
def test_every_client_command_times_out_with_one_line(args: list[str]) -> None:
    with FakeDaemon() as fake:
        node = ["--nodes" if args[0] == "bench" else "--node", fake.address]
        t0 = time.monotonic()
        out = skueue(*args, *node, "--timeout", "0.5", timeout=30)
        elapsed = time.monotonic() - t0
    assert_one_line_error(out, 1, f"no reply from fake ({fake.address}) within 0.5 s", "unknown")
    assert elapsed < 15


def test_admin_commands_say_so_in_the_hello() -> None:
    with FakeDaemon(echo) as fake:
        out = skueue("stats", "--node", fake.address, "--json")
        assert out.returncode == 0, out.stderr
        out = skueue("enqueue", "--node", fake.address, "x")
        assert out.returncode == 0, out.stderr
    options = [h[2] for h in fake.hellos]
    assert options[0].get("admin") is True
    assert "admin" not in options[1]
    assert all(o["request_timeout_ms"] > 0 for o in options)


# -- item 12: every error is one line --------------------------------------------------------


def test_bench_with_nothing_listening_is_one_line() -> None:
    out = skueue("bench", "--ops", "10", "--nodes", dead_address())
    assert_one_line_error(out, 1, "cannot reach skueued")


def test_bench_naming_a_dead_daemon_among_live_ones_is_one_line() -> None:
    dead = dead_address()
    with FakeDaemon(echo) as fake:
        out = skueue("bench", "--ops", "40", "--clients", "4", "--nodes", f"{fake.address},{dead}")
    assert_one_line_error(out, 1, "cannot reach skueued", dead)


def test_bench_with_values_over_the_limit_is_one_line() -> None:
    with FakeDaemon(echo) as fake:
        out = skueue("bench", "--ops", "10", "--value-bytes", "2000000", "--nodes", fake.address)
    assert_one_line_error(out, 1, "2000000 bytes exceeds the limit of 1048576")


# -- item 13: Ctrl-C is a quiet exit 130 ----------------------------------------------------

BLOCKING_SCRIPT = """
import sys, skueue
q = skueue.connect_blocking(sys.argv[1])
print("connected", flush=True)
try:
    q.enqueue(b"x")
except KeyboardInterrupt:
    q.close()
    print("interrupted", flush=True)
    raise SystemExit(130)
"""


def interrupt(args: list[str], fake: FakeDaemon) -> tuple[int, str, str]:
    """Start ``args``, wait until its first request reached the fake, press Ctrl-C."""
    proc = subprocess.Popen(
        args, cwd=ROOT, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while not fake.requests and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert fake.requests, "the command never sent a request"
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


@pytest.mark.parametrize(
    "args",
    [
        ["enqueue", "x"],
        ["dequeue"],
        ["consume", "jobs"],
        ["health"],
        ["bench", "--ops", "100", "--clients", "2"],
    ],
)
def test_ctrl_c_during_a_hung_command_exits_130_quietly(args: list[str]) -> None:
    with FakeDaemon() as fake:
        node = ["--nodes" if args[0] == "bench" else "--node", fake.address]
        code, _, err = interrupt([*skueue_command(), *args, *node], fake)
    assert code == 130, err
    assert "Traceback" not in err and "never awaited" not in err, err
    assert len(err.strip().splitlines()) <= 2, err  # bench's progress line and nothing else


def test_ctrl_c_during_a_blocking_api_call_is_a_plain_keyboard_interrupt() -> None:
    with FakeDaemon() as fake:
        code, out, err = interrupt([sys.executable, "-c", BLOCKING_SCRIPT, fake.address], fake)
    assert code == 130, err
    assert out.split() == ["connected", "interrupted"], (out, err)
    assert err == "", err


# -- item 14: --history never truncates before the run ---------------------------------------


def test_bench_refuses_to_overwrite_a_history_without_force(tmp_path: Path) -> None:
    history = tmp_path / "h.jsonl"
    history.write_text("precious\n")
    out = skueue("bench", "--ops", "10", "--nodes", dead_address(), "--history", str(history))
    assert_one_line_error(out, 2, "exists", "--force")
    assert history.read_text() == "precious\n"


def test_an_interrupted_bench_leaves_the_old_history_intact(tmp_path: Path) -> None:
    history = tmp_path / "h.jsonl"
    history.write_text("precious\n")
    with FakeDaemon() as fake:
        args = ["bench", "--ops", "10", "--nodes", fake.address, "--history", str(history)]
        code, _, err = interrupt([*skueue_command(), *args, "--force"], fake)
    assert code == 130, err
    assert history.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.jsonl"]  # no temp file left


def test_bench_with_force_replaces_the_history_at_the_end(
    tmp_path: Path, skueued_cluster: StartCluster
) -> None:
    cluster = skueued_cluster(1)
    history = tmp_path / "h.jsonl"
    history.write_text("old\n")
    out = skueue(
        "bench", "--ops", "20", "--nodes", cluster.addresses[0], "--history", str(history), "-f"
    )
    assert out.returncode == 0, out.stderr
    lines = history.read_text().splitlines()
    assert "old" not in lines and len(lines) >= 21
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.jsonl"]


# -- item 15: values in and out, byte for byte -----------------------------------------------


def dequeue_json(node: str, n: int) -> list[bytes]:
    out = skueue("dequeue", "--node", node, "-n", str(n), "--json")
    assert out.returncode in (0, 3), out.stderr
    got = [json.loads(line) for line in out.stdout.decode().splitlines()]
    return [base64.b64decode(g["base64"]) for g in got]


def test_line_mode_splits_on_newline_only(skueued_cluster: StartCluster) -> None:
    node = skueued_cluster(1).addresses[0]
    out = skueue("enqueue", "--node", node, "-", stdin=b"a\r\r\n\n\nb")
    assert out.returncode == 0, out.stderr
    assert dequeue_json(node, 10) == [b"a\r\r", b"", b"", b"b"]
    # A final newline ends the last line; it does not start an empty one.
    assert skueue("enqueue", "--node", node, "-", stdin=b"x\ny\n").returncode == 0
    assert dequeue_json(node, 10) == [b"x", b"y"]


def test_whole_stdin_and_whole_files_are_one_element_each(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    node = skueued_cluster(1).addresses[0]
    raw = bytes(range(256)) + b"a\r\r\n\n\nb\n"
    path = tmp_path / "blob"
    path.write_bytes(raw[::-1])
    out = skueue("enqueue", "--node", node, "-x", stdin=raw)
    assert out.returncode == 0, out.stderr
    out = skueue("enqueue", "--node", node, "--file", str(path), "--stdin", stdin=b"")
    assert out.returncode == 0, out.stderr
    assert dequeue_json(node, 5) == [raw, raw[::-1], b""]


def test_dequeue_null_separated_output_is_raw(skueued_cluster: StartCluster) -> None:
    node = skueued_cluster(1).addresses[0]
    values = [b"one\nline", b"\xff\xfe", b"tab\there"]
    for v in values:
        assert skueue("enqueue", "--node", node, "-x", stdin=v).returncode == 0
    out = skueue("dequeue", "--node", node, "-n", "3", "-0")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"".join(v + b"\0" for v in values)


def test_dequeue_json_carries_text_when_it_is_utf8(skueued_cluster: StartCluster) -> None:
    node = skueued_cluster(1).addresses[0]
    for v in [b"caf\xc3\xa9", b"\xff"]:
        assert skueue("enqueue", "--node", node, "-x", stdin=v).returncode == 0
    out = skueue("dequeue", "--node", node, "-n", "3", "--json")
    assert out.returncode == 3  # the third found the queue empty
    got = [json.loads(line) for line in out.stdout.decode().splitlines()]
    assert [{k: g[k] for k in ("base64", "text")} for g in got] == [
        {"base64": base64.b64encode(b"caf\xc3\xa9").decode(), "text": "café"},
        {"base64": base64.b64encode(b"\xff").decode(), "text": None},
    ]


def test_enqueue_without_any_value_is_a_usage_error() -> None:
    out = skueue("enqueue", "--node", dead_address())
    assert_one_line_error(out, 2, "enqueue")


# -- item 16: an oversized line is one clear line -------------------------------------------


def test_a_17_mib_line_is_refused_with_the_limit(skueued_cluster: StartCluster) -> None:
    node = skueued_cluster(1).addresses[0]
    out = skueue("enqueue", "--node", node, "-", stdin=b"small\n" + b"x" * (17 << 20) + b"\n")
    assert_one_line_error(out, 1, f"{17 << 20} bytes exceeds the limit of 1048576")
    # Nothing went in: every value is checked before any is sent.
    out = skueue("dequeue", "--node", node)
    assert out.returncode == 3, out.stderr


# -- item 18: --version, bad addresses ------------------------------------------------------


@pytest.mark.parametrize("module", ["skueue.cli.skueue", "skueue.cli.skueued"])
def test_version(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", module, "--version"],
        capture_output=True,
        cwd=ROOT,
        env=environment(),
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    name = module.split(".")[-1]
    assert out.stdout.decode().split()[0] == name
    assert out.stdout.decode().split()[1][0].isdigit()


@pytest.mark.parametrize(
    "args",
    [
        ["enqueue", "--node", "nonsense", "x"],
        ["dequeue", "--node", "host:99999"],
        ["stats", "--node", "nonsense"],
        ["join", "nonsense", "--node", "127.0.0.1:1"],
        ["bench", "--nodes", "nonsense"],
    ],
)
def test_a_bad_address_is_a_usage_error(args: list[str]) -> None:
    out = skueue(*args)
    assert_one_line_error(out, 2, "bad address")


def test_a_bad_address_in_the_environment_is_a_usage_error() -> None:
    out = subprocess.run(
        [*skueue_command(), "stats"],
        capture_output=True,
        cwd=ROOT,
        env={**environment(), "SKUEUE_NODE": "nonsense"},
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert_one_line_error(out, 2, "bad address", "SKUEUE_NODE")


def test_the_value_limit_is_configurable_on_the_daemon(skueued_cluster: StartCluster) -> None:
    node = skueued_cluster(1, extra_args=("--value-bytes-max", "100")).addresses[0]
    assert skueue("enqueue", "--node", node, "-x", stdin=b"v" * 100).returncode == 0
    out = skueue("enqueue", "--node", node, "-x", stdin=b"v" * 101)
    assert_one_line_error(out, 1, "101 bytes exceeds the limit of 100")


@pytest.mark.parametrize("size", ["0", "-5", "x", str(16 << 20)])
def test_a_value_limit_that_cannot_work_is_a_usage_error(size: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "skueue.cli.skueued", "--listen", "127.0.0.1:0",
         "--value-bytes-max", size],
        capture_output=True,
        cwd=ROOT,
        env=environment(),
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert_one_line_error(out, 2, "--value-bytes-max")
