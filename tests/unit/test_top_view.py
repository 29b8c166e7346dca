"""``skueue top``'s view: rates from two stats answers, and what a frame shows (issue 15,
item 5).  The view is a pure function of the answers, so no daemon is needed here; the
e2e test (tests/e2e/test_top.py) runs the command under tmux against real daemons."""

from __future__ import annotations

import io
import os
import select
import signal
import subprocess
import time
from typing import Any

import pytest
from rich.console import Console, RenderableType

from skueue.cli.top_view import (
    MemberRow,
    Snapshot,
    member_counts,
    member_rows,
    per_second,
    queue_rows,
    render,
)
from tests.e2e.daemons import free_ports
from tests.e2e.test_cli import ROOT, environment, skueue_command

RUN_TIMEOUT_S = 30.0


def member(process: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "process": process,
        "anchor": False,
        "ready": True,
        "ready_reason": "ready",
        "inserted": 0,
        "removed": 0,
        "empty": 0,
        "pending_ops": 0,
        "entries": 0,
        "leases_held": 0,
        "cpu_seconds": 1.0,
        "rss_bytes": 50 * 1024 * 1024,
        "peers_down": {},
        "queue_stats": {},
    }
    return base | fields


def answer(*members: dict[str, Any], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "processes": len(members) + len(fields.get("unreachable", [])),
        "anchor": next((m["process"] for m in members if m["anchor"]), None),
        "queues": {},
        "members": list(members),
        "unreachable": [],
        "down": {},
    }
    return base | fields


def text(renderable: RenderableType, width: int = 160) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue()


def rows_by_process(rows: list[MemberRow]) -> dict[str, MemberRow]:
    return {r.process: r for r in rows}


def test_rates_are_the_difference_over_the_seconds_between_answers() -> None:
    assert per_second({"a": 10, "b": 5}, {"a": 30, "b": 5}, 2.0) == {"a": 10.0, "b": 0.0}


@pytest.mark.parametrize(
    ("before", "seconds"),
    [(None, 1.0), ({"a": 50}, 1.0), ({}, 1.0), ({"a": 10}, 0.0)],
    ids=["first answer", "went backwards (restart)", "new counter", "no time between"],
)
def test_a_rate_that_cannot_be_told_is_unknown_not_zero(
    before: dict[str, int] | None, seconds: float
) -> None:
    assert per_second(before, {"a": 20}, seconds) == {"a": None}


def test_member_rows_give_ops_per_second_by_kind_cpu_and_memory() -> None:
    lease_counts = {"leased": 4, "acked": 2, "nacked": 1, "expired": 1}
    prev = Snapshot(
        10.0,
        1000.0,
        answer(
            member("a", inserted=100, removed=50, empty=1, cpu_seconds=2.0, anchor=True),
            member("b", inserted=10, queue_stats={"jobs": {"leased": 1}, "mail": {}}),
        ),
    )
    cur = Snapshot(
        12.0,
        1002.0,
        answer(
            member(
                "a",
                inserted=300,
                removed=90,
                empty=5,
                cpu_seconds=2.5,
                anchor=True,
                pending_ops=3,
                entries=7,
                leases_held=2,
            ),
            member(
                "b",
                inserted=10,
                queue_stats={"jobs": lease_counts, "mail": {"leased": 5}},
                peers_down={"c": 3.4},
                ready=False,
                ready_reason="peers unreachable: c (down 3 s)",
            ),
        ),
    )
    rows = rows_by_process(member_rows(prev, cur))
    a, b = rows["a"], rows["b"]
    assert a.rates == {
        "inserted": 100.0,
        "removed": 20.0,
        "empty": 2.0,
        "leased": 0.0,
        "acked": 0.0,
        "returned": 0.0,
    }
    assert a.cpu_percent == pytest.approx(25.0)
    assert (a.anchor, a.pending, a.entries, a.leases, a.state) == (True, 3, 7, 2, "ready")
    # Lease events are added up over b's queues: leased 1 -> 9, returned = nacked + expired.
    assert (b.rates["leased"], b.rates["acked"], b.rates["returned"]) == (4.0, 1.0, 1.0)
    assert b.state == "peers unreachable" and b.down == {"c": 3.4}
    assert b.cpu_percent == 0.0


