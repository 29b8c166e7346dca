"""The metrics address's HTTP server: bad HTTP never hurts it, every limit holds
(runtime/operations/http_probe.py; issue 15, items 1 and 2)."""

from __future__ import annotations

import attrs
import pytest
import trio

from skueue.runtime.limits import Limits
from skueue.runtime.operations.http_probe import Handler, HttpProbe, Response, text

LIMITS = attrs.evolve(
    Limits(), http_connections_max=2, http_request_bytes_max=256, http_request_timeout_s=0.5
)


def fails(_: str) -> Response:
    raise RuntimeError("a bug")


ROUTES: dict[str, Handler] = {"/ok": lambda _: text(200, "fine\n"), "/bug": fails}


async def start(nursery: trio.Nursery, limits: Limits = LIMITS) -> tuple[int, HttpProbe]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    server = HttpProbe(ROUTES, limits)
    nursery.start_soon(server.serve, listeners)
    return listeners[0].socket.getsockname()[1], server


async def exchange(port: int, data: bytes) -> bytes:
    """Send ``data``, then read the whole answer (the server closes after it)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        out = b""
        with trio.fail_after(5):
            while chunk := await stream.receive_some(65536):
                out += chunk
        return out


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer else 0


@pytest.mark.trio
@pytest.mark.parametrize(
    ("request_bytes", "expected"),
    [
        (b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n", 200),
        (b"GET /ok?x=1 HTTP/1.0\n\n", 200),
        (b"GET /nowhere HTTP/1.1\r\n\r\n", 404),
        (b"POST /ok HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi", 405),
        (b"garbage\r\n\r\n", 400),
        (b"GET /ok SMTP/1.1\r\n\r\n", 400),
        (b"\xff\xfe\x00 / HTTP/1.1\r\n\r\n", 405),
        (b"GET /ok HTTP/1.1\r\nX: " + b"a" * 300 + b"\r\n\r\n", 431),
        (b"GET /ok HTTP/1.1\r\nX: " + b"a" * 3000, 431),  # no end of head in sight
        (b"GET /bug HTTP/1.1\r\n\r\n", 500),
    ],
)
async def test_every_request_gets_one_answer_and_the_server_serves_on(
    request_bytes: bytes, expected: int
) -> None:
    async with trio.open_nursery() as nursery:
        port, server = await start(nursery)
        answer = await exchange(port, request_bytes)
        assert status(answer) == expected, answer[:200]
        assert b"Connection: close" in answer
        assert status(await exchange(port, b"GET /ok HTTP/1.1\r\n\r\n")) == 200
        assert server.active == 0
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_head_gets_the_head_alone() -> None:
    async with trio.open_nursery() as nursery:
        port, _ = await start(nursery)
        answer = await exchange(port, b"HEAD /ok HTTP/1.1\r\n\r\n")
        assert answer.endswith(b"Content-Length: 5\r\nConnection: close\r\n\r\n")
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_a_silent_client_is_dropped_after_the_request_timeout() -> None:
    async with trio.open_nursery() as nursery:
        port, server = await start(nursery)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        began = trio.current_time()
        with trio.fail_after(5):
            assert await stream.receive_some(100) == b""  # closed without an answer
        assert LIMITS.http_request_timeout_s <= trio.current_time() - began < 3
        await stream.aclose()
        assert server.active == 0
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_past_the_connection_limit_a_new_one_gets_503_at_once() -> None:
    async with trio.open_nursery() as nursery:
        port, server = await start(nursery)
        held = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(2)]
        with trio.fail_after(5):
            while server.active < 2:
                await trio.sleep(0.01)
        answer = await exchange(port, b"GET /ok HTTP/1.1\r\n\r\n")
        assert status(answer) == 503 and b"too many connections" in answer
        for stream in held:
            await stream.aclose()
        with trio.fail_after(5):
            while server.active:
                await trio.sleep(0.01)
        assert status(await exchange(port, b"GET /ok HTTP/1.1\r\n\r\n")) == 200
        nursery.cancel_scope.cancel()


def test_the_limits_have_their_defaults() -> None:
    limits = Limits()
    assert (limits.http_connections_max, limits.http_request_bytes_max) == (16, 8192)
    assert limits.http_request_timeout_s == 5.0
