"""Running a command's async body: client errors as one line, Ctrl-C as a quiet exit 130.

Errors from the client surface from task groups (the client's reader, bench's clients)
wrapped in exception groups, nested as deep as the task groups are;
:func:`client_error` looks through every level.  Ctrl-C does not raise
``KeyboardInterrupt`` at some random point inside trio (which left tracebacks and
half-started coroutines behind): a signal watcher cancels the body like any other
cancellation, and the command exits 130.  A second Ctrl-C exits at once.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from skueue.cli.args import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, fail
from skueue.client.errors import BadAddress, SkueueError

T = TypeVar("T")


class Interrupted(Exception):
    """The user pressed Ctrl-C; the command stopped what it was doing."""


def leaves(e: BaseException) -> list[BaseException]:
    """The exceptions inside ``e``, however deeply grouped; ``e`` itself if not a group."""
    if isinstance(e, BaseExceptionGroup):
        return [leaf for sub in e.exceptions for leaf in leaves(sub)]
    return [e]


def client_error(e: BaseException) -> SkueueError | None:
    """The first SkueueError in ``e`` if that is what ``e`` is made of (cancellations
    aside); None if it holds anything else, which is a bug and keeps its traceback."""
    found = [x for x in leaves(e) if not isinstance(x, trio.Cancelled)]
    if found and all(isinstance(x, SkueueError) for x in found):
        first = found[0]
        assert isinstance(first, SkueueError)
        return first
    return None


def interrupted_by_user(e: BaseException) -> bool:
    return any(isinstance(x, KeyboardInterrupt | Interrupted) for x in leaves(e))


def run_async(prog: str, body: Callable[[], Awaitable[T]]) -> T:
    """Run ``body`` under trio; exit 130 on Ctrl-C, 1 (2 for a bad address) with one line
    on a client error."""
    try:
        return trio.run(_watching_ctrl_c, body)
    except BaseException as e:  # noqa: BLE001 - sorted below; anything else is re-raised
        if interrupted_by_user(e):
            raise SystemExit(EXIT_INTERRUPTED) from None
        error = client_error(e)
        if error is None:
            raise
        fail(prog, str(error), code=EXIT_USAGE if isinstance(error, BadAddress) else EXIT_FAILED)


async def _watching_ctrl_c(body: Callable[[], Awaitable[T]]) -> T:
    result: list[T] = []
    pressed = False
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        try:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    nonlocal pressed
                    async for _ in signals:
                        if pressed:
                            os._exit(EXIT_INTERRUPTED)  # the second Ctrl-C: stop waiting
                        pressed = True
                        nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                result.append(await body())
                nursery.cancel_scope.cancel()
        except BaseException:
            # Whatever the cancelled body raised on its way out, the user asked to stop.
            if pressed:
                raise Interrupted from None
            raise
    if pressed or not result:
        raise Interrupted
    return result[0]
