"""The disk reserve and the one line for a write the disk refused
(runtime/durability/disk_space.py)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from skueue.cli.skueued import startup_error
from skueue.cli.skueued_options import build_parser
from skueue.runtime.durability import disk_space
from skueue.runtime.durability.disk_space import (
    CHECK_INTERVAL_S,
    COMPACT_INTERVAL_S,
    DiskSpace,
    disk_failure,
)
from skueue.runtime.errors import DaemonError
from skueue.runtime.limits import Limits

MIB = 1024 * 1024


class FakeDisk:
    """``os.statvfs`` with a free space the test sets, counting the calls."""

    def __init__(self, free_bytes: int) -> None:
        self.free_bytes = free_bytes
        self.calls = 0

    def __call__(self, path: object) -> SimpleNamespace:
        self.calls += 1
        return SimpleNamespace(f_bavail=self.free_bytes // 4096, f_frsize=4096)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> FakeDisk:
    fake = FakeDisk(1024 * MIB)
    monkeypatch.setattr(disk_space.os, "statvfs", fake)
    return fake


def test_enqueues_are_refused_below_the_reserve_with_the_figures(
    disk: FakeDisk, tmp_path: Path
) -> None:
    space = DiskSpace(tmp_path, 256 * MIB)
    assert space.shortage(now=0.0) is None
    disk.free_bytes = 100 * MIB
    assert space.shortage(now=CHECK_INTERVAL_S) == (
        f"the data directory {tmp_path} has 100.0 MiB free, under the reserve of 256 MiB "
        "(disk_free_min_bytes): enqueues wait until dequeues or the operator free space"
    )
    disk.free_bytes = 300 * MIB
    assert space.shortage(now=2 * CHECK_INTERVAL_S) is None  # freed: enqueues go again


def test_the_space_is_read_at_most_once_per_interval(disk: FakeDisk, tmp_path: Path) -> None:
    space = DiskSpace(tmp_path, 256 * MIB)
    for step in range(100):
        space.shortage(now=step * CHECK_INTERVAL_S / 100)
    assert disk.calls == 1
    space.shortage(now=CHECK_INTERVAL_S)
    assert disk.calls == 2


def test_a_reserve_of_zero_never_refuses_nor_reads(disk: FakeDisk, tmp_path: Path) -> None:
    disk.free_bytes = 0
    space = DiskSpace(tmp_path, 0)
    assert space.shortage(now=0.0) is None and disk.calls == 0
    assert space.read(now=0.0) == 0 and disk.calls == 1  # stats still show the space


def test_a_space_that_cannot_be_read_refuses_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken(path: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(disk_space.os, "statvfs", broken)
    assert DiskSpace(tmp_path, 256 * MIB).shortage(now=0.0) is None


def test_early_snapshots_only_under_the_reserve_with_something_to_free_and_spaced(
    disk: FakeDisk, tmp_path: Path
) -> None:
    space = DiskSpace(tmp_path, 256 * MIB)
    assert not space.compact_now(0.0, reclaimable=True)  # room enough
    disk.free_bytes = 10 * MIB
    t = CHECK_INTERVAL_S
    assert not space.compact_now(t, reclaimable=False)  # nothing dequeued to free
    assert space.compact_now(t, reclaimable=True)
    assert not space.compact_now(t + COMPACT_INTERVAL_S / 2, reclaimable=True)
    assert space.compact_now(t + COMPACT_INTERVAL_S, reclaimable=True)


def test_a_write_the_disk_refused_is_one_line_and_nothing_else_is() -> None:
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/inputs-1.log")
    assert disk_failure(full) == (
        "the disk refused a write: No space left on device (/data/inputs-1.log). Nothing "
        "acknowledged is lost: free space (or mend the disk) and start skueued again with "
        "the same data directory"
    )
    assert disk_failure(OSError(errno.EROFS, "Read-only file system")) is not None
    assert disk_failure(OSError(errno.ECONNRESET, "Connection reset by peer")) is None
    assert disk_failure(ValueError("no")) is None


def test_skueued_turns_a_full_disk_inside_its_task_groups_into_its_one_line() -> None:
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    grouped = BaseExceptionGroup("nursery", [BaseExceptionGroup("inner", [full])])
    error = startup_error(grouped)
    assert isinstance(error, DaemonError) and "No space left on device" in str(error)
    # A bug keeps its traceback: an unrelated error, or a full disk beside another error.
    assert startup_error(BaseExceptionGroup("n", [KeyError("x")])) is None
    assert startup_error(BaseExceptionGroup("n", [full, KeyError("x")])) is None


def test_the_reserve_is_an_option_with_the_limits_default() -> None:
    parser, listen = build_parser(), ["--listen", "127.0.0.1:7400"]
    assert parser.parse_args(listen).disk_free_min == Limits().disk_free_min_bytes == 256 * MIB
    assert parser.parse_args([*listen, "--disk-free-min", "0"]).disk_free_min == 0
    with pytest.raises(SystemExit):
        parser.parse_args([*listen, "--disk-free-min", "-1"])
