"""The two ends of a reliable peer link (runtime/network/link_sender.py,
runtime/network/link_receiver.py): frames are numbered, kept until acknowledged, sent
again after a reconnect, and the receiver takes each number once."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import trio
import trio.testing

from skueue.core.errors import RemoteProtocolError
from skueue.runtime.network.link_receiver import Inbound, Numbering
from skueue.runtime.network.link_sender import LinkSender, watch_acks
from skueue.wire.framing import FrameDecoder, pack


def stream_pair() -> tuple[trio.SocketStream, socket.socket]:
    ours, theirs = socket.socketpair()
    return trio.SocketStream(trio.socket.from_stdlib_socket(ours)), theirs


def received_frames(sock: socket.socket) -> list[Any]:
    sock.setblocking(False)
    decoder = FrameDecoder(1 << 20)
    got: list[Any] = []
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return got
        if not chunk:
            return got
        got.extend(decoder.feed(chunk))


@pytest.mark.trio
async def test_frames_are_numbered_and_the_owner_writes_only_while_the_writer_is_idle() -> None:
    link = LinkSender()
    link.add(["a", "b"])  # not connected: waits in the outbox
    assert link.unwritten()
    stream, theirs = stream_pair()
    with theirs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.serve, stream, 0)
            await trio.testing.wait_all_tasks_blocked()
            assert not link.unwritten()
            link.add(["c"])  # written by the owner itself
            assert not link.unwritten()
            link.sending = True
            link.add(["d"])  # the writer is inside a send: left to it
            assert link.unwritten()
            link.sending = False
            await trio.testing.wait_all_tasks_blocked()
            link.close()
        assert received_frames(theirs) == [
            ["seq", 1, 2], "a", "b", ["seq", 3, 1], "c", ["seq", 4, 1], "d",
        ]
    assert link.unacknowledged() == 4  # nothing acknowledged: all kept


@pytest.mark.trio
async def test_a_new_connection_resends_everything_after_what_the_peer_handled() -> None:
    link = LinkSender()
    for frames in (["a"], ["b", "c"], ["d"]):
        link.add(frames)
    link.acknowledged(1)  # blob 1 confirmed on the old connection
    assert link.unacknowledged() == 3
    stream, theirs = stream_pair()
    with theirs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.serve, stream, 2)  # the peer handled up to "b"
            await trio.testing.wait_all_tasks_blocked()
            link.close()
        # blob ["b", "c"] goes again whole: the receiver skips "b"
        assert received_frames(theirs) == [["seq", 2, 2], "b", "c", ["seq", 4, 1], "d"]
    link.acknowledged(4)
    assert link.unacknowledged() == 0 and link.outbox_bytes == 0


def test_an_ack_of_frames_never_sent_is_the_peers_fault() -> None:
    link = LinkSender()
    link.add(["a"])
    with pytest.raises(RemoteProtocolError, match="ack of frame 2"):
        link.acknowledged(2)


def test_the_receiver_numbers_frames_and_refuses_gaps_and_strays() -> None:
    inbound = Inbound(accepted=3)
    numbering = Numbering("p", inbound)
    assert numbering.number(["seq", 2, 3]) is None
    assert [numbering.number(f) for f in ("b", "c", "d")] == [2, 3, 4]
    with pytest.raises(RemoteProtocolError, match="skipped frames"):
        numbering.number(["seq", 6, 1])  # 4 is the next one the daemon takes
    with pytest.raises(RemoteProtocolError, match="expected"):
        Numbering("p", inbound).number(["msg", 0, []])  # not inside a blob
    with pytest.raises(RemoteProtocolError, match="expected"):
        Numbering("p", inbound).number(["seq", 1, 0])


def test_acks_say_how_far_the_owner_handled_and_never_wait() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        inbound = Inbound(handled=2)
        inbound.attach(ours)  # the handshake said 2
        inbound.send_ack()
        theirs.setblocking(False)
        with pytest.raises(BlockingIOError):
            theirs.recv(100)  # nothing new to say
        inbound.handled = 5
        inbound.send_ack()
        assert theirs.recv(100) == pack(["ack", 5])
        ours.setblocking(False)
        while True:  # fill the socket: the next ack waits in ``unsent``
            try:
                ours.send(b"x" * 65536)
            except BlockingIOError:
                break
        inbound.handled = 9
        inbound.send_ack()
        assert inbound.unsent == pack(["ack", 9])


@pytest.mark.trio
async def test_frames_written_again_on_a_new_connection_are_counted_as_resent() -> None:
    link = LinkSender()
    link.add(["a"])  # not connected: never written, so not resent later
    for round_ in range(2):
        stream, theirs = stream_pair()
        with theirs:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(link.serve, stream, 0)  # the peer handled nothing
                await trio.testing.wait_all_tasks_blocked()
                if round_ == 0:
                    link.add(["b", "c"])  # written by the owner on the first connection
                    await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()  # the connection breaks
    # Second connection: "a", "b", "c" went again (all three were written once before).
    assert (link.connections, link.written_last, link.frames_resent) == (2, 3, 3)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_link_is_stuck_only_when_written_frames_wait_past_the_timeout() -> None:
    clock = Clock()
    link = LinkSender(clock=clock)
    clock.now += 60  # an idle link, however long, is not stuck
    assert not link.stuck(clock.now, 10)
    link.add(["a"])  # not written yet (no connection): waiting on us, not on the peer
    clock.now += 60
    assert not link.stuck(clock.now, 10)
    link.written_last = 1  # now on the wire
    clock.now += 5
    assert not link.stuck(clock.now, 60 + 10)  # the wait counts from when "a" came
    assert link.stuck(clock.now, 10)
    link.add(["b"])
    link.written_last = 2
    link.acknowledged(1)  # progress: the clock starts again
    assert not link.stuck(clock.now + 9, 10) and link.stuck(clock.now + 11, 10)
    link.acknowledged(2)
    assert not link.stuck(clock.now + 100, 10)  # nothing waits


@pytest.mark.trio
async def test_a_connection_that_carries_no_acks_any_more_is_ended() -> None:
    """The peer is there but acknowledges nothing (here: a socket nobody reads; in the
    field a half-open connection, a paused peer, or a TLS record cut on the path):
    watch_acks ends the connection, and the caller reconnects and sends again."""
    link = LinkSender(clock=trio.current_time)
    stream, theirs = stream_pair()
    with theirs, trio.fail_after(30):
        link.add(["a"])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.serve, stream, 0)
            with pytest.raises(trio.BrokenResourceError, match="nothing acknowledged for 2 s"):
                await watch_acks(link, 2.0)
            nursery.cancel_scope.cancel()
        assert received_frames(theirs) == [["seq", 1, 1], "a"]
        assert link.unacknowledged() == 1  # kept for the next connection
