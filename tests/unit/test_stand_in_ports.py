"""``skueued --stand-in-ports LOW-HIGH`` (runtime/stand_in.py): a stand-in listens on the
first free port of the range, and on a port the system picks when none is free."""

from __future__ import annotations

import argparse
import socket

import pytest
import trio

from skueue.cli.args import port_range
from skueue.runtime.stand_in import _listener

HOST = "127.0.0.1"


def test_a_range_is_low_dash_high_or_one_port() -> None:
    assert port_range("7410-7419") == (7410, 7419)
    assert port_range("7410") == (7410, 7410)
    for bad in ("x", "7419-7410", "0-5", "1-70000", "1-", "-3", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            port_range(bad)


def taken_then_free() -> tuple[socket.socket, int]:
    """A listening socket on some port P, with P + 1 free a moment ago."""
    for _ in range(50):
        held = socket.socket()
        held.bind((HOST, 0))
        held.listen()
        port = held.getsockname()[1]
        probe = socket.socket()
        try:
            probe.bind((HOST, port + 1))
            return held, port
        except OSError:
            held.close()
        finally:
            probe.close()
    raise AssertionError("no two neighbouring ports were free")


def test_the_first_free_port_of_the_range_and_else_one_the_system_picks() -> None:
    async def main() -> None:
        held, port = taken_then_free()
        try:
            listener = _listener(HOST, (port, port + 1))
            assert listener.socket.getsockname()[1] == port + 1
            await listener.aclose()
            listener = _listener(HOST, (port, port))  # none free: it serves anyway
            assert listener.socket.getsockname()[1] not in (port, 0)
            await listener.aclose()
        finally:
            held.close()

    trio.run(main)
