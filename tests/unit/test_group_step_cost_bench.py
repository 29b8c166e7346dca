"""bench/group_step_cost.py (issue 31, stage 2a): every record it times through the group
is committed as an entry of the group's log, and the figures come with the command.  A
tiny run; no timing is asserted."""

from __future__ import annotations

import pytest

from tests.unit.bench_scripts import load_bench

bench = load_bench("group_step_cost")


def test_every_record_is_committed_and_the_command_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = bench.main(["--steps", "50", "--records", "3"])
    assert result["committed"] == 1 + bench.ROUNDS * 50 * 3  # the took_over entry, then each record
    assert result["log_alone_us"] > 0 and result["group_us"] > 0
    printed = capsys.readouterr().out
    assert "command: .venv/bin/python bench/group_step_cost.py --steps 50 --records 3" in printed
