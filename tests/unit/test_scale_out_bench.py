"""bench/scale_out.py's parts that need no cluster: where daemons and load processes go,
the default sizes, and how the goals of issue 30 are read from rows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.unit.bench_scripts import load_bench

scale_out = load_bench("scale_out")
report = load_bench("scale_out_report")


def test_a_big_machine_pins_the_load_on_the_last_cores_and_a_daemon_per_core() -> None:
    layout = scale_out.plan_layout(range(16), 8, "auto")
    assert layout.pinned
    assert layout.daemon_cores == tuple(range(8)) and layout.load_cores == tuple(range(8, 16))
    assert [layout.daemon(i) for i in (0, 7, 8)] == [(0,), (7,), (0,)]
    assert layout.load(3) == (11,)
    assert layout.placement(8) == "own cores" and layout.placement(12) == "12 on 8 cores"
    assert scale_out.default_nodes(layout) == [1, 2, 4, 8]


def test_a_small_machine_runs_unpinned_and_says_so() -> None:
    layout = scale_out.plan_layout([0, 1], 1, "auto")
    assert not layout.pinned and layout.daemon(0) is None and layout.load(0) is None
    assert layout.summary.startswith("UNPINNED (2 cores cannot give 1 load process ")
    assert layout.placement(4) == "unpinned"
    assert scale_out.default_nodes(layout) == [1, 2, 4]
    assert not scale_out.plan_layout(range(16), 8, "no").pinned


def test_pin_yes_refuses_a_machine_too_small() -> None:
    try:
        scale_out.plan_layout([0, 1], 1, "yes")
    except SystemExit as e:
        assert "too few" in str(e)
    else:
        raise AssertionError("--pin yes on 2 cores was accepted")


def row(
    system: str, nodes: int, mode: str, ops: float, cpu: float, client: float, durable: bool = False
) -> dict[str, Any]:
    history = {"linearizable": True} if system == "skueue" else None
    return {
        "system": system, "nodes": nodes, "mode": mode, "durable": durable,
        "ops_per_second": ops, "cpu_us_per_op": cpu, "client_cpu_us_per_op": client,
        "history": history,
    }  # fmt: skip


def test_goals_read_their_figures_from_the_rows() -> None:
    rows = [
        row("redis", 1, "one", 100_000, 9, 80), row("redis", 1, "batch", 500_000, 1.3, 8),
        row("skueue", 1, "one", 10_000, 25, 100), row("skueue", 1, "batch", 30_000, 30, 8),
        row("skueue", 4, "one", 60_000, 40, 70), row("skueue", 4, "batch", 400_000, 30, 9),
        row("skueue", 8, "one", 40_000, 50, 70), row("skueue", 8, "batch", 100_000, 30, 9),
        row("skueue", 4, "one", 40_000, 60, 70, durable=True),
    ]  # fmt: skip
    goals = {g["goal"]: g for g in report.goals(rows)}
    assert goals["8 daemons ≥ 5× 1 daemon, one at a time"]["shown"] == "4.00×"
    assert goals["8 daemons ≥ 5× 1 daemon, one at a time"]["met"] is False
    assert goals["12 daemons ≥ 1.0× Redis, one at a time"]["met"] is None
    assert goals["1 daemon ≤ 30 µs cluster CPU/op, one at a time"]["met"] is True
    assert goals["4 daemons ≤ 1.5× the 1-daemon cluster CPU/op, one at a time"]["figure"] == 1.6
    assert goals["4 daemons ≥ 0.5× Redis, one at a time"]["met"] is True
    assert goals["4 daemons ≥ 1.0× Redis, batched"]["shown"] == "0.80×"
    # The 4-daemon rows are the ones set against redis-py.
    assert goals["Skueue's client CPU/op ≤ redis-py's, one at a time (4 daemons)"]["met"] is True
    assert goals["Skueue's client CPU/op ≤ redis-py's, batched (4 daemons)"]["met"] is False
    durable = goals["durable ≥ 1/1.3 of in-memory throughput, 4 daemons, one at a time"]
    assert durable["shown"] == "0.67×" and durable["met"] is False
    assert goals["every history linearizable"]["met"] is True
    rows[2]["history"] = {"linearizable": False}
    assert report.goals(rows)[-1]["met"] is False


def test_bad_options_exit_2_with_one_line_naming_the_option(capsys: Any) -> None:
    for argv, says in (
        (["--seconds", "0"], "--seconds: '0': must be above 0"),
        (["--nodes", "1,0"], "--nodes: '1,0': every count must be at least 1"),
        (["--load-procs", "x"], "--load-procs: 'x' is not a number"),
        (["--modes", "one,many"], "--modes: unknown many"),
        (["--redis-server", "/nonexistent/redis-server"], "not an executable file"),
    ):
        try:
            scale_out.parse_args(argv)
        except SystemExit as e:
            assert e.code == 2, argv
        else:
            raise AssertionError(f"{argv} was accepted")
        assert says in capsys.readouterr().err.strip().splitlines()[-1]


def test_empty_durable_nodes_means_none() -> None:
    assert scale_out.parse_args(["--durable-nodes", ""]).durable_nodes == []


def test_pin_moves_every_thread_of_a_process_and_its_later_threads() -> None:
    """What ``taskset -a -p -c`` does, which the daemons' and Redis' pinning relies on: a
    thread that exists already is moved, and one started after inherits the core."""
    support = load_bench("bench_support")
    code = (
        "import threading, time, sys\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "print('up', flush=True); sys.stdin.readline()\n"
        "t = threading.Thread(target=time.sleep, args=(30,), daemon=True); t.start()\n"
        "print(t.native_id, flush=True); sys.stdin.readline()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == "up\n"
        core = max(os.sched_getaffinity(0))
        support.pin(proc.pid, {core})
        tasks = [int(t.name) for t in Path(f"/proc/{proc.pid}/task").iterdir()]
        assert len(tasks) >= 2 and all(os.sched_getaffinity(t) == {core} for t in tasks)
        proc.stdin.write("\n")
        proc.stdin.flush()
        later = int(proc.stdout.readline())
        assert os.sched_getaffinity(later) == {core}
    finally:
        proc.kill()
        proc.wait()
