"""Membership as a new user meets it (issue 8, items 1-6), on real daemons.

- Process ids are not addresses: daemons started with ``--id`` can be joined, and the
  cluster keeps serving.
- ``skueue leave`` of the last member that holds elements is refused; an empty last
  member may leave.
- A member that stops without leaving makes requests fail in bounded time with an
  error that names it, and ``skueue stats`` names it too.
- ``skueue stats`` counts members right after joins and leaves, and its totals stay
  whole when a member leaves.
- A daemon listed in its own ``--peers`` starts.
- Clients of a leaving daemon get a retryable error; the daemon finishes its leave and
  exits 0, and no acknowledged element is lost.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

import skueue
from skueue.client.errors import SkueueError
from tests.e2e.daemons import (
    HOST,
    Cluster,
    Daemon,
    free_ports,
    refused,
    spawn,
    stop,
    wait_ready,
)
from tests.e2e.test_cli import skueue as run_skueue
from tests.e2e.test_metrics import get, metrics_address

DEADLINE_S = 60.0


def start_named(tmp_path: Path, names: list[str], started: list[Daemon]) -> list[Daemon]:
    """A static cluster whose daemons have ids that are not their addresses."""
    addresses = [f"{HOST}:{p}" for p in free_ports(len(names))]
    daemons = []
    for i, (name, address) in enumerate(zip(names, addresses, strict=True)):
        args = ["--listen", address, "--id", name]
        peers = ",".join(a for j, a in enumerate(addresses) if j != i)
        if peers:
            args += ["--peers", peers]
        daemons.append(spawn(args, tmp_path, name))
    started.extend(daemons)
    wait_ready(daemons)
    return daemons


@pytest.fixture
def started() -> Callable[[], list[Daemon]]:
    daemons: list[Daemon] = []
    yield lambda: daemons  # type: ignore[misc]
    problems = stop([d for d in daemons if d.alive()])
    assert not problems, problems


def test_custom_ids_join_and_keep_serving(
    tmp_path: Path, started: Callable[[], list[Daemon]]
) -> None:
    """Item 1: a join between daemons with custom ids goes through, and every member
    serves afterwards (it used to hang and freeze the cluster)."""
    a, b = start_named(tmp_path, ["skueue-a", "skueue-b"], started())
    (c,) = start_named(tmp_path, ["skueue-c"], started())

    async def main() -> None:
        with trio.fail_after(DEADLINE_S):
            async with skueue.connect(c.address) as q:
                await q.join(a.address)
            for i, d in enumerate((a, b, c)):
                async with skueue.connect(d.address) as q:
                    await q.enqueue(f"v{i}".encode())
            got = []
            for d in (c, b, a):
                async with skueue.connect(d.address) as q:
                    got.append(await q.dequeue())
            assert sorted(got) == [b"v0", b"v1", b"v2"]
            for d in (a, b, c):
                async with skueue.connect(d.address) as q:
                    stats = await q.stats()
                names = sorted(m["process"] for m in stats["members"])
                assert names == ["skueue-a", "skueue-b", "skueue-c"], (d.address, stats)
                assert stats["processes"] == 3 and stats["unreachable"] == []

    trio.run(main)
    assert "no link to process" not in "".join(d.stderr() for d in (a, b, c))


def test_the_last_member_may_not_leave_with_elements(
    skueued_cluster: Callable[..., Cluster],
) -> None:
    """Item 2: refused with one line while it holds elements; allowed once empty."""
    (daemon,) = skueued_cluster(1).daemons

    async def main() -> None:
        with trio.fail_after(DEADLINE_S):
            async with skueue.connect(daemon.address) as q:
                await q.enqueue(b"precious")
                with pytest.raises(SkueueError, match="last member.*holds 1 elements"):
                    await q.leave()
                assert await q.dequeue() == b"precious"
                await q.leave()

    trio.run(main)
    assert daemon.proc.wait(timeout=10) == 0


def test_a_stopped_member_is_named_in_errors_and_stats(
    skueued_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """Item 3: after a member stops without leaving, a request fails in bounded time
    naming it, stats names it as unreachable, and the member restarted without its
    state (an in-memory daemon) is refused with one line."""
    cluster = skueued_cluster(3, extra_args=("--in-memory",))
    victim, survivor = cluster.daemons[2], cluster.daemons[0]

    async def main() -> None:
        async with skueue.connect(survivor.address) as q:
            await q.enqueue(b"before")
        victim.proc.send_signal(signal.SIGTERM)
        assert victim.proc.wait(timeout=10) == 0
        with trio.fail_after(30):
            async with skueue.connect(survivor.address, request_timeout_s=2.0) as q:
                with pytest.raises(SkueueError) as caught:
                    for i in range(50):  # some requests may still find a path; one cannot
                        await q.enqueue(f"after-{i}".encode())
                assert victim.address in str(caught.value), str(caught.value)
                stats = await q.stats()
                # A leave needs every member: refused at once rather than hanging.
                with pytest.raises(SkueueError, match="cannot leave while members"):
                    await q.leave()
        assert victim.address in stats["unreachable"], stats
        assert stats["processes"] == 3

    trio.run(main)
    # Restarted with the same flags (systemd's Restart=on-failure), it has lost its
    # state: the members refuse it with one line instead of serving a corrupt queue.
    again = tmp_path / "restart.stderr"
    with again.open("wb") as err:
        proc = subprocess.Popen(victim.proc.args, stdout=subprocess.DEVNULL, stderr=err)
    try:
        assert proc.wait(timeout=40) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = again.read_text()
    assert "restarted without its state" in said and "Traceback" not in said, said


def test_stats_after_joins_and_a_leave(
    skueued_cluster: Callable[..., Cluster], tmp_path: Path, started: Callable[[], list[Daemon]]
) -> None:
    """Item 4: joiners count each other; a departed member is no longer counted; the
    totals keep the departed member's counters."""
    cluster = skueued_cluster(2)
    joiners = [
        spawn(["--listen", f"{HOST}:0", "--join", cluster.addresses[0]], tmp_path, f"j{i}")
        for i in range(2)
    ]
    started().extend(joiners)
    wait_ready(joiners)
    everyone = [*cluster.addresses, *(j.address for j in joiners)]

    async def stats_of(address: str) -> dict:
        async with skueue.connect(address) as q:
            return await q.stats()

    async def settled_stats_of(address: str) -> dict:
        """Stats once the anchor is seated: right after the joins, the update phase that
        counted them may still be handing the anchor over, and then no member knows the
        size for a moment (it says None, not a wrong number)."""
        while True:
            s = await stats_of(address)
            if s["size"] is not None:
                return s
            await trio.sleep(0.05)

    async def main() -> None:
        with trio.fail_after(DEADLINE_S):
            for address in everyone:
                s = await settled_stats_of(address)
                assert s["processes"] == 4 and s["unreachable"] == [], (address, s)
            # The leaver takes inserts of its own with it; the totals must keep them.
            async with skueue.connect(joiners[1].address) as q:
                await q.enqueue_many([b"x"] * 30)
                await q.leave()
            assert joiners[1].proc.wait(timeout=20) == 0
            for address in everyone[:3]:
                s = await stats_of(address)
                assert s["processes"] == 3, (address, s)
                assert joiners[1].address not in {m["process"] for m in s["members"]}
                assert s["size"] == 30 and s["totals"]["inserted"] >= 30, (address, s)

    trio.run(main)


