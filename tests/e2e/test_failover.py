"""``skueued --replicas 3 --failover`` (runtime/stand_in.py, runtime/failover.py) on real
daemons: a member killed is taken over by a member that keeps a copy of its process;
the cluster serves again, and nothing acknowledged is lost; back with its disk, the
member keeps a copy and sends its clients on."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

import skueue.client.blocking
from skueue.client.errors import SkueueError
from tests.e2e.daemons import spawn, stop, wait_ready
from tests.e2e.test_restore_from_copies import (
    assert_exactly,
    drain,
    fill_and_take,
    start,
)

SERVING_AGAIN_S = 60.0
"""How long the test waits for the cluster to serve after the kill (the failover itself
takes the failure timeout, 3 to 6 s, and a few round trips: bench/failover.py)."""


def serves(address: str, marker: bytes) -> bool:
    """Whether an enqueue through ``address`` is acknowledged now (it goes up the tree,
    through every member's process)."""
    try:
        with skueue.client.blocking.connect_blocking(address, timeout_s=3.0,
                                                     request_timeout_s=3.0) as q:  # fmt: skip
            q.enqueue(marker)
            return True
    except (SkueueError, OSError):
        return False


def wait_serving(address: str, prefix: str = "marker") -> tuple[float, list[bytes], list[bytes]]:
    """Seconds until the cluster serves through ``address``; the markers acknowledged
    and those whose outcome is unknown (``prefix`` and a number)."""
    began = time.monotonic()
    unknown: list[bytes] = []
    while True:
        marker = f"{prefix}{len(unknown)}".encode()
        if serves(address, marker):
            return time.monotonic() - began, [marker], unknown
        unknown.append(marker)
        assert time.monotonic() - began < SERVING_AGAIN_S, "the cluster does not serve"
        time.sleep(0.2)


def test_a_member_down_is_taken_over_and_back_it_is_a_backup(tmp_path: Path) -> None:
    """(A member lost with its disk for good, under load: tests/faults/test_failover.py.)"""
    addresses, args, daemons = start(3, tmp_path, ["--failover"])
    try:
        wait_ready(daemons)
        inserted, taken = fill_and_take(daemons)
        daemons[2].proc.send_signal(signal.SIGKILL)
        daemons[2].proc.wait(timeout=10)
        seconds, acknowledged, unknown = wait_serving(daemons[0].address)
        print(f"serving again {seconds:.2f} s after the kill")
        with skueue.client.blocking.connect_blocking(daemons[0].address) as q:
            standing = [m["durable"]["stands_in_for"] for m in q.stats()["members"]
                        if "durable" in m]  # fmt: skip
        assert [s for s in standing if addresses[2] in s], standing  # one serves it
        # Back with its disk, after a survivor took its process over: it follows.
        back = daemons[2] = spawn(args(2), tmp_path, "d2-back")
        wait_ready([back])
        with pytest.raises(SkueueError, match="another member serves now"):
            skueue.client.blocking.connect_blocking(back.address, timeout_s=5.0)
        # A client with a seed list that names it first goes on to the next member.
        seeds = f"{back.address},{daemons[0].address}"
        with skueue.client.blocking.connect_blocking(seeds) as q:
            q.enqueue(b"through-seeds")
        with skueue.client.blocking.connect_blocking(daemons[0].address) as q:
            members = {m["address"]: m for m in q.stats()["members"]}
        assert members[back.address]["durable"]["led_by"] in addresses[:2], members
        rest = drain(daemons[1].address)
        markers = [e for e in rest if e.startswith(b"marker")]
        assert set(acknowledged) <= set(markers) <= {*acknowledged, *unknown}, markers
        assert len(markers) == len(set(markers)), markers
        assert_exactly([*inserted, b"through-seeds"],
                       [*taken, *(e for e in rest if not e.startswith(b"marker"))])  # fmt: skip
        log = (tmp_path / "d2-back.stderr").read_text()
        assert "led by another replica now" in log, log[-3000:]
    finally:
        stop(daemons)
