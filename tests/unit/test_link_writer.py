"""A peer link's writer (runtime/link_writer.py): the owner's direct writes keep the byte
order of the link, and half a frame never starts a new connection."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from skueue.runtime.link_writer import Item, LinkWriter, Tail


def stream_pair() -> tuple[trio.SocketStream, socket.socket]:
    ours, theirs = socket.socketpair()
    return trio.SocketStream(trio.socket.from_stdlib_socket(ours)), theirs


def received(sock: socket.socket) -> bytes:
    sock.setblocking(False)
    got = bytearray()
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return bytes(got)
        if not chunk:
            return bytes(got)
        got += chunk


@pytest.mark.trio
async def test_the_owner_writes_itself_only_while_the_writer_is_idle() -> None:
    send, receive = trio.open_memory_channel[Item](16)
    link = LinkWriter(send)
    assert link.write_now(b"early") == b"early"  # not connected yet: through the channel
    await link.queue(b"early")
    stream, theirs = stream_pair()
    with theirs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.serve, stream, receive)
            await trio.testing.wait_all_tasks_blocked()
            assert link.write_now(b"-direct") is None
            link.pending = 1
            assert link.write_now(b"-held") == b"-held"  # the writer holds something
            link.pending = 0
            send.close()
        assert received(theirs) == b"early-direct"


@pytest.mark.trio
async def test_a_tail_is_dropped_by_a_new_connection() -> None:
    send, receive = trio.open_memory_channel[Item](16)
    link = LinkWriter(send)
    link.connection = 4  # the head went out on connection 4, which broke
    await link.queue(Tail(b"rest-of-a-frame", 4))
    await link.queue(b"whole")
    send.close()
    stream, theirs = stream_pair()
    with theirs:
        await link.serve(stream, receive)  # connection 5
        assert received(theirs) == b"whole"
    assert link.raw is None and link.pending == 0


@pytest.mark.trio
async def test_a_tail_goes_out_on_its_own_connection() -> None:
    send, receive = trio.open_memory_channel[Item](16)
    link = LinkWriter(send)
    await link.queue(Tail(b"rest", 1))  # connection 1 is the one serve opens below
    await link.queue(b"+next")
    send.close()
    stream, theirs = stream_pair()
    with theirs:
        await link.serve(stream, receive)
        assert received(theirs) == b"rest+next"
    assert link.pending == 0