def test_the_first_answer_shows_figures_but_no_rates() -> None:
    cur = Snapshot(1.0, 0.0, answer(member("a", inserted=5, entries=3)))
    (row,) = member_rows(None, cur)
    assert set(row.rates.values()) == {None} and row.cpu_percent is None
    assert row.entries == 3
    assert "ins/s" in text(render("n:1", None, cur))


def test_a_member_that_did_not_answer_is_a_row_of_its_own() -> None:
    prev = Snapshot(0.0, 0.0, answer(member("a"), member("b")))
    cur = Snapshot(1.0, 1.0, answer(member("a"), unreachable=["b"], down={"b": 12.0}))
    rows = rows_by_process(member_rows(prev, cur))
    assert not rows["b"].answered and rows["b"].state == "no answer"
    assert rows["b"].silent_s == 12.0 and rows["b"].entries is None
    frame = text(render("a", prev, cur))
    line = next(ln for ln in frame.splitlines() if ln.strip().startswith("b "))
    assert "no answer" in line and "down 12 s" in line


def test_a_member_that_restarted_shows_no_rate_rather_than_a_negative_one() -> None:
    prev = Snapshot(0.0, 0.0, answer(member("a", inserted=500, cpu_seconds=9.0)))
    cur = Snapshot(1.0, 1.0, answer(member("a", inserted=3, cpu_seconds=0.2)))
    (row,) = member_rows(prev, cur)
    assert row.rates["inserted"] is None and row.cpu_percent is None


def test_queue_rows_give_depth_and_rates() -> None:
    def queues(jobs_in: int, jobs_out: int, size: int | None) -> dict[str, Any]:
        return {
            "jobs": {"structure": "queue", "size": size, "inserted": jobs_in, "removed": jobs_out},
            "undo": {"structure": "stack", "size": 0, "inserted": 0, "removed": 0},
        }

    prev = Snapshot(5.0, 0.0, answer(member("a"), queues=queues(100, 40, 60)))
    cur = Snapshot(5.5, 0.5, answer(member("a"), queues=queues(150, 60, None)))
    jobs, undo = queue_rows(prev, cur)
    assert (jobs.name, jobs.depth, jobs.insert_rate, jobs.remove_rate) == ("jobs", None, 100, 40)
    assert (undo.structure, undo.depth, undo.insert_rate) == ("stack", 0, 0.0)
    frame = text(render("a", prev, cur))
    jobs_line = next(ln for ln in frame.splitlines() if ln.strip().startswith("jobs"))
    assert jobs_line.split() == ["jobs", "queue", "?", "100", "40", "150", "60"]


def test_a_frame_shows_every_member_and_queue_with_totals() -> None:
    prev = Snapshot(0.0, 0.0, answer(member("m1", anchor=True), member("m2"), member("m3")))
    cur = Snapshot(
        1.0,
        1.0,
        answer(
            member("m1", anchor=True, inserted=40, entries=5, rss_bytes=3 << 30),
            member("m2", removed=7, entries=6, peers_down={"m3": 4.2}),
            member("m3", inserted=2, entries=7),
            queues={"jobs": {"structure": "queue", "size": 35, "inserted": 42, "removed": 7}},
        ),
    )
    frame = text(render("m1", prev, cur))
    lines = frame.splitlines()
    assert lines[0].startswith("skueue top  via m1  3 members  anchor m1  at ")
    m1 = next(ln for ln in lines if ln.strip().startswith("m1 *"))
    assert m1.split()[:5] == ["m1", "*", "ready", "40", "0"]
    assert "3.0 GiB" in m1 and m1.rstrip().endswith("up")
    m2 = next(ln for ln in lines if ln.strip().startswith("m2"))
    assert "down: m3 (4 s)" in m2
    total = next(ln for ln in lines if ln.strip().startswith("total"))
    assert total.split()[:4] == ["total", "42", "7.0", "0"] and " 18 " in total
    assert any(ln.split()[:3] == ["jobs", "queue", "35"] for ln in lines)


