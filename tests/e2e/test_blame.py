"""Errors by blame in the daemon: our own bug stops it loudly, naming the input.

A peer's bad message is the peer's fault (tests/e2e/test_fuzz.py: the link goes, the
daemon serves on).  Anything else the core raises is our bug: serving on from a state
nobody can vouch for would hide it, so the owner logs the input that caused it, with
the traceback, and the daemon stops.
"""

from __future__ import annotations

import pytest
import trio
from structlog.testing import capture_logs

from skueue.core.errors import ProtocolError
from skueue.core.process import Process
from skueue.runtime.limits import Limits
from tests.e2e.rawclient import RawClient, inproc_daemon

pytestmark = pytest.mark.trio


async def test_a_bug_in_the_core_stops_the_daemon_and_logs_the_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken_submit(self: Process, ops: object) -> list[object]:
        raise ProtocolError("a deliberately broken core")

    with capture_logs() as logs, pytest.raises(BaseExceptionGroup) as stopped:
        with trio.fail_after(10):
            async with inproc_daemon(Limits()) as daemon:
                c = await RawClient.connect(daemon)
                await c.hello()
                monkeypatch.setattr(Process, "submit_all", broken_submit)
                await c.send(["insert", 7, [b"payload"]])
                await trio.sleep_forever()  # the daemon's crash ends the block
    assert stopped.group_contains(ProtocolError, match="deliberately broken")
    bugs = [e for e in logs if e["log_level"] == "critical"]
    assert len(bugs) == 1, logs
    assert "InsertRequest" in bugs[0]["input"] and "rid=7" in bugs[0]["input"]
    assert bugs[0]["exc_info"] is True
