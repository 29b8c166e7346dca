"""The deadlines of the calls waiting on one connection, kept by one task.

Every call has a deadline (the request timeout, a blocking remove's wait, the grace for
the daemon's own timeout error).  A cancel scope per call would keep it exactly, but
costs about a quarter of the client's CPU per operation under load (a timer armed and
cancelled, the current task looked up twice: ``docs/performance.md``).  Instead one
task per connection wakes at the earliest deadline, or every ``SWEEP_INTERVAL_S`` while
calls wait, ends the calls whose time is up and drops the answered ones from its list.

Calls with no wait of their own all have the same timeout, so their deadlines come in
the order they were made: a deque, answered ones dropped from its front.  Blocking
removes wait longer, each its own time: a heap.  The task sleeps until the earliest
deadline it knows, and never longer than one sweep interval, so a deadline that comes
in while it sleeps is kept to within that interval (and exactly whenever the timeout is
longer than the interval, as it is by default: a new call's deadline is never before
``now + timeout``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable
from typing import Protocol

import anyio

# How often the waiting calls are looked at while some wait: answered ones are dropped
# (so that they are not kept past that) and a deadline is kept to within this.
SWEEP_INTERVAL_S = 0.25


def _clock() -> Callable[[], float]:
    """anyio's clock for this loop: under asyncio the loop's own ``time`` (what
    ``anyio.current_time`` reads, without looking up the backend on every call)."""
    try:
        return asyncio.get_running_loop().time
    except RuntimeError:
        return anyio.current_time


class Timed(Protocol):
    """A call as its deadline needs it."""

    @property
    def over(self) -> bool: ...  # answered, or its caller stopped waiting


class Deadlines:
    """The deadlines of one connection's waiting calls."""

    def __init__(self, expire: Callable[[Timed], None]) -> None:
        self._expire = expire  # ends a call whose time is up
        self._plain: deque[tuple[float, Timed]] = deque()  # in deadline order
        self._waits: list[tuple[float, int, Timed]] = []  # a heap: blocking removes
        self._numbers = itertools.count()
        self._armed = anyio.Event()  # set: a call waits (the task need not sleep long)
        self._clock = _clock()

    def add(self, call: Timed, seconds: float, waits: bool) -> None:
        """``call`` ends ``seconds`` from now unless answered before; ``waits``: a
        blocking remove (its deadline is not in the order of the others')."""
        deadline = self._clock() + seconds
        if waits:
            heapq.heappush(self._waits, (deadline, next(self._numbers), call))
        else:
            self._plain.append((deadline, call))
        if not self._armed.is_set():
            self._armed.set()

    async def keep(self) -> None:
        """End the calls whose time is up, as long as the connection lives."""
        self._clock = _clock()  # the loop this task runs in
        plain, waits = self._plain, self._waits
        while True:
            if not plain and not waits:
                self._armed = anyio.Event()
                await self._armed.wait()
            now = self._clock()
            while plain and (plain[0][1].over or plain[0][0] <= now):
                _, call = plain.popleft()
                if not call.over:
                    self._expire(call)
            while waits and (waits[0][2].over or waits[0][0] <= now):
                _, _, call = heapq.heappop(waits)
                if not call.over:
                    self._expire(call)
            wake = now + SWEEP_INTERVAL_S
            if plain:
                wake = min(wake, plain[0][0])
            if waits:
                wake = min(wake, waits[0][0])
            await anyio.sleep_until(wake)
