"""The owner's direct write of a reply (reply_writer.write_now): it must go out only when
nothing is queued or in the writer's hands, or replies would overtake each other."""

from __future__ import annotations

import socket

import pytest
import trio

from skueue.runtime.network.client_reader import ClientReader
from skueue.runtime.network.reply_writer import ClientSession, Reply, offer, write_now
from skueue.wire.framing import FrameDecoder

pytestmark = pytest.mark.trio  # the writes note the time on trio's clock


def session_on(raw: socket.socket) -> ClientSession:
    send, _receive = trio.open_memory_channel[Reply](8)
    reader = ClientReader(1, FrameDecoder(1000), lambda frame: None, 4, 60.0, 60.0)
    session = ClientSession(send, reader)
    session.raw = raw
    return session


async def test_an_idle_writer_lets_the_owner_write_at_once() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        session = session_on(ours)
        assert write_now(session, [Reply(b"hello", 1)]) == []
        assert theirs.recv(100) == b"hello"


async def test_a_reply_waits_behind_replies_queued_or_in_the_writers_hands() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        session = session_on(ours)
        assert offer(session, Reply(b"first"))
        second = Reply(b"second", 1)
        assert write_now(session, [second]) == [second]  # queued before it: it waits
        session = session_on(ours)
        session.pending = 1  # the writer took a reply and has not written it yet
        assert write_now(session, [second]) == [second]
        theirs.setblocking(False)
        assert _nothing_to_read(theirs), "a reply overtook one queued before it"


async def test_a_closed_client_is_left_to_the_writer() -> None:
    ours, theirs = socket.socketpair()
    with ours:
        theirs.close()
        session = session_on(ours)
        reply = Reply(b"late", 1)
        assert write_now(session, [reply]) == [reply]  # not counted as delivered


async def test_what_the_socket_does_not_take_is_left_for_the_writer() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        session = session_on(ours)
        blob = bytes(range(256)) * 4096  # 1 MiB: more than the buffers hold
        first = Reply(b"first", 1)
        (left,) = write_now(session, [first, Reply(blob, 3)])
        assert 0 < len(left.blob) < len(blob)
        assert left.elements == 3  # the first reply went out whole: only the second waits
        got = bytearray()
        theirs.setblocking(False)
        while True:
            try:
                chunk = theirs.recv(1 << 20)
            except BlockingIOError:
                break
            got += chunk
        assert bytes(got) + left.blob == b"first" + blob  # nothing lost, nothing twice


def _nothing_to_read(sock: socket.socket) -> bool:
    try:
        sock.recv(100)
    except BlockingIOError:
        return True
    return False


async def test_a_steps_replies_go_out_in_one_send_and_a_cut_keeps_reply_boundaries() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        session = session_on(ours)
        assert write_now(session, [Reply(b"a", 1), Reply(b"bb", 2)]) == []
        assert theirs.recv(100) == b"abb"
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        big = bytes(1 << 20)
        left = write_now(session, [Reply(big, 1), Reply(b"tail", 2)])
        assert [r.elements for r in left] == [1, 2] and left[1].blob == b"tail"
