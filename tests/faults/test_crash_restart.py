"""kill -9 and restart, under load: not one acknowledged operation lost or applied twice
(issue 11: durability, Jepsen-style).

Four real ``skueued`` processes with ``--data-dir`` (the write-ahead log of inputs, fsync
per step), 8 clients with a mixed workload (they reconnect and send their waiting
requests again).  Every 1 to 3 s one daemon is killed with SIGKILL and started again with
the same data directory, each of them in turn (so the anchor's process too).  Snapshots
are small (64 KiB of log), so each restart restores one and replays the log after it.  Then the
faults stop, a drain empties the queue, and the history must pass the checkers with
every element removed exactly once: nothing lost, nothing twice, nothing invented.

A second test kills every daemon at once (a power cut, as far as the processes go) and
restarts them all.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import trio

import skueue
import skueue.client.blocking
from skueue.cluster.loadgen import LoadConfig
from skueue.runtime.limits import Limits
from tests.e2e.daemons import (
    HOST,
    START_ATTEMPTS,
    Daemon,
    StartFailed,
    free_ports,
    spawn,
    stop,
    wait_ready,
)
from tests.e2e.oracle import assert_history_ok
from tests.faults.workload import DAEMONS, LONG, SEED, fault_load, under_faults

OPS = 100_000 if LONG else 12_000
KILLS = 20 if LONG else 4
KILL_GAP_S = (1.0, 3.0)
TIMEOUT_S = 900.0 if LONG else 300.0


class Cluster:
    def __init__(
        self, tmp_path: Path, replicas: int = 1, daemons: int = DAEMONS, *options: str
    ) -> None:
        """``daemons`` members with ``--replicas replicas`` and ``options``."""
        self.tmp_path = tmp_path
        self.replicas = replicas  # skueued --replicas
        self.options = options
        self.addresses = [f"{HOST}:{p}" for p in free_ports(daemons)]
        self.daemons: list[Daemon] = []
        self.all: list[Daemon] = []
        self.starts = 0

    def args(self, i: int) -> list[str]:
        peers = ",".join(a for j, a in enumerate(self.addresses) if j != i)
        # Small snapshots: every restart restores one and replays the log after it (the
        # first kill comes 1 to 3 s in, when a replicated daemon has logged some 20 KiB).
        return ["--listen", self.addresses[i], "--peers", peers, "--log-level", "info",
                "--data-dir", str(self.tmp_path / f"data{i}"), "--snapshot-bytes", "16384",
                "--replicas", str(self.replicas), *self.options]

    def spawn(self, i: int, *extra: str) -> Daemon:
        self.starts += 1
        daemon = spawn([*self.args(i), *extra], self.tmp_path, f"d{i}-{self.starts}")
        self.all.append(daemon)
        return daemon

    def start(self) -> None:
        """Start every member; on a port taken between :func:`free_ports` and the bind
        (another test's daemon or stand-in), start afresh on new ports, as
        :func:`tests.e2e.daemons.start_cluster` does."""
        for attempt in range(START_ATTEMPTS):
            self.daemons = [self.spawn(i) for i in range(len(self.addresses))]
            try:
                wait_ready(self.daemons)
                return
            except StartFailed as e:
                stop(self.daemons)
                if not e.port_in_use or attempt == START_ATTEMPTS - 1:
                    raise AssertionError(str(e)) from None
            for i in range(len(self.addresses)):  # the data directories name the old ports
                shutil.rmtree(self.tmp_path / f"data{i}", ignore_errors=True)
            self.addresses = [f"{HOST}:{p}" for p in free_ports(len(self.addresses))]

    def kill(self, i: int) -> None:
        self.daemons[i].proc.send_signal(signal.SIGKILL)
        self.daemons[i].proc.wait(timeout=10)

    def restart(self, i: int, *extra: str) -> None:
        self.daemons[i] = self.spawn(i, *extra)
        wait_ready([self.daemons[i]])

    def lose_disk(self, i: int) -> None:
        """The host of daemon ``i`` is gone with its disk (after :meth:`kill`)."""
        shutil.rmtree(self.tmp_path / f"data{i}")

    def logs(self) -> str:
        return "".join(d.stderr() for d in self.all)


def config(cluster: Cluster, ops: int) -> LoadConfig:
    return fault_load(cluster.addresses, ops)


@pytest.mark.trio
@pytest.mark.parametrize("replicas", [1, 3])
async def test_kill_9_and_restart_one_daemon_at_a_time(tmp_path: Path, replicas: int) -> None:
    """With ``--replicas 3`` each step's effects wait for a follower's ack, and each
    restarted daemon waits for its followers' votes before it serves again."""
    print(f"replay with SKUEUE_FAULT_SEED={SEED}")
    rng = random.Random(SEED)
    cluster = Cluster(tmp_path, replicas)
    kills: list[int] = []

    async def faults() -> None:
        order = list(range(DAEMONS))
        rng.shuffle(order)
        for k in range(KILLS):
            await trio.sleep(rng.uniform(*KILL_GAP_S))
            victim = order[k % DAEMONS]
            cluster.kill(victim)
            kills.append(victim)
            await trio.sleep(rng.uniform(0.05, 0.5))
            await trio.to_thread.run_sync(cluster.restart, victim)

    try:
        cluster.start()
        load = config(cluster, OPS)
        result = await under_faults(load, faults, TIMEOUT_S)
        print(f"{len(kills)} kills {kills}; {len(result.records)} operations")
        assert len(kills) >= min(KILLS, DAEMONS), "the workload ended before the faults did"
        assert_history_ok(result, load)
        logs = cluster.logs()
        assert "bug:" not in logs
        assert "restored the snapshot" in logs  # the restarts went through snapshots
        await check_terms(cluster, kills)
    finally:
        problems = stop(cluster.daemons)
        assert not problems, problems


@pytest.mark.trio
async def test_daemons_lost_with_their_disks_come_back_from_the_copies(tmp_path: Path) -> None:
    """With ``--replicas 3`` a daemon killed and its data directory deleted (its host lost
    for good) is started again at its address with ``--restore-from-copies``, each in
    turn once the last one's copies are rebuilt: its process comes back from the copies
    the others keep (runtime/restore.py), and nothing acknowledged is lost or applied
    twice.  The cluster stops while it is
    down (no failover yet): requests then time out and count as indeterminate."""
    print(f"replay with SKUEUE_FAULT_SEED={SEED}")
    rng = random.Random(SEED)
    cluster = Cluster(tmp_path, 3)
    losses: list[int] = []

    async def faults() -> None:
        order = list(range(DAEMONS))
        rng.shuffle(order)
        for k in range(KILLS // 2):
            await trio.sleep(rng.uniform(*KILL_GAP_S))
            victim = order[k % DAEMONS]
            cluster.kill(victim)
            cluster.lose_disk(victim)
            losses.append(victim)
            await trio.sleep(rng.uniform(0.05, 0.5))
            await trio.to_thread.run_sync(cluster.restart, victim, "--restore-from-copies")
            # Re-replication in between (the issue's "two hosts lost one after the
            # other"): the restored member's own copies of the others are rebuilt, or
            # the next restore could be refused (a copy being rebuilt vouches for nothing).
            await copies_caught_up(cluster)

    try:
        cluster.start()
        load = config(cluster, OPS // 2)
        result = await under_faults(load, faults, TIMEOUT_S)
        print(f"{len(losses)} daemons lost with their disks {losses}; "
              f"{len(result.records)} operations")  # fmt: skip
        assert len(losses) == KILLS // 2, "the workload ended before the faults did"
        assert_history_ok(result, load)
        logs = cluster.logs()
        assert "bug:" not in logs
        assert logs.count("restored from the copy; starting") == len(losses), logs[-3000:]
        rebuilt = logs.count("a copy of another process's log caught up with its leader")
        assert rebuilt == len(losses) * (cluster.replicas - 1), rebuilt
    finally:
        problems = stop(cluster.daemons)
        assert not problems, problems


async def copies_caught_up(cluster: Cluster, timeout_s: float = 30.0) -> None:
    """Every member keeps a copy of each group it follows again, caught up with its
    leader and with a state that applied something: the restored members' copies
    started empty (being rebuilt, applied 0) and were brought back by their leaders."""
    with trio.fail_after(timeout_s):
        while True:
            async with skueue.connect(cluster.addresses[0]) as q:
                stats = await q.stats()
            copies = [c for m in stats["members"] for c in m["durable"]["copies"].values()]
            if len(copies) == DAEMONS * (cluster.replicas - 1) and all(
                not c["rebuilding"] and (c["applied"] or 0) > 0 for c in copies
            ):
                return
            await trio.sleep(0.5)


async def check_terms(cluster: Cluster, kills: list[int]) -> None:
    """Each life of a daemon leads its process's replication group in a term of its own
    (docs/replication.md §11, stage 2a): the term is the number of its starts, and
    ``skueue stats`` says so."""
    async with skueue.connect(cluster.addresses[0]) as q:
        stats = await q.stats()
    terms = {m["address"]: m["durable"]["term"] for m in stats["members"]}
    expected = {a: 1 + kills.count(i) for i, a in enumerate(cluster.addresses)}
    if cluster.replicas == 1:
        assert terms == expected, (terms, expected)
    else:  # an election may take more than one term (a split vote, a lost message)
        assert all(terms[a] >= expected[a] for a in expected), (terms, expected)
    checked = 0
    for m in stats["members"]:
        voters = m["durable"]["replicas"]
        assert len(voters) == cluster.replicas and m["process"] in voters, m["durable"]
        # The copies it keeps of the others apply their logs, checked at each of their
        # leaders' snapshots ("bug:" in the logs would say one differed).
        copies = m["durable"]["copies"]
        assert len(copies) == cluster.replicas - 1, copies
        checked += sum(c["checked"] for c in copies.values())
    assert cluster.replicas == 1 or checked > 0, "no copy was checked against its leader"


@pytest.mark.trio
async def test_kill_9_of_every_daemon_at_once_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    cluster = Cluster(tmp_path)

    async def faults() -> None:
        await trio.sleep(rng.uniform(*KILL_GAP_S))
        for i in range(DAEMONS):
            cluster.kill(i)
        for i in range(DAEMONS):
            cluster.daemons[i] = cluster.spawn(i)
        await trio.to_thread.run_sync(wait_ready, cluster.daemons)

    try:
        cluster.start()
        load = config(cluster, OPS // 2)
        result = await under_faults(load, faults, TIMEOUT_S)
        assert_history_ok(result, load)
        assert "bug:" not in cluster.logs()
    finally:
        problems = stop(cluster.daemons)
        assert not problems, problems


@pytest.mark.trio
async def test_a_member_that_joined_comes_back_after_kill_9(tmp_path: Path) -> None:
    """A daemon that joined with --join is durable too: killed and started again with the
    same flags, it rebuilds itself from its directory (it does not ask its seed again)."""
    rng = random.Random(SEED)
    cluster = Cluster(tmp_path)
    cluster.addresses = cluster.addresses[:3]
    static = [cluster.addresses[0], cluster.addresses[1]]
    joiner_args = ["--listen", cluster.addresses[2], "--join", static[0], "--log-level", "info",
                   "--data-dir", str(tmp_path / "data2"), "--snapshot-bytes", "65536"]

    def spawn_joiner() -> Daemon:
        cluster.starts += 1
        daemon = spawn(joiner_args, tmp_path, f"joiner-{cluster.starts}")
        cluster.all.append(daemon)
        return daemon

    kills: list[int] = []

    async def faults() -> None:
        for _ in range(2):
            await trio.sleep(rng.uniform(*KILL_GAP_S))
            cluster.kill(2)
            kills.append(2)
            cluster.daemons[2] = spawn_joiner()
            await trio.to_thread.run_sync(wait_ready, [cluster.daemons[2]])

    try:
        cluster.daemons = []
        for i in range(2):
            peers = static[1 - i]
            cluster.daemons.append(spawn(
                ["--listen", static[i], "--peers", peers, "--log-level", "warning",
                 "--data-dir", str(tmp_path / f"data{i}")], tmp_path, f"static{i}"))
        wait_ready(cluster.daemons)
        cluster.daemons.append(spawn_joiner())
        wait_ready([cluster.daemons[2]])
        load = config(cluster, OPS)
        result = await under_faults(load, faults, TIMEOUT_S)
        print(f"the joined member was killed {len(kills)} times; {len(result.records)} ops")
        assert kills, "the workload ended before the first kill"
        assert_history_ok(result, load)
        logs = cluster.logs()
        assert "bug:" not in logs and "replayed the input log" in logs
    finally:
        problems = stop(cluster.daemons)
        assert not problems, problems


def test_a_static_member_restarts_after_another_member_left(tmp_path: Path) -> None:
    """A static member comes back from its data directory with the flags it always had,
    although one of the peers those flags name has left the cluster meanwhile: it builds
    its ring from the directory and replays its log, waiting for no peer (before, it
    waited ``connect_timeout_s`` for the departed one and exited).  Nothing is lost."""
    cluster = Cluster(tmp_path)
    values = [f"e{i}".encode() for i in range(300)]
    try:
        cluster.start()
        with skueue.client.blocking.connect_blocking(cluster.addresses[0]) as q:
            q.enqueue_many(values)
        with skueue.client.blocking.connect_blocking(cluster.addresses[DAEMONS - 1]) as q:
            q.leave()
        cluster.daemons[DAEMONS - 1].proc.wait(timeout=60)
        for victim in (0, 1):
            cluster.kill(victim)
            began = time.monotonic()
            cluster.restart(victim)  # the same --peers, the departed member's among them
            took = time.monotonic() - began
            assert took < Limits().connect_timeout_s, f"restart {victim} took {took:.1f} s"
        got: list[bytes] = []
        with skueue.client.blocking.connect_blocking(cluster.addresses[1]) as q:
            while len(got) < len(values):
                batch = q.dequeue_many(100, wait=10)
                assert batch, f"{len(values) - len(got)} elements never came back"
                got.extend(batch)
            assert q.dequeue() is None
        assert sorted(got) == sorted(values)
        assert "bug:" not in cluster.logs()
    finally:
        problems = stop([d for d in cluster.daemons if d.alive()])
        assert not problems, problems


@pytest.mark.parametrize("seed_meta", ["as written", "without incarnations"])
def test_a_joined_member_back_without_its_state_is_refused_after_its_seed_restarted(
    tmp_path: Path, seed_meta: str
) -> None:
    """A member that joined, killed and started again with an empty data directory, stops
    with one line, also when its seed restarted in between (so it met the member's old
    incarnation only in an earlier life).  Before, the seed took the new incarnation for
    the old one and counted frames it never sent, and the member looped on "ack of frame
    N, but only M were sent" for ever.  The seed's data directory keeps the nonces it met,
    so it refuses the member; one that does not have them (written before they were
    kept) answers with a count of frames above what the member sent, and the member stops
    on that."""
    s0, s1, joined = (f"{HOST}:{p}" for p in free_ports(3))
    common = ["--log-level", "info", "--snapshot-bytes", "65536"]
    static_args = [
        ["--listen", s0, "--peers", s1, "--data-dir", str(tmp_path / "s0"), *common],
        ["--listen", s1, "--peers", s0, "--data-dir", str(tmp_path / "s1"), *common],
    ]
    joiner_args = ["--listen", joined, "--join", s0, "--data-dir", str(tmp_path / "j"), *common]
    daemons = [spawn(a, tmp_path, f"s{i}") for i, a in enumerate(static_args)]
    try:
        wait_ready(daemons)
        daemons.append(spawn(joiner_args, tmp_path, "joiner"))
        wait_ready([daemons[2]])
        with skueue.client.blocking.connect_blocking(joined) as q:  # its frames reach both
            q.enqueue_many([f"e{i}".encode() for i in range(300)])
        for victim in (2, 0):  # the member goes down, then its seed restarts
            daemons[victim].proc.send_signal(signal.SIGKILL)
            daemons[victim].proc.wait(timeout=10)
        if seed_meta == "without incarnations":
            meta = tmp_path / "s0" / "meta.json"
            meta.write_text(json.dumps({**json.loads(meta.read_text()), "incarnations": []}))
        daemons[0] = spawn(static_args[0], tmp_path, "s0-again")
        wait_ready([daemons[0]])
        shutil.rmtree(tmp_path / "j")
        again = daemons[2] = spawn(joiner_args, tmp_path, "joiner-empty")
        try:
            code = again.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the stateless member neither stopped nor was refused:\n"
                        f"{again.stderr()[-3000:]}")  # fmt: skip
        said = again.stderr()
        why = {"as written": "refused this daemon", "without incarnations": "has handled"}
        assert code == 1 and "restarted without its state" in said, said[-3000:]
        assert why[seed_meta] in said, said[-3000:]
        assert "Traceback" not in said, said[-3000:]
        assert daemons[0].alive() and daemons[1].alive()
    finally:
        problems = stop([d for d in daemons if d.alive()])
        assert not problems, problems
