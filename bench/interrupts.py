"""Ctrl-C for the benchmarks that drive other systems' clients on asyncio: the measurement
is cancelled so that clients close cleanly, servers are stopped whatever happens, and the
script exits 130.

A script installs :func:`on_interrupt` as its SIGINT handler, runs each measurement with
:func:`run_async`, stops its servers inside :func:`no_interrupt`, and asks
:func:`why_failed` why a system could not be measured (a Ctrl-C is not a reason: it goes
on as KeyboardInterrupt).

bench/ is not a package: scripts put this folder on ``sys.path`` and import it by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

INTERRUPTED = [False]
RUNNING: list[asyncio.Task[Any] | None] = [None]


def on_interrupt(signum: int, frame: Any) -> None:
    """Ctrl-C.  Inside a measurement, the measuring task is cancelled (as asyncio.run's
    own handler would do, which this one keeps out), so that clients close cleanly;
    :func:`run_async` then raises KeyboardInterrupt whatever the cancellation turned into
    (nats-py's publish_async turns it into an error of its own).  Elsewhere, or at the
    second Ctrl-C, KeyboardInterrupt is raised at once."""
    task = RUNNING[0]
    if INTERRUPTED[0] or task is None or task.done():
        INTERRUPTED[0] = True
        raise KeyboardInterrupt
    INTERRUPTED[0] = True
    task.get_loop().call_soon_threadsafe(task.cancel)


def run_async(func: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``anyio.run(func, *args)`` on asyncio (aio-pika and nats-py need it), interruptible."""

    async def measuring() -> T:
        RUNNING[0] = asyncio.current_task()
        try:
            return await func(*args)
        finally:
            RUNNING[0] = None

    try:
        result = anyio.run(measuring, backend="asyncio")
    except BaseException:
        if INTERRUPTED[0]:
            raise KeyboardInterrupt from None
        raise
    if INTERRUPTED[0]:
        raise KeyboardInterrupt
    return result


@contextlib.contextmanager
def no_interrupt() -> Iterator[None]:
    """Ctrl-C is held off while a server is being stopped, so that none is left behind."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def why_failed(error: BaseException) -> str:
    """Why a system could not be measured, in one line; KeyboardInterrupt instead where
    the failure was a Ctrl-C (the cancelled measurement's error, whatever it is)."""
    if INTERRUPTED[0]:
        raise KeyboardInterrupt from error
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
