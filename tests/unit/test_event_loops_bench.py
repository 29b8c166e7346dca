"""bench/event_loops.py (issue 10): the micro-server answers every request with its own
payload on every installed backend, a wrong reply is caught, and no server process is
left running.  No timing is asserted."""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest

from tests.unit.bench_scripts import load_bench

bench = load_bench("event_loops")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("backend", bench.available_backends())
def test_every_request_gets_its_own_reply(backend: str) -> None:
    rows = bench.measure(
        backend, requests=200, clients=2, in_flights=[1, 4], warmup_requests=20, timeout_s=10
    )
    assert [r["in_flight"] for r in rows] == [1, 4]
    for row in rows:
        assert not row["timed_out"]
        assert row["sent"] == 200
        assert row["ok"] == 200
        assert row["wrong"] == 0
    assert _gone(rows[0]["server_pid"])


def test_a_reply_with_another_payload_counts_as_wrong() -> None:
    async def main() -> Any:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)

        async def lying(stream: anyio.abc.SocketStream) -> None:
            decoder = bench.FrameDecoder()
            async with stream:
                while True:
                    try:
                        data = await stream.receive()
                    except anyio.EndOfStream:
                        return
                    replies = [[rid, payload[::-1]] for rid, payload in decoder.feed(data)]
                    await stream.send(bench.pack_many(replies))

        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, lying)
            load = await bench.client_load(port, 2, 10, 2, 100, 10.0)
            tg.cancel_scope.cancel()
        return load

    load = anyio.run(main, backend="asyncio")
    assert load.ok == 0
    assert load.wrong > 0


def test_a_server_that_cannot_start_is_not_left_behind() -> None:
    server = bench.Server("no-such-loop")
    with pytest.raises(RuntimeError, match="did not start"), server:
        pass
    assert server.proc is not None
    assert server.proc.returncode is not None  # stopped and reaped by __enter__
