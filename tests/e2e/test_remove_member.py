"""``skueue remove-member`` on real daemons (issue 28, item 2).

A joiner that dies right after it asked to join (killed, or unreachable from the cluster:
a wrong ``--advertise``) is placed at its responsible node, which then waits for its
batches forever: the whole cluster stalls, ``skueue stats`` counts it, health and
``/readyz`` say it is unreachable, for good.  It holds nothing, so ``skueue remove-member``
forgets it: the cluster serves again, the counts and probes are clean, and the id is
refused if it comes back.  A member of the ring is refused with the reason and what can
be done instead; so is one that still answers, and bad arguments are usage errors.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import skueue.client.blocking
from skueue.client.errors import RequestRejected, RequestTimeout
from skueue.core.effects import Send
from skueue.core.ops import Structure
from skueue.core.process import Process
from skueue.overlay.labels import Kind, node_ref
from skueue.runtime.network.handshake import PEER_PROTOCOL
from skueue.runtime.security.peer_auth import generate_key
from skueue.wire.framing import FrameDecoder, pack, pack_many
from skueue.wire.peer import encode_message
from tests.e2e.daemons import (
    HOST,
    Cluster,
    Daemon,
    free_ports,
    skueued_command,
    spawn,
    stop,
    wait_ready,
)
from tests.e2e.test_cli import environment, skueue_command
from tests.e2e.test_cli import skueue as run_skueue
from tests.e2e.test_metrics import get, metrics_address

StartCluster = Callable[..., Cluster]
WAIT_S = 30.0


def dead_joiner(seed: str, seed_id: str, joiner_id: str, advertised: str) -> None:
    """Ask to join through ``seed`` as ``joiner_id`` (the three join requests a joining
    process sends, on a peer link), then vanish: nothing listens at ``advertised``."""
    joining = Process.create_joining(joiner_id, node_ref(seed_id, Kind.LEFT), Structure.QUEUE)
    sends = [e for e in joining.join() if isinstance(e, Send)]
    frames = [["msg", int(s.to.kind), encode_message(s.message)] for s in sends]
    host, port = seed.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        hello = ["hello-peer", joiner_id, advertised, os.urandom(8).hex()]
        s.sendall(pack([*hello, {"protocol": PEER_PROTOCOL}]))
        decoder, got = FrameDecoder(1 << 20), []
        while not got:
            data = s.recv(65536)
            assert data, "the seed closed the link"
            got = decoder.feed(data)
        assert got[0][0] == "hello-peer", got
        s.sendall(pack(["seq", 1, len(frames)]) + pack_many(frames))
        s.settimeout(5)
        acked = b""
        while not acked:  # the seed acknowledges once it handled them
            acked = s.recv(65536)


def stats(address: str) -> dict[str, Any]:
    with skueue.client.blocking.connect_blocking(address) as q:
        return q.stats()


def test_a_dead_joiner_stalls_the_cluster_until_it_is_removed(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    cluster = skueued_cluster(2, extra_args=("--in-memory", "--metrics", f"{HOST}:0"))
    seed = cluster.addresses[0]
    (nobody,) = free_ports(1)
    dead = f"{HOST}:{nobody}"
    dead_joiner(seed, seed, dead, dead)
    deadline = time.monotonic() + WAIT_S
    while dead not in stats(seed)["unreachable"]:
        assert time.monotonic() < deadline, stats(seed)
        time.sleep(0.2)
    # The cluster waits for the dead joiner's batches: nothing goes through, for good.
    with (
        skueue.client.blocking.connect_blocking(seed, request_timeout_s=2.0) as q,
        pytest.raises(RequestTimeout),
    ):
        q.enqueue(b"stuck")
    assert stats(seed)["processes"] == 3
    assert run_skueue("health", "--node", seed).returncode == 1
    assert get(metrics_address(cluster.daemons[0]), "/readyz")[0] == 503

    out = run_skueue("remove-member", dead, "--node", cluster.addresses[1], "--json")
    assert out.returncode == 0, out.stderr
    (removed,) = json.loads(out.stdout)["removed"]
    assert removed["member"] == dead and "never got into the ring" in removed["held"], removed

    for d in cluster.daemons:
        deadline = time.monotonic() + WAIT_S
        while True:
            s = stats(d.address)
            if s["processes"] == 2 and not s["unreachable"]:
                break
            assert time.monotonic() < deadline, s
            time.sleep(0.2)
        assert run_skueue("health", "--node", d.address).returncode == 0
        assert get(metrics_address(d), "/readyz")[0] == 200
    with skueue.client.blocking.connect_blocking(cluster.addresses[1]) as q:
        q.enqueue(b"moving again")
        assert sorted(q.dequeue_many(5)) == [b"moving again", b"stuck"]
    # Gone for good: the id is refused if it comes back, and asking again is no error.
    with pytest.raises(AssertionError, match="was removed from this cluster"):
        dead_joiner(seed, seed, dead, dead)
    again = run_skueue("remove-member", dead, "--node", seed)
    assert again.returncode == 0 and b"gone already" in again.stdout, again


def test_a_member_of_the_ring_that_died_is_not_removed_and_the_answer_says_why(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(3, extra_args=("--in-memory",))
    victim = cluster.daemons[2]
    # Alive: not gone.
    out = run_skueue("remove-member", victim.address, "--node", cluster.addresses[0])
    err = out.stderr.decode()
    assert out.returncode == 1 and "not gone" in err and "skueue leave" in err, err
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(timeout=10)
    out = run_skueue("remove-member", victim.address, "--node", cluster.addresses[0])
    err = out.stderr.decode()
    assert out.returncode == 1, err
    (line,) = err.strip().splitlines()
    assert "part of the ring" in line and "data directory" in line, line
    s = stats(cluster.addresses[0])
    assert s["processes"] == 3 and s["unreachable"] == [victim.address], s


def test_bad_names_are_answered_in_one_line(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(2, extra_args=("--in-memory",))
    node = ("--node", cluster.addresses[0])
    for args, code, needle in (
        (("nosuch",), 1, "no member nosuch"),
        ((cluster.addresses[0],), 1, "is this daemon"),
        (("",), 2, "1 to 256 characters"),
        (tuple(f"m{i}" for i in range(17)), 2, "at most 16 members"),
    ):
        out = run_skueue("remove-member", *args, *node)
        err = out.stderr.decode()
        assert out.returncode == code and needle in err, (args, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_a_removal_survives_restarts_of_durable_members(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    """The removal is an input of each member's log (the R record where it was asked,
    the peer's removed frame elsewhere): replayed after a restart, it stays done."""
    cluster = skueued_cluster(2)  # durable: each daemon has its data directory
    seed = cluster.addresses[0]
    (nobody,) = free_ports(1)
    dead = f"{HOST}:{nobody}"
    dead_joiner(seed, seed, dead, dead)
    deadline = time.monotonic() + WAIT_S
    while dead not in stats(seed)["unreachable"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    out = run_skueue("remove-member", dead, "--node", cluster.addresses[1])
    assert out.returncode == 0, out.stderr
    restarted: list[Daemon] = []
    try:
        for i, d in enumerate(cluster.daemons):
            args = list(d.proc.args[len(skueued_command()) :])
            d.proc.send_signal(signal.SIGTERM)
            assert d.proc.wait(timeout=10) == 0
            restarted.append(spawn(args, tmp_path, f"again{i}"))
            wait_ready(restarted[-1:])
        for d in restarted:
            deadline = time.monotonic() + WAIT_S
            while (s := stats(d.address))["unreachable"] or s["processes"] != 2:
                assert time.monotonic() < deadline, s
                time.sleep(0.2)
        with skueue.client.blocking.connect_blocking(seed) as q:
            q.enqueue(b"after the restarts")
            assert q.dequeue() == b"after the restarts"
    finally:
        assert not stop(restarted), [d.stderr() for d in restarted]


def test_only_an_admin_token_may_remove_members(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    user, admin = generate_key(), generate_key()
    tokens.write_text(f"client {user}\nadmin {admin}\n")
    cluster = skueued_cluster(2, "queue", ("--client-tokens", str(tokens), "--in-memory"))
    node = cluster.addresses[0]
    with (
        skueue.client.blocking.connect_blocking(node, token=user) as q,
        pytest.raises(RequestRejected, match="remove-member and deleting a queue need an admin"),
    ):
        q.remove_member("nosuch")
    cli = [*skueue_command(), "remove-member", "nosuch", "--node", node]
    for token, needle in ((user, "need an admin token"), (admin, "no member nosuch")):
        env = {**environment(), "SKUEUE_TOKEN": token}
        out = subprocess.run(cli, capture_output=True, text=True, timeout=30, env=env, check=False)
        assert out.returncode == 1 and needle in out.stderr, out.stderr