def test_own_address_in_peers_is_accepted(
    tmp_path: Path, started: Callable[[], list[Daemon]]
) -> None:
    """Item 5: a daemon listed in its own --peers drops itself from the list."""
    addresses = [f"{HOST}:{p}" for p in free_ports(2)]
    everyone = ",".join(addresses)
    daemons = [
        spawn(["--listen", a, "--peers", everyone], tmp_path, f"d{i}")
        for i, a in enumerate(addresses)
    ]
    started().extend(daemons)
    wait_ready(daemons)

    async def main() -> None:
        with trio.fail_after(DEADLINE_S):
            async with skueue.connect(addresses[0]) as q:
                await q.enqueue(b"one")
                assert (await q.stats())["processes"] == 2
            async with skueue.connect(addresses[1]) as q:
                assert await q.dequeue() == b"one"

    trio.run(main)


def test_clients_of_a_leaving_daemon(skueued_cluster: Callable[..., Cluster]) -> None:
    """Item 6: requests sent to a daemon that is leaving are refused (retryably), the
    daemon finishes its leave and exits 0, and every acknowledged element survives."""
    cluster = skueued_cluster(4)
    leaver = cluster.daemons[3]
    acknowledged: list[bytes] = []
    refused: list[str] = []

    async def client(name: str) -> None:
        async with skueue.connect(leaver.address) as q:
            for i in range(10_000):
                try:
                    await q.enqueue(f"{name}-{i}".encode())
                except SkueueError as e:
                    refused.append(str(e))
                    return
                acknowledged.append(f"{name}-{i}".encode())

    async def main() -> None:
        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as n:
                for k in range(4):
                    n.start_soon(client, f"c{k}")
                await trio.sleep(0.5)
                async with skueue.connect(leaver.address) as admin:
                    await admin.leave()
            drained: list[bytes] = []
            async with skueue.connect(cluster.addresses[0]) as q:
                while True:
                    got = await q.dequeue_many(500)
                    drained += got
                    if len(got) < 500:
                        break
        assert sorted(drained) == sorted(acknowledged)

    trio.run(main)
    assert leaver.proc.wait(timeout=20) == 0, leaver.stderr()[-2000:]
    assert refused and all("leaving" in r or "closed" in r for r in refused), refused[:3]
    assert "Traceback" not in leaver.stderr()


