"""bench/interrupts.py: why a system was not measured is one line, and a Ctrl-C is never
taken for such a reason (the scripts that drive other systems go on past a failure, but
must stop at a Ctrl-C)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.bench_scripts import load_bench

interrupts = load_bench("interrupts")


@pytest.fixture(autouse=True)
def not_interrupted() -> Iterator[None]:
    interrupts.INTERRUPTED[0] = False
    yield
    interrupts.INTERRUPTED[0] = False


def test_a_failure_is_one_line_naming_its_kind() -> None:
    assert interrupts.why_failed(RuntimeError("nats-server did not start in 30 s")) == (
        "RuntimeError: nats-server did not start in 30 s"
    )
    assert interrupts.why_failed(SystemExit()) == "SystemExit"


def test_a_failure_after_ctrl_c_is_the_interrupt() -> None:
    interrupts.INTERRUPTED[0] = True
    cancelled = RuntimeError("publish_async cancelled")
    with pytest.raises(KeyboardInterrupt) as raised:
        interrupts.why_failed(cancelled)
    assert raised.value.__cause__ is cancelled


def test_run_async_returns_what_the_measurement_returns() -> None:
    async def measurement(x: int) -> int:
        return x + 1

    assert interrupts.run_async(measurement, 41) == 42
    assert interrupts.RUNNING[0] is None
