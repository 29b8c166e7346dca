"""skueued's default ``--replicas`` (runtime/replica_count.py), on real daemons started
without it: 3 replicas and failover where the cluster starts with at least 3 durable
members, so that a member down does not stop it; 1 with fewer; a joiner takes its
seed's; a restart keeps what its data directory was started with."""

from __future__ import annotations

import signal
from pathlib import Path

import skueue.client.blocking
from tests.e2e.daemons import HOST, Daemon, free_ports, refused, spawn, stop, wait_ready
from tests.e2e.test_cli import skueue as run_skueue
from tests.e2e.test_failover import members_stats, standing, wait_serving
from tests.e2e.test_re_replication import wait_replaced
from tests.e2e.test_restore_from_copies import assert_exactly, drain

ELEMENTS = 60


def static(addresses: list[str], i: int, tmp_path: Path, *extra: str) -> list[str]:
    others = ",".join(a for a in addresses if a != addresses[i])
    return ["--listen", addresses[i], "--peers", others, "--data-dir",
            str(tmp_path / f"data{i}"), *extra]  # fmt: skip


def replicas_of(address: str) -> dict[str, int]:
    """Per member, how many voters its process's group has (1: no group)."""
    return {m: len(s["durable"].get("replicas") or [m]) for m, s in members_stats(address).items()}


def test_three_members_replicate_by_default_a_joiner_follows_and_one_down_stops_nothing(
    tmp_path: Path,
) -> None:
    addresses = [f"{HOST}:{p}" for p in free_ports(3)]
    spare = free_ports(4)  # one port for each member's stand-ins (--stand-in-ports)
    daemons: list[Daemon] = [
        spawn(static(addresses, i, tmp_path, "--stand-in-ports", f"{spare[i]}-{spare[i]}"),
              tmp_path, f"d{i}", skueued_decides=True)
        for i in range(3)
    ]  # fmt: skip
    try:
        wait_ready(daemons)
        assert replicas_of(addresses[0]) == dict.fromkeys(addresses, 3)
        # A joiner not given --replicas takes its seed's.
        joiner = f"{HOST}:{free_ports(1)[0]}"
        daemons.append(spawn(["--listen", joiner, "--join", addresses[0], "--data-dir",
                              str(tmp_path / "joiner"), "--stand-in-ports", str(spare[3])],
                             tmp_path, "joiner", skueued_decides=True))  # fmt: skip
        wait_ready(daemons[3:])
        seconds = wait_replaced(addresses[0], set(), [*addresses, joiner])
        print(f"every group, the joiner's too, has three replicas {seconds:.1f} s after it joined")
        # A daemon started alone runs one replica: skueue join cannot take it into this
        # cluster, and says so in one line, not as something to retry; it stays up.
        lone = f"{HOST}:{free_ports(1)[0]}"
        daemons.append(spawn(["--listen", lone, "--data-dir", str(tmp_path / "lone")],
                             tmp_path, "lone", skueued_decides=True))  # fmt: skip
        wait_ready(daemons[4:])
        answer = run_skueue("join", addresses[0], "--node", lone)
        err = answer.stderr.decode()
        assert answer.returncode != 0 and "skueue join takes it only into a cluster of one" \
            " replica" in err and "retryable" not in err, err  # fmt: skip
        assert daemons[4].alive()
        inserted = [b"e%03d" % i for i in range(ELEMENTS)]
        with skueue.client.blocking.connect_blocking(joiner) as q:
            for element in inserted:
                q.enqueue(element)
        # Failover came with the replicas: a member killed no longer stops the cluster.
        daemons[2].proc.send_signal(signal.SIGKILL)
        daemons[2].proc.wait(timeout=10)
        seconds, acknowledged, unknown = wait_serving(addresses[0])
        print(f"serving again {seconds:.2f} s after the kill, without --failover given")
        # A survivor serves the process on its --stand-in-ports.
        served_at = {at for member in standing(addresses[0]) for p, at in member.items()
                     if p == addresses[2]}  # fmt: skip
        survivors = {str(spare[i]) for i in (0, 1, 3)}
        assert {at.rpartition(":")[2] for at in served_at} <= survivors, served_at
        assert served_at, standing(addresses[0])
        rest = drain(joiner)
        markers = [e for e in rest if e.startswith(b"marker")]
        assert set(acknowledged) <= set(markers) <= set(acknowledged) | set(unknown)
        assert_exactly(inserted, [e for e in rest if not e.startswith(b"marker")])
    finally:
        stop(daemons)


def test_fewer_than_three_members_and_an_older_data_directory_keep_one_replica(
    tmp_path: Path,
) -> None:
    # Two members: one replica each, and --failover is refused in one line.
    pair = [f"{HOST}:{p}" for p in free_ports(2)]
    code, err = refused(static(pair, 0, tmp_path / "x", "--failover"), tmp_path, "failover",
                        skueued_decides=True)  # fmt: skip
    assert code != 0 and "--failover needs --replicas 3 or 5" in err, err
    daemons = [spawn(static(pair, i, tmp_path / "pair"), tmp_path, f"p{i}",
                     skueued_decides=True) for i in range(2)]  # fmt: skip
    try:
        wait_ready(daemons)
        assert replicas_of(pair[0]) == dict.fromkeys(pair, 1)
    finally:
        assert not stop(daemons)
    # Three members started with --replicas 1 (as before 3 became the default): a member
    # restarted without --replicas keeps its data directory's 1, and its peers take it.
    trio_ = [f"{HOST}:{p}" for p in free_ports(3)]
    daemons = [spawn(static(trio_, i, tmp_path, "--replicas", "1"), tmp_path, f"t{i}")
               for i in range(3)]  # fmt: skip
    try:
        wait_ready(daemons)
        with skueue.client.blocking.connect_blocking(trio_[0]) as q:
            q.enqueue(b"before")
        daemons[1].proc.send_signal(signal.SIGTERM)
        assert daemons[1].proc.wait(timeout=30) == 0
        daemons[1] = spawn(static(trio_, 1, tmp_path), tmp_path, "t1-again", skueued_decides=True)
        wait_ready(daemons[1:2])
        assert replicas_of(trio_[0]) == dict.fromkeys(trio_, 1)
        assert drain(trio_[1]) == [b"before"]
    finally:
        assert not stop(daemons)
