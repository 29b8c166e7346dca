"""Peer authentication on real daemons (issue 13, item 1): a cluster with a key serves as
before; a "peer" without the key, with a wrong key, or replaying a handshake it recorded
is refused every time, before the daemon takes a frame of it, and the cluster's queue is
untouched; a daemon with no key and one with a key refuse each other in one line.

``SKUEUE_FAULTS=long`` makes the 10^4 tries of the issue; CI makes 300 of each kind.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import skueue.client.blocking
from skueue.client.errors import RequestRejected
from skueue.cluster.loadgen import LoadConfig, run_load
from skueue.host.requests import RemoveRequest
from skueue.runtime.network.handshake import PEER_PROTOCOL
from skueue.runtime.security.peer_auth import AUTH_FRAME, ClusterKeys, generate_key, new_challenge
from skueue.wire.client_codec import encode_request
from skueue.wire.client_hello import PROTOCOL_VERSION, ClientHello
from skueue.wire.framing import FrameDecoder, pack
from tests.e2e.daemons import HOST, Cluster, free_ports, refused
from tests.e2e.oracle import assert_history_ok

StartCluster = Callable[..., Cluster]
TRIES = 10_000 if os.environ.get("SKUEUE_FAULTS") == "long" else 300
TIMEOUT_S = 120.0


def key_file(path: Path) -> Path:
    path.write_text(generate_key() + "\n")
    return path


def impostor(address: str, claims: str, answer: Callable[[str, str], Any]) -> bool:
    """Open a peer link to ``address`` claiming to be ``claims``, answer the daemon's
    challenge with ``answer(its challenge, ours)`` (None: send no challenge at all), and
    tell whether the daemon kept the link (True: it took the impostor)."""
    host, port = address.rsplit(":", 1)
    decoder = FrameDecoder(1 << 20)
    mine = new_challenge()
    with socket.create_connection((host, int(port)), timeout=2) as s:
        first = answer("", mine)
        s.sendall(pack(hello(claims, None if first is None else mine)))
        got: list[Any] = []
        while not got:
            data = s.recv(65536)
            if not data:
                return False
            got = decoder.feed(data)
        if first is None or got[0][0] == "error":
            return False
        s.sendall(pack([AUTH_FRAME, answer(got[0][-1]["challenge"], mine)]))
        s.settimeout(0.5)
        try:
            while s.recv(65536):
                pass
        except TimeoutError:
            return True  # still open: the daemon went on with the link
    return False


def hello(process: str, challenge: str | None) -> list[Any]:
    options = {"protocol": PEER_PROTOCOL, **({} if challenge is None else {"challenge": challenge})}
    return ["hello-peer", process, f"{HOST}:1", "feedfacefeedface", options]


def test_impostors_are_refused_and_the_queue_is_untouched(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    """Each try has no key, a wrong key, the proof of a handshake recorded with the right
    key, replayed, or a proof that is not even ASCII; every other one claims to be a real
    member (whose own link must not suffer), the rest a new one (which a daemon without a
    key would take)."""
    key = key_file(tmp_path / "cluster.key")
    cluster = skueued_cluster(3, "queue", ("--cluster-key", str(key), "--in-memory"))
    target, member = cluster.addresses[0], cluster.addresses[1]
    with skueue.client.blocking.connect_blocking(target) as q:
        q.enqueue_many([b"%d" % i for i in range(50)])
    right = ClusterKeys.load(key)
    wrong = ClusterKeys.load(key_file(tmp_path / "wrong.key"))
    # What a listener on the wire saw of an earlier handshake with the right key.
    recorded = right.proof("open", new_challenge(), new_challenge(), "evil-1", target)
    answers: list[Callable[[str, str], Any]] = [
        lambda theirs, mine: None,
        lambda theirs, mine: wrong.proof("open", theirs, mine, member, target),
        lambda theirs, mine: recorded,
        lambda theirs, mine: "é" * 64,  # not ASCII: once a TypeError in compare_digest
    ]
    kept = sum(
        impostor(target, member if i % 2 else f"evil-{i}", answers[i % len(answers)])
        for i in range(TRIES)
    )
    assert kept == 0, f"{kept} of {TRIES} impostors were kept"
    with skueue.client.blocking.connect_blocking(cluster.addresses[2]) as q:
        got = q.dequeue_many(100)
    assert got == [b"%d" % i for i in range(50)]  # the members' links kept working
    assert "a peer failed the cluster-key check" in cluster.stderr()


@pytest.mark.trio
async def test_a_cluster_with_a_key_serves_a_linearizable_workload(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    key = key_file(tmp_path / "cluster.key")
    cluster = skueued_cluster(3, "queue", ("--cluster-key", str(key), "--in-memory"))
    config = LoadConfig(
        nodes=tuple(cluster.addresses), clients=4, ops=600, insert_ratio=0.6, value_bytes=16,
        seed=5, drain=True, structure="queue",
    )  # fmt: skip
    with anyio.fail_after(TIMEOUT_S):
        result = await run_load(config)
    assert_history_ok(result, config)


def test_a_member_without_the_key_and_one_with_another_are_refused(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    key = key_file(tmp_path / "cluster.key")
    cluster = skueued_cluster(2, "queue", ("--cluster-key", str(key), "--in-memory"))
    other = key_file(tmp_path / "other.key")
    for extra, says in (
        ((), "has no cluster key and this daemon requires one"),
        (("--cluster-key", str(other)), "failed the cluster-key check"),
    ):
        port = free_ports(1)[0]
        # A new member joins (--peers of a running cluster is refused before any key
        # is checked: it is no member of it; test_members.py).
        args = ["--listen", f"{HOST}:{port}", "--join", cluster.addresses[0],
                "--in-memory", *extra]  # fmt: skip
        code, err = refused(args, tmp_path, f"outsider-{port}")
        assert code == 1 and says in err, err
        assert "Traceback" not in err


def test_keygen_writes_a_private_key_file_and_refuses_to_replace_it(tmp_path: Path) -> None:
    out = tmp_path / "k"
    cli = [sys.executable, "-m", "skueue.cli.skueue", "keygen", "--out", str(out)]
    first = subprocess.run(cli, capture_output=True, text=True, timeout=30, check=False)
    assert first.returncode == 0, first.stderr
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    assert len(ClusterKeys.load(out).keys) == 1
    again = subprocess.run(cli, capture_output=True, text=True, timeout=30, check=False)
    assert again.returncode == 2 and "exists" in again.stderr


def test_a_huge_frame_in_the_handshake_is_refused_unread(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    """Before its proof a peer may send no more than a hello's worth of bytes: a frame
    that announces 16 MiB is cut off after a few KiB, and the daemon serves on."""
    key = key_file(tmp_path / "cluster.key")
    cluster = skueued_cluster(1, "queue", ("--cluster-key", str(key), "--in-memory"))
    host, port = cluster.addresses[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(pack(hello("evil", new_challenge())))
        s.recv(65536)  # the daemon's hello
        s.sendall((16 << 20).to_bytes(4, "big") + b"\x00" * 8192)
        s.settimeout(5)
        answer = b""
        try:
            while chunk := s.recv(65536):  # the daemon's error, then its close
                answer += chunk
        except ConnectionResetError:
            pass
    assert b"exceeds the limit" in answer or not answer  # closed, not waiting for 16 MiB
    with skueue.client.blocking.connect_blocking(cluster.addresses[0]) as q:
        q.enqueue(b"still here")
        assert q.dequeue() == b"still here"
    assert "handshake frame exceeds" in cluster.stderr()


def test_clients_need_a_token_and_only_admins_may_make_a_daemon_leave(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    user, admin = generate_key(), generate_key()
    tokens.write_text(f"# who may use the queue\nclient {user}\nadmin {admin}\n")
    cluster = skueued_cluster(2, "queue", ("--client-tokens", str(tokens), "--in-memory"))
    node = cluster.addresses[0]
    for bad, says in ((None, "serves only clients with a token"), ("x" * 32, "was refused")):
        with pytest.raises(RequestRejected, match=says):
            skueue.client.blocking.connect_blocking(node, token=bad)
    with skueue.client.blocking.connect_blocking(node, token=user) as q:
        q.enqueue(b"ok")
        assert q.dequeue() == b"ok"
        with pytest.raises(RequestRejected, match="need an admin token"):
            q.leave()
        assert q.stats()["processes"] == 2
    env = {**os.environ, "SKUEUE_TOKEN": admin}
    cli = [sys.executable, "-m", "skueue.cli.skueue", "stats", "--node", node]
    shown = subprocess.run(cli, capture_output=True, text=True, timeout=30, env=env, check=False)
    assert shown.returncode == 0 and "processes: 2" in shown.stdout, shown.stderr
    env.pop("SKUEUE_TOKEN")
    refused = subprocess.run(cli, capture_output=True, text=True, timeout=30, env=env, check=False)
    assert refused.returncode == 1 and "token" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_connections_that_never_finish_their_handshake_cost_bounded_memory(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    """Strangers that open connections and stall (half a hello; or a keyed hello and no
    proof), thousands of them, 200 open at a time: the daemon stays up, serves a client
    with a token, and its memory does not grow with them."""
    key = key_file(tmp_path / "cluster.key")
    token = generate_key()
    (tmp_path / "tokens").write_text(f"client {token}\n")
    cluster = skueued_cluster(
        1, "queue",
        ("--cluster-key", str(key), "--client-tokens", str(tmp_path / "tokens"), "--in-memory"),
    )  # fmt: skip
    daemon = cluster.daemons[0]
    host, port = cluster.addresses[0].rsplit(":", 1)
    before = rss_kb(daemon.pid)
    stalls = [pack(hello(f"evil-{i}", new_challenge())) for i in range(2)]
    stalls[0] = stalls[0][: len(stalls[0]) // 2]  # half a hello
    open_now: list[socket.socket] = []
    tries = 10 * TRIES  # 3,000 in CI, 10^5 in the long profile
    for i in range(tries):
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(stalls[i % 2])
        open_now.append(s)
        if len(open_now) >= 200:
            open_now.pop(0).close()
    peak = rss_kb(daemon.pid)
    for s in open_now:
        s.close()
    with skueue.client.blocking.connect_blocking(cluster.addresses[0], token=token) as q:
        q.enqueue(b"served")
        assert q.dequeue() == b"served"
    after = rss_kb(daemon.pid)
    print(f"{tries} stalled connections: RSS {before} kB before, {peak} kB with 200 open, "
          f"{after} kB after")  # fmt: skip
    assert daemon.alive()
    assert peak - before < 64 * 1024 and after - before < 32 * 1024, (before, peak, after)


def test_clients_that_never_read_their_replies_cost_bounded_memory(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    """Issue 13, resource exhaustion: authenticated clients that send requests and never
    read a reply.  Backpressure (``requests_per_client_max`` outstanding, replies queued
    per client at most ``client_replies_max``) bounds what each costs: the daemon stays up,
    serves a well-behaved client meanwhile, and its memory stays bounded."""
    token = generate_key()
    (tmp_path / "tokens").write_text(f"client {token}\n")
    tokens = ("--client-tokens", str(tmp_path / "tokens"), "--in-memory")
    cluster = skueued_cluster(1, "queue", tokens)
    daemon, node = cluster.daemons[0], cluster.addresses[0]
    value = b"v" * 1024
    with skueue.client.blocking.connect_blocking(node, token=token) as q:
        for _ in range(SLOW_READ_FILL // 1000):
            q.enqueue_many([value] * 1000)
    before = rss_kb(daemon.pid)
    host, port = node.rsplit(":", 1)
    slow = []
    for _ in range(SLOW_READERS):
        s = socket.create_connection((host, int(port)), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and never read it
        s.sendall(pack(ClientHello(PROTOCOL_VERSION, token=token).frame()))
        s.setblocking(False)
        for rid in range(1, SLOW_READ_REQUESTS + 1):
            try:  # the daemon stops reading this connection once it has enough of it
                s.sendall(pack(encode_request(RemoveRequest(rid, 10))))
            except BlockingIOError:
                break
        slow.append(s)
    with skueue.client.blocking.connect_blocking(node, token=token, request_timeout_s=20) as q:
        q.enqueue(b"served", queue="other")
        assert q.dequeue(queue="other") == b"served"
    peak = rss_kb(daemon.pid)
    for s in slow:
        s.close()
    print(f"{SLOW_READERS} clients that never read: RSS {before} kB before, {peak} kB with "
          "them connected")  # fmt: skip
    assert daemon.alive()
    assert peak - before < 96 * 1024, (before, peak)


SLOW_READERS = 40
SLOW_READ_REQUESTS = 200
SLOW_READ_FILL = 20_000
