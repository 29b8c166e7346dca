"""Raising the open-files limit at daemon start (issue 8, item 10)."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest
import structlog

from skueue.runtime.limits import Limits
from skueue.runtime.resources import SPARE_FILES, files_needed, raise_open_files_limit

INF = resource.RLIM_INFINITY


class FakeLimits:
    def __init__(self, soft: int, hard: int, refuse: bool = False) -> None:
        self.soft, self.hard, self.refuse = soft, hard, refuse
        self.calls: list[tuple[int, int]] = []

    def get(self, which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return self.soft, self.hard

    def set(self, which: int, limits: tuple[int, int]) -> None:
        self.calls.append(limits)
        if self.refuse:
            raise ValueError("not allowed")
        self.soft, self.hard = limits


def test_files_needed_covers_every_connection_the_limits_allow() -> None:
    limits = Limits(clients_max=100, admin_clients_max=8, hello_pending_max=50)
    assert files_needed(limits, peers=3) == 100 + 8 + 50 + 6 + SPARE_FILES
    assert files_needed(Limits(), 0) > 1024  # the common default soft limit is too low


@pytest.mark.parametrize(
    ("soft", "hard", "needed", "now", "calls"),
    [
        (1024, 524288, 2000, 2000, [(2000, 524288)]),  # raised to what is needed
        (1024, 1500, 2000, 1500, [(1500, 1500)]),  # as far as the hard limit allows
        (1024, INF, 2000, 2000, [(2000, INF)]),
        (4096, 524288, 2000, 4096, []),  # enough already: never lowered
        (INF, INF, 2000, INF, []),
        (1024, 1024, 2000, 1024, []),  # nothing to gain
    ],
)
def test_the_soft_limit_is_raised_towards_the_hard_one(
    soft: int, hard: int, needed: int, now: int, calls: list[tuple[int, int]]
) -> None:
    fake = FakeLimits(soft, hard)
    assert raise_open_files_limit(needed, fake.get, fake.set) == now
    assert fake.calls == calls


def test_a_limit_that_stays_short_is_one_warning() -> None:
    fake = FakeLimits(1024, 1500)
    with structlog.testing.capture_logs() as logs:
        raise_open_files_limit(2000, fake.get, fake.set)
    assert [e["log_level"] for e in logs] == ["warning"]
    assert logs[0]["limit"] == 1500 and logs[0]["needed"] == 2000


def test_a_refused_raise_is_a_warning_not_an_error() -> None:
    fake = FakeLimits(1024, 4096, refuse=True)
    with structlog.testing.capture_logs() as logs:
        assert raise_open_files_limit(2000, fake.get, fake.set) == 1024
    assert logs and all(e["log_level"] == "warning" for e in logs)


def test_the_real_limit_is_raised_in_a_fresh_process() -> None:
    """For real: a child starts with a low soft limit and ends with what it needs."""
    code = (
        "import resource\n"
        "from skueue.runtime.resources import raise_open_files_limit\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "want = 512 if hard == resource.RLIM_INFINITY else min(512, hard)\n"
        "assert raise_open_files_limit(want) == want\n"
        "assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == want\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
