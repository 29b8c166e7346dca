"""Members of one cluster speak one peer protocol (issue 30: the DHT's placement changed
with keys by blocks).  A daemon of another release is refused for good, in one line
naming both versions, and nothing of the cluster changes; the right version is taken."""

from __future__ import annotations

import pytest

from skueue.core.errors import RemoteProtocolError
from skueue.runtime.limits import Limits
from skueue.runtime.network.handshake import PEER_PROTOCOL, PeerProtocolMismatch, parse_peer_hello
from tests.e2e.rawclient import RawClient, inproc_daemon


def test_a_hello_says_its_protocol_and_one_without_it_is_of_the_first() -> None:
    greeting = parse_peer_hello(["hello-peer", "p1", "h:1", "n", {"protocol": PEER_PROTOCOL}])
    assert greeting.process == "p1"
    for old in (
        ["hello-peer", "p1", "h:1", "n"],
        ["hello-peer", "p1", "h:1", "n", {"protocol": 1}],
    ):
        with pytest.raises(
            PeerProtocolMismatch, match=f"protocol 1 and this daemon {PEER_PROTOCOL}"
        ):
            parse_peer_hello(old)
    with pytest.raises(RemoteProtocolError, match="protocol must be a number"):
        parse_peer_hello(["hello-peer", "p1", "h:1", "n", {"protocol": "2"}])


@pytest.mark.trio
async def test_a_daemon_of_another_release_is_refused_for_good() -> None:
    async with inproc_daemon(Limits()) as daemon:
        old = await RawClient.connect(daemon)
        await old.send(["hello-peer", "old-member", "127.0.0.1:9", "feedfacefeedface"])
        closing = await old.until_closed()
        assert closing[0][0] == "error" and closing[0][3] == "refused", closing
        assert "peer protocol 1" in closing[0][2] and "same release" in closing[0][2]
        assert "old-member" not in daemon.host.directory.addresses
        same = await RawClient.connect(daemon)
        await same.send(
            [
                "hello-peer",
                "new-member",
                "127.0.0.1:9",
                "feedfacefeedface",
                {"protocol": PEER_PROTOCOL},
            ]
        )
        assert (await same.receive())[0] == "hello-peer"
        await same.aclose()


@pytest.mark.trio
async def test_a_member_with_another_replicas_is_refused_for_good() -> None:
    async with inproc_daemon(Limits()) as daemon:  # --replicas 1
        other = await RawClient.connect(daemon)
        options = {"protocol": PEER_PROTOCOL, "replicas": 3}
        await other.send(["hello-peer", "other-member", "127.0.0.1:9", "feedface", options])
        closing = await other.until_closed()
        assert closing[0][0] == "error" and closing[0][3] == "refused", closing
        ours = daemon.ctx.process_id
        assert f"other-member runs with --replicas 3 and {ours} with 1" in closing[0][2], closing
        assert "other-member" not in daemon.host.directory.addresses
