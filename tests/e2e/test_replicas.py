"""``skueued --replicas 3`` (preview, docs/replication.md §11 stage 2b) on real daemons.

Each process's input log is kept by its own daemon and the next two in label order
(skueue/host/placement.py); a step's replies and messages go out only once a majority
of the three hold its entries durably.  So once the cluster has answered, every
committed entry of every process is on at least two disks: this reads the copies back
after the cluster stopped.  The members must agree on ``--replicas``, and what the
preview does not do yet is refused in one line.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

import skueue.client.blocking
from skueue.client.errors import NodeUnavailable, RequestRejected, SkueueError
from skueue.host.placement import voters_of
from skueue.replication.messages import Entry
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy, directory_name
from skueue.runtime.follower_slot import REPLICAS_DIRECTORY
from tests.e2e.daemons import HOST, Cluster, Daemon, free_ports, refused, spawn, stop, wait_ready
from tests.e2e.test_metrics import METRICS, get, metrics_address, scrape, value

StartCluster = Callable[..., Cluster]
T = TypeVar("T")
ELEMENTS = 300


def entries(directory: Path) -> dict[int, Entry]:
    """Every entry an input log holds (read with the daemon stopped)."""
    raw = json.loads((directory / "meta.json").read_text())
    meta = Meta(raw["process_id"], raw["nonce"], raw["structure"], ())
    log = InputLog.open(directory, meta, SyncPolicy())
    try:
        index = log.index
        first, last = index.first, index.last_index
        return {first + i: e for i, e in enumerate(log.read_entries(first, last, 1 << 62))}
    finally:
        log.close()


def test_every_committed_entry_is_on_a_majority_of_its_group(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(3, extra_args=("--replicas", "3", *METRICS))
    with skueue.client.blocking.connect_blocking(cluster.addresses[0]) as q:
        for i in range(0, ELEMENTS, 25):  # (in requests of 25)
            q.enqueue_many([f"e{j}".encode() for j in range(i, i + 25)])
        taken = [e for _ in range(0, ELEMENTS // 2, 25) for e in q.dequeue_many(25)]
        assert taken == [f"e{i}".encode() for i in range(ELEMENTS // 2)]
        stats = q.stats()
    members = [m["process"] for m in stats["members"]]
    commits = {m["process"]: m["durable"]["commit_index"] for m in stats["members"]}
    data_dirs = {m["process"]: Path(m["durable"]["data_dir"]) for m in stats["members"]}
    for m in stats["members"]:
        assert sorted(m["durable"]["replicas"]) == sorted(members), m["durable"]
        lag = m["durable"]["replica_lag"]  # what the leader knows of each follower
        assert sorted(lag) == sorted(set(members) - {m["process"]}), lag
        assert all(0 <= n <= m["durable"]["commit_index"] for n in lag.values()), lag
    scraped = scrape(metrics_address(cluster.daemons[0]))
    lags = [labels["replica"] for name, labels, _ in scraped
            if name == "skueue_replication_lag_entries"]  # fmt: skip
    assert len(lags) == 2 and value(scraped, "skueue_replication_replicas") == 3, lags
    # Nothing lost, nothing to re-replicate (tests/e2e/test_re_replication.py).
    assert value(scraped, "skueue_replication_learners") == 0
    assert value(scraped, "skueue_replication_hosts_lost") == 0
    copies = [labels["process"] for name, labels, _ in scraped
              if name == "skueue_replication_copy_applied_index"]  # fmt: skip
    assert sorted(copies) == sorted(set(members) - {cluster.addresses[0]}), copies
    refusal = "a cluster run with --replicas 3 keeps at least 3 members; it has 3"
    with (skueue.client.blocking.connect_blocking(cluster.addresses[1]) as q,
          pytest.raises(RequestRejected, match=refusal)):  # fmt: skip
        q.leave()
    assert not stop(cluster.daemons)
    for process, commit in commits.items():
        own = entries(data_dirs[process])
        assert commit > ELEMENTS // 10 and max(own) >= commit, (process, commit, max(own))
        followers = voters_of(process, members, 3)[1:]
        held = [
            entries(data_dirs[f] / REPLICAS_DIRECTORY / directory_name(process))
            for f in followers
        ]
        # Committed: the leader and at least one follower hold it, the same entry.
        for index in range(1, commit + 1):
            copies = [h[index] for h in held if index in h]
            assert copies, f"{process}: entry {index} (committed) on no follower"
            assert all(c == own[index] for c in copies), (process, index)


def test_followers_apply_the_log_to_the_leaders_state(skueued_cluster: StartCluster) -> None:
    """Each follower copy applies what its group committed (runtime/applied_state.py);
    at each of the leader's snapshots (small here, so there are many) it compares its
    state's digest with the leader's, and none differs."""
    cluster = skueued_cluster(3, extra_args=("--replicas", "3", "--snapshot-bytes", "65536"))
    value = b"x" * 200
    # In requests of 25 through every member in turn: each process's own log grows by
    # its clients' elements, to several snapshots each (two checks at every copy).
    for at, address in enumerate(cluster.addresses):
        with skueue.client.blocking.connect_blocking(address) as q:
            for i in range(at * ELEMENTS * 2, (at + 1) * ELEMENTS * 2, 25):
                q.enqueue_many([value + str(j).encode() for j in range(i, i + 25)])
            for _ in range(0, ELEMENTS // 3, 25):
                q.dequeue_many(25)
    with skueue.client.blocking.connect_blocking(cluster.addresses[0]) as q:

        def copies() -> dict[tuple[str, str], dict[str, Any]]:
            members = q.stats()["members"]
            return {(m["process"], process): copy for m in members
                    for process, copy in m["durable"]["copies"].items()}  # fmt: skip

        got = wait_for(copies, lambda c: len(c) == 6 and all(v["checked"] >= 2 for v in c.values()))
    for (holder, process), copy in got.items():
        assert copy["diverged"] == 0 and copy["applied"] is not None, (holder, process, copy)
    assert "differs from its leader" not in cluster.stderr()


def test_a_follower_behind_the_leaders_snapshot_gets_its_state(tmp_path: Path) -> None:
    """A member down while its leaders snapshot (past the entries it holds) gets the last
    snapshot's state when it is back (runtime/snapshot_transfer.py), and its copy passes
    the checks that follow."""
    addresses = [f"{HOST}:{p}" for p in free_ports(3)]

    def start(i: int, name: str) -> Daemon:
        peers = ",".join(a for a in addresses if a != addresses[i])
        return spawn(["--listen", addresses[i], "--peers", peers, "--replicas", "3",
                      "--data-dir", str(tmp_path / f"data{i}"), "--snapshot-bytes", "65536"],
                     tmp_path, name)  # fmt: skip

    daemons = [start(i, f"d{i}") for i in range(3)]
    try:
        wait_ready(daemons)
        leader, _, behind = daemons
        behind.proc.send_signal(signal.SIGKILL)
        behind.proc.wait(timeout=10)
        # The tree waits for the member that is down, but the leader logs each request
        # (and times it out): 400 KB of log, several snapshots, a majority up.
        with skueue.client.blocking.connect_blocking(leader.address,
                                                     request_timeout_s=0.5) as q:  # fmt: skip
            for _ in range(8):
                with contextlib.suppress(SkueueError):
                    q.enqueue_many([b"y" * 1000] * 50)
        behind = daemons[2] = start(2, "d2-again")
        wait_ready([behind])
        with skueue.client.blocking.connect_blocking(leader.address) as q:
            for i in range(0, ELEMENTS * 3, 25):  # more snapshots, so more checks
                q.enqueue_many([b"z" * 200 + str(j).encode() for j in range(i, i + 25)])

            def copy_of_leader() -> dict[str, Any]:
                members = {m["address"]: m for m in q.stats()["members"]}
                return members[behind.address]["durable"]["copies"][leader.address]

            copy = wait_for(copy_of_leader, lambda c: c["checked"] >= 1)
        assert copy["diverged"] == 0 and copy["applied"] is not None, copy
        assert "it gets the snapshot" in leader.stderr()
        assert "without a state" not in behind.stderr(), behind.stderr()[-2000:]
    finally:
        assert not stop(daemons)


def test_replicas_are_checked_at_start(tmp_path: Path) -> None:
    # More replicas than members.
    a, b = (f"{HOST}:{p}" for p in free_ports(2))
    code, err = refused(["--listen", a, "--peers", b, "--replicas", "3",
                         "--data-dir", str(tmp_path / "a")], tmp_path, "few")  # fmt: skip
    assert code == 2 and "--replicas 3 needs at least 3 members" in err, err
    # Not a value a group can have, and not in memory.
    code, err = refused(["--listen", a, "--replicas", "2"], tmp_path, "two")
    assert code == 2 and "expected 1, 3 or 5" in err, err
    code, err = refused(["--listen", a, "--replicas", "3", "--in-memory"], tmp_path, "mem")
    assert code == 2 and "--replicas needs a data directory" in err, err


def test_a_data_directory_keeps_its_replicas(tmp_path: Path) -> None:
    (address,) = (f"{HOST}:{p}" for p in free_ports(1))
    data = tmp_path / "d"
    code, err = refused(["--listen", address, "--data-dir", str(data), "--print-config"],
                        tmp_path, "print")  # fmt: skip
    assert code == 0, err
    meta = Meta(address, "n", "queue", (), replicas=3)
    InputLog.open(data, meta, SyncPolicy()).close()  # as a first start with --replicas 3
    code, err = refused(["--listen", address, "--data-dir", str(data)], tmp_path, "again")
    assert code != 0 and "was started with --replicas 3" in err, err


def test_a_member_whose_group_lost_its_majority_is_not_ready_until_it_leads_again(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(3, extra_args=("--replicas", "3", *METRICS))
    watched, *others = cluster.daemons
    probe = metrics_address(watched)
    assert get(probe, "/readyz")[0] == 200
    for d in others:
        d.proc.send_signal(signal.SIGSTOP)
    try:
        # CheckQuorum: no majority heard for a failure timeout, and it steps down.
        status, body = wait_for(lambda: get(probe, "/readyz"), lambda r: r[0] == 503)
        assert "replication group does not lead" in body, body
        # A request is told so once it has waited its timeout, retryably (nothing of it
        # was logged), not left to the client's own timeout.
        with skueue.client.blocking.connect_blocking(watched.address,
                                                     request_timeout_s=1.0) as q:  # fmt: skip
            began = time.monotonic()
            with pytest.raises(NodeUnavailable, match="replication group does not lead"):
                q.enqueue(b"while no majority answers")
            assert time.monotonic() - began < 5.0
    finally:
        for d in others:
            d.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: get(probe, "/readyz"), lambda r: r[0] == 200)  # elected again
    with skueue.client.blocking.connect_blocking(watched.address) as q:
        q.enqueue(b"after")
        assert q.dequeue() == b"after"


def wait_for(read: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 30.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        got = read()
        if done(got):
            return got
        assert time.monotonic() < deadline, f"still {got!r:.300} after {timeout_s} s"
        time.sleep(0.1)
