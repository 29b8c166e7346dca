"""The owner's readiness loop (runtime/network/reactor.py): it lets exactly the ready,
registered, unpaused sockets read, and its wait ends on readiness, a wake or the time."""

from __future__ import annotations

import socket

import pytest
import trio

from skueue.runtime.network.reactor import Reactor

pytestmark = pytest.mark.trio


class Reads:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.got: list[bytes] = []

    def on_readable(self) -> None:
        self.got.append(self.sock.recv(100, socket.MSG_DONTWAIT))


async def test_only_ready_sockets_read_and_a_paused_one_waits() -> None:
    reactor = Reactor()
    a, a_peer = socket.socketpair()
    b, b_peer = socket.socketpair()
    with a, a_peer, b, b_peer:
        ra, rb = Reads(a), Reads(b)
        reactor.register(a.fileno(), ra)
        reactor.register(b.fileno(), rb)
        assert reactor.read_ready() == 0
        a_peer.send(b"one")
        with trio.fail_after(5):
            await reactor.wait(10)
        assert reactor.read_ready() == 1
        assert (ra.got, rb.got) == ([b"one"], [])
        reactor.pause(b.fileno())
        b_peer.send(b"two")
        with trio.move_on_after(0.2):
            await reactor.wait(10)
        assert reactor.read_ready() == 0 and rb.got == [], "a paused socket was read"
        reactor.resume(b.fileno())
        assert reactor.read_ready() == 1 and rb.got == [b"two"]
        reactor.unregister(a.fileno(), rb)  # not rb's registration: a stays
        a_peer.send(b"three")
        assert reactor.read_ready() == 1 and ra.got == [b"one", b"three"]
        reactor.unregister(a.fileno(), ra)
        a_peer.send(b"four")
        assert reactor.read_ready() == 0 and ra.got == [b"one", b"three"]
    reactor.close()


async def test_a_wake_ends_the_wait_and_so_does_the_time() -> None:
    for reactor in (Reactor(), Reactor(owner_reads=False)):
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reactor.wait, 30)
                await trio.sleep(0.05)
                reactor.wake()
        with trio.fail_after(5):
            await reactor.wait(0.05)
    assert not Reactor(owner_reads=False).available


async def test_items_handed_are_taken_once_in_order() -> None:
    reactor = Reactor()
    for i in range(3):
        reactor.hand(i)
    assert reactor.take() == [0, 1, 2]
    assert reactor.take() == []
