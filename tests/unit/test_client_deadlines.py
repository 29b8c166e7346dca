"""The deadlines of a connection's calls, kept by one task (skueue.client.deadlines):
calls end on time, a blocking remove's long wait holds back no other call's deadline,
and answered calls are not kept."""

from __future__ import annotations

import pytest
import trio

import skueue
import skueue.client.api
import skueue.client.multiplex
from skueue.client.deadlines import SWEEP_INTERVAL_S, Deadlines
from tests.unit.fake_daemon import FakeDaemon

TEST_DEADLINE_S = 10.0


class FakeCall:
    def __init__(self) -> None:
        self.over = False


@pytest.mark.trio
async def test_calls_end_at_their_deadline_and_a_long_wait_holds_back_none() -> None:
    expired: list[tuple[FakeCall, float]] = []
    deadlines = Deadlines(lambda call: expired.append((call, trio.current_time())))
    blocking, plain, answered = FakeCall(), FakeCall(), FakeCall()
    with trio.fail_after(TEST_DEADLINE_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(deadlines.keep)
            start = trio.current_time()
            deadlines.add(blocking, 5.0, waits=True)
            deadlines.add(answered, 0.1, waits=False)
            deadlines.add(plain, 0.2, waits=False)
            answered.over = True
            await trio.sleep(0.5)
            nursery.cancel_scope.cancel()
    assert [call for call, _ in expired] == [plain]
    assert 0.2 <= expired[0][1] - start < 0.2 + SWEEP_INTERVAL_S


@pytest.mark.trio
async def test_answered_calls_are_dropped_within_a_sweep() -> None:
    deadlines = Deadlines(lambda call: None)
    calls = [FakeCall() for _ in range(1000)]
    with trio.fail_after(TEST_DEADLINE_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(deadlines.keep)
            for call in calls:
                deadlines.add(call, 60.0, waits=False)
            for call in calls:
                call.over = True
            await trio.sleep(SWEEP_INTERVAL_S * 2)
            assert not deadlines._plain  # none of them is kept for its 60 s
            nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_a_call_behind_a_blocking_dequeue_times_out_on_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(skueue.client.api, "REPLY_GRACE_S", 0.1, raising=False)
    monkeypatch.setattr(skueue.client.multiplex, "REPLY_GRACE_S", 0.1)
    with FakeDaemon() as fake, trio.fail_after(TEST_DEADLINE_S):
        async with (
            skueue.connect(fake.address, request_timeout_s=0.3) as q,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(lambda: q.dequeue(wait=30.0))
            await trio.sleep(0.05)
            t0 = trio.current_time()
            with pytest.raises(skueue.RequestTimeout):
                await q.enqueue(b"x")
            waited = trio.current_time() - t0
            nursery.cancel_scope.cancel()
    assert 0.4 <= waited < 0.4 + SWEEP_INTERVAL_S + 0.2