def test_figures_without_a_members_are_marked_partial_naming_it() -> None:
    """Issue 28, item 7: a member that did not answer takes its counts out of every total
    and rate; the frame says so, above the tables (which a small terminal may cut)."""
    whole = answer(member("m1", anchor=True), member("m2"))
    assert "partial" not in text(render("m1", None, Snapshot(1.0, 1.0, whole)))
    cur = Snapshot(1.0, 1.0, answer(member("m1", anchor=True), unreachable=["m2"]))
    lines = text(render("m1", None, cur)).splitlines()
    (line,) = [ln for ln in lines if ln.startswith("partial:")]
    assert "m2" in line and "queue" in line, lines
    assert lines.index(line) < next(i for i, ln in enumerate(lines) if "m1 *" in ln)


def test_a_problem_is_shown_above_the_last_answer() -> None:
    cur = Snapshot(1.0, 1.0, answer(member("a", entries=9)))
    frame = text(render("a", None, cur, problem="cannot reach skueued at a"))
    assert "unreachable: cannot reach skueued at a (trying again every 1 s)" in frame
    assert "last answer below" in frame and any(
        ln.strip().startswith("a ") for ln in frame.splitlines()
    )
    alone = text(render("a", None, None, problem="cannot reach skueued at a"))
    assert "unreachable: cannot reach" in alone and "members" not in alone


def test_malformed_answers_show_as_unknown_not_a_traceback() -> None:
    odd = Snapshot(
        1.0,
        1.0,
        {"members": [{"process": "x", "entries": "many", "queue_stats": [1]}, 7], "queues": []},
    )
    (row,) = member_rows(odd, odd)
    assert row.entries is None and member_counts({"queue_stats": {"q": "?"}})["leased"] == 0
    assert "x" in text(render("x", odd, odd))


def run_top(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*skueue_command(), "top", *args],
        capture_output=True,
        cwd=ROOT,
        env=environment(),
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def test_once_with_nobody_there_shows_the_state_and_exits_1() -> None:
    (port,) = free_ports(1)
    out = run_top("--node", f"127.0.0.1:{port}", "--once", "--interval", "0.2")
    stdout, stderr = out.stdout.decode(), out.stderr.decode()
    assert out.returncode == 1, stderr
    assert "Traceback" not in stderr and stderr == ""
    assert f"unreachable: cannot reach skueued at 127.0.0.1:{port}" in stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--interval", "0.01"], "must be at least 0.2"),
        (["--interval", "soon"], "is not a number"),
        (["--node", "nowhere"], "--node"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], needle: str) -> None:
    out = run_top(*args, "--once")
    err = out.stderr.decode()
    assert out.returncode == 2 and err.count("\n") == 1 and needle in err, err


def test_a_narrow_terminal_drops_the_least_used_columns_rather_than_squeezing() -> None:
    many = [member(f"127.0.0.1:{7400 + i}", inserted=10 * i, entries=i) for i in range(3)]
    prev = Snapshot(0.0, 0.0, answer(*many))
    cur = Snapshot(1.0, 1.0, answer(*[m | {"inserted": m["inserted"] + 5} for m in many]))
    wide = text(render("n", prev, cur, width=160), width=160)
    assert "ret/s" in wide and "…" not in wide
    narrow = text(render("n", prev, cur, width=80), width=80)
    heads = next(ln for ln in narrow.splitlines() if ln.strip().startswith("member ")).split()
    assert heads[:3] == ["member", "state", "ins/s"] and "ret/s" not in heads
    assert {"rem/s", "entries", "cpu", "rss", "links"} <= set(heads)
    assert "…" not in narrow and max(len(ln.rstrip()) for ln in narrow.splitlines()) <= 80
    row = next(ln for ln in narrow.splitlines() if ln.strip().startswith("127.0.0.1:7401"))
    assert row.split()[:3] == ["127.0.0.1:7401", "ready", "5.0"]


def test_into_a_pipe_it_prints_frame_after_frame_and_ctrl_c_exits_130() -> None:
    (port,) = free_ports(1)
    cmd = [*skueue_command(), "top", "--node", f"127.0.0.1:{port}", "--interval", "0.2"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        seen = b""
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while seen.count(b"unreachable: ") < 2:  # kept trying after the first failure
            assert time.monotonic() < deadline and proc.poll() is None, seen
            if select.select([proc.stdout], [], [], 0.2)[0]:
                seen += os.read(proc.stdout.fileno(), 65536)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and err == b"", err