def test_start_up_says_which_peers_it_waits_for(
    tmp_path: Path, started: Callable[[], list[Daemon]]
) -> None:
    """Item 18 (daemon side): a daemon waiting for its peers says whom it waits for
    instead of staying silent for up to 30 s."""
    own, missing = (f"{HOST}:{p}" for p in free_ports(2))
    daemon = spawn(["--listen", own, "--peers", missing], tmp_path, "waiting")
    started().append(daemon)
    for _ in range(200):  # up to 10 s; the first report comes after 5 s
        if "waiting for peers" in daemon.stderr():
            break
        time.sleep(0.05)
    said = daemon.stderr()
    assert "waiting for peers" in said and missing in said, said
    assert daemon.alive()


def test_the_last_member_leaves_with_an_answer_and_for_good(tmp_path: Path) -> None:
    """``skueue leave`` of an empty last member gets its answer (exit 0) before the daemon
    exits, and its data directory is marked as left, as every member's that left: a
    restart from it is refused, not a member again."""
    (port,) = free_ports(1)
    args = ["--listen", f"{HOST}:{port}", "--data-dir", str(tmp_path / "data")]
    daemon = spawn(args, tmp_path, "last")
    try:
        wait_ready([daemon])
        left = subprocess.run(
            [sys.executable, "-m", "skueue.cli.skueue", "leave", "--node", daemon.address],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert left.returncode == 0, left.stderr
        assert daemon.proc.wait(timeout=10) == 0
        code, err = refused(args, tmp_path, "again")
        assert code == 1 and "left its cluster" in err, err
    finally:
        stop([d for d in (daemon,) if d.alive()])


def test_a_fresh_daemon_at_the_address_of_one_that_left_is_told_to_take_another_id(
    skueued_cluster: Callable[..., Cluster], tmp_path: Path, started: Callable[[], list[Daemon]]
) -> None:
    """A member left; a new daemon started at its address joins under the same default
    id (its address).  It is refused with the reason and the remedy, not "restarted
    without its state"; with another ``--id`` it joins and serves."""
    cluster = skueued_cluster(2)
    (port,) = free_ports(1)
    address = f"{HOST}:{port}"
    first = spawn(["--listen", address, "--join", cluster.addresses[0],
                   "--data-dir", str(tmp_path / "first")], tmp_path, "first")  # fmt: skip
    started().append(first)
    wait_ready([first])
    with skueue.connect_blocking(address) as q:
        q.enqueue_many([b"a", b"b"])
        q.leave()
    assert first.proc.wait(timeout=30) == 0
    same_id = spawn(["--listen", address, "--join", cluster.addresses[0],
                     "--data-dir", str(tmp_path / "second")], tmp_path, "second")  # fmt: skip
    started().append(same_id)
    assert same_id.proc.wait(timeout=30) == 1
    said = same_id.stderr()
    assert "left this cluster" in said and "another --id" in said, said[-2000:]
    assert "Traceback" not in said
    other_id = spawn(["--listen", address, "--join", cluster.addresses[0], "--id", "again",
                      "--data-dir", str(tmp_path / "third")], tmp_path, "third")  # fmt: skip
    started().append(other_id)
    wait_ready([other_id])
    with skueue.connect_blocking(address) as q:
        q.enqueue(b"c")
    with skueue.connect_blocking(cluster.addresses[1]) as q:
        assert sorted(q.dequeue_many(10)) == [b"a", b"b", b"c"]


def test_stats_say_they_are_partial_and_whose_figures_are_missing(
    skueued_cluster: Callable[..., Cluster],
) -> None:
    """Issue 28, item 7: with a member down, its counts are missing from every total:
    ``skueue stats`` (text and --json, whole and for one queue) says the figures are
    partial and names the member, instead of showing lower numbers as if complete."""
    cluster = skueued_cluster(3, extra_args=("--in-memory",))
    victim = cluster.daemons[2]
    for i, address in enumerate(cluster.addresses):
        with skueue.connect_blocking(address) as q:
            q.enqueue_many([b"%d" % i] * 3, queue="jobs")
    complete = json.loads(run_skueue("stats", "--json", "--node", cluster.addresses[0]).stdout)
    assert complete["partial"] is False and complete["missing"] == [], complete
    assert complete["queues"]["jobs"]["partial"] is False
    assert "partial" not in run_skueue("stats", "--node", cluster.addresses[0]).stdout.decode()

    victim.proc.send_signal(signal.SIGTERM)
    assert victim.proc.wait(timeout=10) == 0
    node = ("--node", cluster.addresses[0])
    whole = json.loads(run_skueue("stats", "--json", *node).stdout)
    assert whole["partial"] is True and whole["missing"] == [victim.address], whole
    jobs = json.loads(run_skueue("stats", "jobs", "--json", *node).stdout)
    assert jobs["partial"] is True and jobs["missing"] == [victim.address], jobs
    text = run_skueue("stats", *node).stdout.decode()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("partial:")]
    assert victim.address in line and "totals" in line, text
    one = run_skueue("stats", "jobs", *node).stdout.decode()
    assert any(
        ln.strip().startswith("partial:") and victim.address in ln for ln in one.splitlines()
    ), one


