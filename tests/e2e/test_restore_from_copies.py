"""``skueued --restore-from-copies`` (runtime/restore.py) on real daemons: a member lost
with its disk is started again at its address with an empty data directory, and its
process comes back from the copies the other members keep, nothing acknowledged lost."""

from __future__ import annotations

import shutil
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import skueue.client.blocking
from skueue.host.placement import voters_of
from tests.e2e.daemons import HOST, Daemon, free_ports, refused, spawn, stop, wait_ready

ELEMENTS = 600


def start(
    n: int, tmp_path: Path, extra: list[str] | None = None
) -> tuple[list[str], Callable[[int], list[str]], list[Daemon]]:
    """``n`` members with ``--replicas 3`` (and ``extra``): their addresses, how member
    ``i`` is started, and their daemons (spawned; the caller waits for them and stops
    them)."""
    addresses = [f"{HOST}:{p}" for p in free_ports(n)]

    def args(i: int) -> list[str]:
        # Small snapshots: the copies hold a state and the log after it.
        return ["--listen", addresses[i], *group_args(addresses, addresses[i]),
                "--data-dir", str(tmp_path / f"data{i}"), "--snapshot-bytes", "65536",
                *(extra or [])]

    return addresses, args, [spawn(args(i), tmp_path, f"d{i}") for i in range(n)]


def group_args(addresses: list[str], own: str) -> list[str]:
    return ["--peers", ",".join(a for a in addresses if a != own), "--replicas", "3"]


def fill(daemons: list[Daemon], pad: bytes) -> list[bytes]:
    """``ELEMENTS`` elements (numbered, then ``pad``) in through every member in turn."""
    inserted = [f"{i:04d}".encode() + pad for i in range(ELEMENTS)]
    for at, daemon in enumerate(daemons):  # through every member, its own included
        with skueue.client.blocking.connect_blocking(daemon.address) as q:
            q.enqueue_many(inserted[at :: len(daemons)])
    return inserted


def fill_and_take(daemons: list[Daemon]) -> tuple[list[bytes], list[bytes | None], int]:
    """:func:`fill`, then a quarter taken out through the first member; and the member to
    lose: of the others, the one that holds the most of the queue.  (Elements are stored
    by blocks of 64 positions, so the queue is in 7 or 8 keys: a fixed member holds none
    of them in a few runs out of a hundred.)"""
    inserted = fill(daemons, b"x" * 200)
    with skueue.client.blocking.connect_blocking(daemons[0].address) as q:
        taken = [q.dequeue() for _ in range(ELEMENTS // 4)]
        held = {m["address"]: m["entries"] for m in q.stats()["members"]}
    lost = max(range(1, len(daemons)), key=lambda i: held[daemons[i].address])
    assert held[daemons[lost].address] > 0, held  # the lost member holds part of the queue
    return inserted, taken, lost


def drain(address: str) -> list[bytes]:
    """Everything left in the queue (in batches: one dequeue at a time through a
    replicated tree takes a round of commits each)."""
    with skueue.client.blocking.connect_blocking(address) as q:
        rest: list[bytes] = []
        while batch := q.dequeue_many(100):
            rest += batch
    return rest


def assert_exactly(inserted: list[bytes], removed: list[bytes]) -> None:
    counts = Counter(removed)
    assert sorted(counts) == sorted(inserted), (
        f"{len(set(inserted) - set(counts))} lost, {len(set(counts) - set(inserted))} "
        "unexpected")  # fmt: skip
    assert max(counts.values()) == 1, [e[:4] for e, n in counts.items() if n > 1]


def test_a_member_lost_with_its_disk_comes_back_from_the_copies(tmp_path: Path) -> None:
    addresses, args, daemons = start(3, tmp_path)
    try:
        wait_ready(daemons)
        inserted, taken, lost = fill_and_take(daemons)
        # While the member is up, the others refuse to hand its process to another daemon.
        (spare,) = free_ports(1)
        impostor = ["--listen", f"{HOST}:{spare}", "--advertise", addresses[lost],
                    *group_args(addresses, addresses[lost]), "--data-dir",
                    str(tmp_path / "impostor"), "--restore-from-copies"]  # fmt: skip
        code, err = refused(impostor, tmp_path, "impostor")
        assert code != 0 and "the process is up" in err, err[-2000:]
        daemons[lost].proc.send_signal(signal.SIGKILL)
        daemons[lost].proc.wait(timeout=10)
        shutil.rmtree(tmp_path / f"data{lost}")
        # Started afresh without the option, the cluster refuses it, and says what to do.
        code, err = refused(args(lost), tmp_path, "lost-fresh")
        assert code != 0 and "--restore-from-copies" in err, err[-2000:]
        shutil.rmtree(tmp_path / f"data{lost}")
        back = daemons[lost] = spawn([*args(lost), "--restore-from-copies"], tmp_path,
                                     "lost-restored")
        wait_ready([back])
        logs = back.stderr()
        assert "restoring from the copy of a member" in logs, logs[-3000:]
        assert "restored the snapshot" in logs, logs[-3000:]  # the copy's state
        assert_exactly(inserted, taken + drain(daemons[0].address))
        assert "bug:" not in "".join(d.stderr() for d in daemons)
    finally:
        assert not stop(daemons)


def test_a_member_outside_the_group_may_be_down_during_a_restore(tmp_path: Path) -> None:
    """Four members, three voters per group: the member that keeps no copy of the lost
    one's process is down too (with its disk), and the restore needs only the voters."""
    addresses, args, daemons = start(4, tmp_path)
    try:
        wait_ready(daemons)
        inserted = [f"{i:04d}".encode() + b"y" * 100 for i in range(ELEMENTS)]
        with skueue.client.blocking.connect_blocking(daemons[0].address) as q:
            q.enqueue_many(inserted)
        lost = 1
        (outside,) = [i for i, a in enumerate(addresses)
                      if a not in voters_of(addresses[lost], addresses, 3)]  # fmt: skip
        for i in (outside, lost):
            daemons[i].proc.send_signal(signal.SIGKILL)
            daemons[i].proc.wait(timeout=10)
        shutil.rmtree(tmp_path / f"data{lost}")
        daemons[lost] = spawn([*args(lost), "--restore-from-copies"], tmp_path, "restored")
        wait_ready([daemons[lost]])
        daemons[outside] = spawn(args(outside), tmp_path, "outside-again")
        wait_ready([daemons[outside]])
        assert_exactly(inserted, drain(daemons[0].address))
        assert "restored from the copy" in daemons[lost].stderr()
    finally:
        assert not stop(daemons)


def test_a_restore_is_refused_in_one_line(tmp_path: Path) -> None:
    a, b, c = (f"{HOST}:{p}" for p in free_ports(3))
    code, err = refused(["--listen", a, "--peers", f"{b},{c}", "--restore-from-copies"],
                        tmp_path, "one")  # fmt: skip
    assert code == 2 and "--restore-from-copies needs --replicas 3 or 5" in err, err
    data = tmp_path / "data"
    data.mkdir()
    (data / "something").write_text("kept")
    code, err = refused(["--listen", a, "--peers", f"{b},{c}", "--replicas", "3",
                         "--data-dir", str(data), "--restore-from-copies"],
                        tmp_path, "full")  # fmt: skip
    assert code != 0 and "is not empty" in err, err
    assert (data / "something").read_text() == "kept"
