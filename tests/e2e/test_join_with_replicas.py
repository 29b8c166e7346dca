"""A member joins a replicated cluster (``skueued --replicas 3 --join``;
runtime/re_replication.py, "growth"): its process's group starts with its own replica
alone and grows to three voters on the members it meets, each new copy starting from
the joiner's snapshot; then the joiner's host is lost for good, with its disk, and
what it held is served from its copies: nothing acknowledged is lost."""

from __future__ import annotations

import signal
from pathlib import Path

import skueue.client.blocking
from tests.e2e.daemons import HOST, Daemon, free_ports, spawn, stop, wait_ready
from tests.e2e.test_failover import wait_serving
from tests.e2e.test_re_replication import (
    groups_seen,
    lose,
    members_stats,
    remove_when_served,
    wait_replaced,
)
from tests.e2e.test_restore_from_copies import assert_exactly, drain, start

BLOCK = 100
ELEMENTS_MAX = 5_000


def join(
    addresses: list[str], daemons: list[Daemon], tmp_path: Path, extra: list[str]
) -> list[str]:
    """A fourth member joins through the first (``extra``: more options), and every
    group, its own too, gets three voters; how it was started."""
    joiner = f"{HOST}:{free_ports(1)[0]}"
    args = ["--listen", joiner, "--join", addresses[0], "--replicas", "3", "--data-dir",
            str(tmp_path / "data3"), "--snapshot-bytes", "65536", *extra]  # fmt: skip
    daemons.append(spawn(args, tmp_path, "d3"))
    wait_ready(daemons[3:])
    addresses.append(joiner)
    seconds = wait_replaced(addresses[0], set(), addresses)
    print(f"every group, the joiner's too, has three replicas {seconds:.1f} s after it joined")
    assert {joiner} < set(next(iter(groups_seen(addresses[0])[joiner])))
    return args


def fill_joiner(joiner: str) -> list[bytes]:
    """Enqueue through the joiner until it holds part of the queue (elements are stored
    by blocks of 64 positions: a few hundred sit on a few members); what went in."""
    inserted: list[bytes] = []
    with skueue.client.blocking.connect_blocking(joiner) as q:
        while not members_stats(joiner)[joiner]["entries"]:
            assert len(inserted) < ELEMENTS_MAX, "the joiner never held an element"
            for element in [b"j%05d" % (len(inserted) + i) for i in range(BLOCK)]:
                q.enqueue(element)
                inserted.append(element)
    return inserted


def test_a_joiner_comes_back_after_kill_9_with_its_disk(tmp_path: Path) -> None:
    addresses, _, daemons = start(3, tmp_path)
    try:
        wait_ready(daemons)
        args = join(addresses, daemons, tmp_path, [])
        joiner = addresses[3]
        inserted = fill_joiner(joiner)
        daemons[3].proc.send_signal(signal.SIGKILL)
        daemons[3].proc.wait(timeout=10)
        daemons[3] = spawn(args, tmp_path, "d3-again")
        wait_ready(daemons[3:])
        assert_exactly(inserted, drain(joiner))
    finally:
        stop(daemons)


def test_a_joiner_is_replicated_and_survives_the_loss_of_its_host(tmp_path: Path) -> None:
    addresses, _, daemons = start(3, tmp_path, ["--failover"])
    try:
        wait_ready(daemons)
        join(addresses, daemons, tmp_path, ["--failover"])
        joiner = addresses[3]
        inserted = fill_joiner(joiner)
        lose(daemons, 3, tmp_path)
        seconds, acknowledged, unknown = wait_serving(addresses[0], "marker-")
        print(f"serving again {seconds:.2f} s after the joiner's host was lost")
        remove_when_served(addresses[0], joiner)
        seconds = wait_replaced(addresses[0], {joiner}, addresses)
        print(f"every group has three replicas again {seconds:.1f} s after the removal")
        rest = drain(addresses[1])
        markers = [e for e in rest if e.startswith(b"marker")]
        assert set(acknowledged) <= set(markers) <= {*acknowledged, *unknown}, markers
        assert_exactly(inserted, [e for e in rest if not e.startswith(b"marker")])
    finally:
        stop(daemons)
