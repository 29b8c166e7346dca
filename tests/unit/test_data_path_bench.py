"""bench/data_path.py (issue 30): each micro-server answers every request with its own id
and payload, the clients catch a server that mixes or drops replies, and no server process
is left running.  No timing is asserted."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.unit.bench_scripts import load_bench

bench = load_bench("data_path")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("design", ["trio-reactor", "asyncio-protocol"])
def test_every_request_gets_its_own_reply(design: str) -> None:
    rows = bench.measure(
        design, requests=300, clients=2, in_flights=[1, 8], warmup_requests=20, timeout_s=20
    )
    assert [r["in_flight"] for r in rows] == [1, 8]
    for row in rows:
        assert (row["sent"], row["ok"], row["wrong"], row["timed_out"]) == (300, 300, 0, False)
    assert _gone(rows[0]["server_pid"])


def _load_against(reply: Callable[[list[Any]], list[list[Any]]], timeout_s: float) -> Any:
    """The bench's clients against a server that answers each request with ``reply``."""

    class Replying(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport, self.decoder = transport, bench.FrameDecoder()

        def data_received(self, data: bytes) -> None:
            for request in self.decoder.feed(data):
                for answer in reply(request):
                    self.transport.write(bench.pack(answer))

    async def main() -> Any:
        listener = socket.create_server(("127.0.0.1", 0))
        server = await asyncio.get_running_loop().create_server(Replying, sock=listener)
        async with server:
            return await bench.client_load(listener.getsockname()[1], 2, 40, 4, 100, timeout_s)

    return asyncio.run(main())


def test_a_right_server_passes_the_clients_check() -> None:
    load = _load_against(lambda request: [request], timeout_s=10)
    assert (load.ok, load.wrong, load.timed_out) == (40, 0, False)


def test_a_reply_with_another_payload_counts_as_wrong() -> None:
    load = _load_against(lambda r: [[r[0], r[1][::-1]]], timeout_s=2)
    assert load.wrong > 0
    assert load.ok < 40


def test_a_dropped_reply_is_missing_at_the_timeout() -> None:
    load = _load_against(lambda r: [r] if r[0] % 5 else [], timeout_s=2)
    assert load.timed_out
    assert load.ok < 40


def test_a_server_that_cannot_start_is_not_left_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[subprocess.Popen[bytes]] = []
    popen = subprocess.Popen

    def recording(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(bench.subprocess, "Popen", recording)
    with pytest.raises(RuntimeError, match="did not start"), bench.server_process("no-such"):
        pass
    assert len(started) == 1
    assert started[0].returncode is not None  # stopped and reaped
