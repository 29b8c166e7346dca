"""``skueued --replicas 3 --failover`` (runtime/stand_in.py, runtime/failover.py) on real
daemons: a member killed is taken over by a member that keeps a copy of its process;
the cluster serves again, and nothing acknowledged is lost; back with its disk, the
member keeps a copy and sends its clients on."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import skueue.client.blocking
from skueue.client.errors import SkueueError
from tests.e2e.daemons import HOST, spawn, stop, wait_ready
from tests.e2e.test_metrics import metrics_address, scrape, value
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


def test_a_member_down_is_taken_over_and_back_it_serves_its_process_again(
    tmp_path: Path,
) -> None:
    """(A member lost with its disk for good, under load: tests/faults/test_failover.py.)"""
    addresses, args, daemons = start(3, tmp_path, ["--failover", "--metrics", f"{HOST}:0"])
    try:
        wait_ready(daemons)
        inserted, taken, lost = fill_and_take(daemons)
        daemons[lost].proc.send_signal(signal.SIGKILL)
        daemons[lost].proc.wait(timeout=10)
        seconds, acknowledged, unknown = wait_serving(daemons[0].address)
        print(f"serving again {seconds:.2f} s after the kill")
        assert [s for s in standing(daemons[0].address) if addresses[lost] in s]  # one serves it
        stand_in = daemons[addresses.index(stand_in_for(daemons[0].address, addresses[lost]))]
        scraped = scrape(metrics_address(stand_in))
        assert value(scraped, "skueue_failover_stand_ins") == 1
        assert value(scraped, "skueue_failover_takeovers_total") == 1
        assert value(scraped, "skueue_failover_stand_ins_ended_total") == 0
        # Back with its disk, after a survivor took its process over: a backup first,
        # then the stand-in hands the process back (runtime/homecoming.py).
        back = daemons[lost] = spawn(args(lost), tmp_path, "lost-back")
        wait_ready([back])
        began = time.monotonic()
        while any(standing(daemons[0].address)) or not serves(back.address, b"at-home"):
            assert time.monotonic() - began < SERVING_AGAIN_S, standing(daemons[0].address)
            time.sleep(0.5)
        print(f"its process back home {time.monotonic() - began:.1f} s after it was ready")
        scraped = scrape(metrics_address(stand_in))
        assert value(scraped, "skueue_failover_stand_ins") == 0
        assert value(scraped, "skueue_failover_stand_ins_ended_total") == 1
        # A client with a seed list that names it first is served there.
        seeds = f"{back.address},{daemons[0].address}"
        with skueue.client.blocking.connect_blocking(seeds) as q:
            q.enqueue(b"through-seeds")
        rest = drain(daemons[1].address)
        markers = [e for e in rest if e.startswith(b"marker")]
        assert set(acknowledged) <= set(markers) <= {*acknowledged, *unknown}, markers
        assert len(markers) == len(set(markers)), markers
        assert_exactly([*inserted, b"at-home", b"through-seeds"],
                       [*taken, *(e for e in rest if not e.startswith(b"marker"))])  # fmt: skip
        log = (tmp_path / "lost-back.stderr").read_text()
        assert "led by another replica now" in log, log[-3000:]
        assert "restarting from the data directory" in log, log[-3000:]
    finally:
        stop(daemons)


def members_stats(address: str) -> dict[str, dict[str, Any]]:
    with skueue.client.blocking.connect_blocking(address) as q:
        return {m["address"]: m for m in q.stats()["members"] if "durable" in m}


def stand_in_for(address: str, process: str) -> str:
    """The member whose daemon serves ``process`` for its lost host."""
    for member, stats in members_stats(address).items():
        if process in stats["durable"]["stands_in_for"]:
            return member
    raise AssertionError(f"no member stands in for {process}")


def standing(address: str) -> list[dict[str, str]]:
    """What each member says it stands in for (``durable.stands_in_for``)."""
    with skueue.client.blocking.connect_blocking(address) as q:
        return [m["durable"]["stands_in_for"] for m in q.stats()["members"] if "durable" in m]
