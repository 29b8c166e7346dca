"""Members join and leave a replicated cluster (``skueued --replicas 3``).

A joiner's group (``--join``; runtime/re_replication.py, "growth") starts with its own
replica alone, takes its seed as a second voter before the joiner steps into the ring,
then a third, each new copy starting from the joiner's snapshot; the groups of the
members before it move a copy each onto it ("placement").  The joiner comes back from
kill -9 with its disk, and, lost for good with it, is served from its copies: nothing
acknowledged is lost.  A member that leaves (``skueue leave``) is replaced in the groups
that kept a copy on its host, and the copies of its own group go (runtime/replicas.py,
``departed``)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import skueue.client.blocking
from skueue.host.placement import groups_followed_by, voters_of
from tests.e2e.daemons import HOST, Daemon, free_ports, spawn, stop, wait_ready
from tests.e2e.test_failover import wait_serving
from tests.e2e.test_re_replication import (
    REPLACED_S,
    groups_seen,
    lose,
    members_stats,
    remove_when_served,
    wait_replaced,
)
from tests.e2e.test_restore_from_copies import assert_exactly, drain, fill, start

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
    # Its first step in the ring waited for its group's second replica, on its seed.
    logs = daemons[3].stderr()
    assert logs.index("it joins now") < logs.index("] joined"), logs
    addresses.append(joiner)
    seconds = wait_replaced(addresses[0], set(), addresses)
    print(f"every group, the joiner's too, has three replicas {seconds:.1f} s after it joined")
    assert {joiner} < set(next(iter(groups_seen(addresses[0])[joiner])))
    return args


def wait_placed(address: str, members: list[str]) -> float:
    """Seconds until every group's voters are its placement over ``members`` (its home
    and the next two in ring order), as its home and every copy see them, and every
    member keeps the copies of exactly the groups it is placed in."""
    began = time.monotonic()
    while True:
        stats = members_stats(address)
        placed = set(stats) == set(members) and all(
            set(stats[m]["durable"]["replicas"]) == set(voters_of(m, members, 3))
            and set(stats[m]["durable"]["copies"]) == set(groups_followed_by(m, members, 3))
            and all(set(copy["voters"]) == set(voters_of(p, members, 3))
                    for p, copy in stats[m]["durable"]["copies"].items())
            for m in members
        )  # fmt: skip
        if placed:
            return time.monotonic() - began
        assert time.monotonic() - began < REPLACED_S, stats
        time.sleep(1.0)


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


def test_a_joiner_comes_back_after_kill_9_with_its_disk_and_then_leaves(tmp_path: Path) -> None:
    addresses, founder_args, daemons = start(3, tmp_path)
    try:
        wait_ready(daemons)
        founders = list(addresses)
        args = join(addresses, daemons, tmp_path, [])
        joiner = addresses[3]
        # The groups of the two members before it move a copy each onto it; the members
        # those copies leave delete theirs.
        seconds = wait_placed(addresses[0], addresses)
        print(f"every group is placed over the four members {seconds:.1f} s after the join")
        assert len(members_stats(joiner)[joiner]["durable"]["copies"]) == 2
        # A member whose copy moved does not open it again when it restarts.
        moved = [set(groups_followed_by(m, founders, 3)) - set(groups_followed_by(m, addresses, 3))
                 for m in founders]  # fmt: skip
        i = next(i for i, groups in enumerate(moved) if groups)
        daemons[i].proc.send_signal(signal.SIGKILL)
        daemons[i].proc.wait(timeout=10)
        daemons[i] = spawn(founder_args(i), tmp_path, f"d{i}-again")
        wait_ready(daemons[i : i + 1])
        wait_placed(addresses[0], addresses)
        inserted = fill_joiner(joiner)
        daemons[3].proc.send_signal(signal.SIGKILL)
        daemons[3].proc.wait(timeout=10)
        daemons[3] = spawn(args, tmp_path, "d3-again")
        wait_ready(daemons[3:])
        wait_placed(addresses[0], addresses)  # its copies came back with it
        with skueue.client.blocking.connect_blocking(joiner) as q:
            q.leave()  # returns once the others hold its data
        assert daemons[3].proc.wait(timeout=30) == 0
        seconds = wait_placed(addresses[0], addresses[:3])
        print(f"every group is placed over the other three {seconds:.1f} s after it left")
        assert_exactly(inserted, drain(addresses[0]))
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


def test_a_member_leaves_and_its_groups_get_three_replicas_on_the_others(
    tmp_path: Path,
) -> None:
    addresses, args, daemons = start(4, tmp_path, ["--failover"])
    try:
        wait_ready(daemons)
        inserted = fill(daemons, b"x" * 100)
        leaver = addresses[3]
        kept = [a for a, m in members_stats(leaver).items() if leaver in m["durable"]["copies"]]
        with skueue.client.blocking.connect_blocking(leaver) as q:
            q.leave()  # returns once the others hold its data
        assert daemons[3].proc.wait(timeout=30) == 0
        stayed = addresses[:3]
        seconds = wait_replaced(stayed[0], {leaver}, stayed)
        print(f"every group has three replicas on the others {seconds:.1f} s after the leave")
        # Its copies went with it, and a member that kept one does not open it again
        # when it restarts.
        i = addresses.index(kept[0])
        daemons[i].proc.send_signal(signal.SIGKILL)
        daemons[i].proc.wait(timeout=10)
        daemons[i] = spawn(args(i), tmp_path, f"d{i}-again")
        wait_ready(daemons[i : i + 1])
        copies = {p for member in members_stats(stayed[0]).values()
                  for p in member["durable"]["copies"]}  # fmt: skip
        assert leaver not in copies, copies
        assert_exactly(inserted, drain(stayed[1]))
    finally:
        stop(daemons)