def test_a_daemon_with_peers_of_a_cluster_it_is_not_in_is_refused_leaving_no_trace(
    skueued_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """Issue 28, item 2: ``--peers`` naming a running cluster the daemon is not a member
    of is refused at once, with one line that says to use ``--join``; the members add it
    to nothing, so their stats, readiness and health stay as they were, and a second try
    (another port) gets the same answer."""
    cluster = skueued_cluster(2, extra_args=("--in-memory", "--metrics", f"{HOST}:0"))
    seed = cluster.addresses[0]
    for attempt, port in enumerate(free_ports(2)):
        began = time.monotonic()
        name = f"stranger{attempt}"
        args = ["--listen", f"{HOST}:{port}", "--peers", seed, "--in-memory"]
        code, err = refused(args, tmp_path, name)
        assert time.monotonic() - began < 10, err
        assert code == 1, err
        last = err.strip().splitlines()[-1]
        assert last.startswith("skueued: error: ") and "not a member" in last, err
        assert f"--join {seed}" in last and "restarted without its state" not in err, err
        assert "ready" not in (tmp_path / f"{name}.stdout").read_text()
    for d in cluster.daemons:
        with skueue.connect_blocking(d.address) as q:
            stats = q.stats()
        assert stats["processes"] == 2 and stats["unreachable"] == [], stats
        assert run_skueue("health", "--node", d.address).returncode == 0
        assert get(metrics_address(d), "/readyz")[0] == 200
    assert "refused a daemon that is not a member" in cluster.daemons[0].stderr()
    with skueue.connect_blocking(cluster.addresses[1]) as q:
        q.enqueue(b"still one cluster")
        assert q.dequeue() == b"still one cluster"


def test_a_stranger_that_met_a_forming_cluster_is_refused_once_the_members_know(
    tmp_path: Path, started: Callable[[], list[Daemon]]
) -> None:
    """A member still meeting its own peers cannot tell a stranger yet: it answers, and
    refuses the stranger as soon as its member list is complete, before the stranger's
    frames change anything; the stranger stops with the same line."""
    first, second, stranger = (f"{HOST}:{p}" for p in free_ports(3))
    a = spawn(["--listen", first, "--peers", second, "--in-memory"], tmp_path, "a")
    started().append(a)
    time.sleep(0.5)  # a waits for its peer
    x = spawn(["--listen", stranger, "--peers", first, "--in-memory"], tmp_path, "x")
    started().append(x)
    time.sleep(1.0)  # x met a, which could not tell yet
    b = spawn(["--listen", second, "--peers", first, "--in-memory"], tmp_path, "b")
    started().append(b)
    wait_ready([a, b])
    assert x.proc.wait(timeout=20) == 1
    last = x.stderr().strip().splitlines()[-1]
    assert "not a member" in last and f"--join {first}" in last, x.stderr()
    with skueue.connect_blocking(first) as q:
        q.enqueue(b"two members")
        stats = q.stats()
    assert stats["processes"] == 2 and stats["unreachable"] == [], stats
    with skueue.connect_blocking(second) as q:
        assert q.dequeue() == b"two members"
