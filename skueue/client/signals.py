"""What a call waits on until its reply (or its timeout) comes: set once, by another task.

``anyio.Event`` is that on every loop, but under asyncio it costs a backend look-up, an
``asyncio.Event`` and its waiter future per call: about a tenth of the client's CPU per
operation under load (``docs/performance.md``, "The client's side").  Under asyncio a
call waits on a bare future instead; under trio, on an ``anyio.Event``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import anyio


class Signal(Protocol):
    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> None: ...


class FutureSignal:
    """A signal on an asyncio future.  A waiter that is cancelled cancels the future
    (asyncio does): that is not set, and a later :meth:`set` finds nobody to wake."""

    __slots__ = ("_future",)

    def __init__(self, future: asyncio.Future[None]) -> None:
        self._future = future

    def set(self) -> None:
        if not self._future.done():
            self._future.set_result(None)

    def is_set(self) -> bool:
        future = self._future
        return future.done() and not future.cancelled()

    async def wait(self) -> None:
        await self._future


def signal_factory() -> Callable[[], Signal]:
    """How to make signals for the loop running now (called in it)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return anyio.Event
    create = loop.create_future
    return lambda: FutureSignal(create())
