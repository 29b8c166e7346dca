"""The daemon channel (runtime/network/daemon_channel.py) on real daemons.

``skueue stats`` and the checks of ``skueue remove-member`` are questions between the
daemons, not inputs of their hosts: they go on each member's daemon channel and are
never written to the input log.  A channel's bad frame closes that channel with an error
and nothing else; the daemon serves on.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import skueue.client.blocking
from skueue.runtime.network.daemon_channel import parse_channel_frame
from skueue.runtime.network.handshake import PEER_PROTOCOL
from skueue.wire.framing import FrameDecoder, pack
from tests.e2e.daemons import Cluster

StartCluster = Callable[..., Cluster]
STATS_ROUNDS = 5


def stats(address: str) -> dict[str, Any]:
    with skueue.client.blocking.connect_blocking(address) as q:
        return q.stats()


def segment_bytes(data_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(data_dir.iterdir()) if p.suffix == ".log")


def test_stats_go_on_the_channel_and_are_not_logged(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(3)
    for _ in range(STATS_ROUNDS):
        got = stats(cluster.addresses[0])
        # Every member answered (nothing unreachable), each with its own counters.
        assert got["processes"] == 3 and not got["partial"] and not got["missing"], got
    data_dirs = [Path(m["durable"]["data_dir"]) for m in got["members"]]
    assert len(data_dirs) == 3
    for data_dir in data_dirs:
        logged = segment_bytes(data_dir)
        assert logged, f"no log segment in {data_dir}: {sorted(data_dir.iterdir())}"
        assert b"stats-query" not in logged and b"stats-answer" not in logged, data_dir


def channel_hello(peer: str) -> list[Any]:
    return ["hello-peer", peer, "127.0.0.1:9", os.urandom(8).hex(),
            {"protocol": PEER_PROTOCOL, "channel": True}]  # fmt: skip


@pytest.mark.parametrize(
    "bad",
    [["stats-query"], ["msg", 0, b"x"], ["remove-check", 1], {"stats-query": 1}, "x", [],
     ["raft", 1, []], ["raft", "p", b"x"]],
    ids=repr,
)
def test_a_bad_channel_frame_closes_that_channel_only(
    skueued_cluster: StartCluster, bad: Any
) -> None:
    cluster = skueued_cluster(1)
    host, port = cluster.addresses[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(pack(channel_hello("a-stranger")) + pack(bad))
        decoder, got = FrameDecoder(1 << 20), []
        while True:
            data = s.recv(65536)
            if not data:
                break
            got.extend(decoder.feed(data))
    assert [f[0] for f in got] == ["hello-peer", "error"], got
    assert "unknown daemon-channel frame" in got[1][2] or "raft: expected" in got[1][2], got
    assert stats(cluster.addresses[0])["processes"] == 1  # serves on


@pytest.mark.parametrize(
    "frame",
    [["stats-query", 1], ["stats-answer", 1, {}], ["remove-check", 1, ["p"]],
     ["remove-answer", 1, []], ["raft", "127.0.0.1:7400", ["append", 1, 0, 0, [], 0]]],
)
def test_channel_frames_of_each_kind_parse(frame: list[Any]) -> None:
    assert parse_channel_frame(frame) is frame
