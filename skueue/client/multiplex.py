"""Many requests on one connection: each gets a request id, its task waits for the reply
with that id, and the pieces of a large reply are joined in order.

:class:`Requests` is the table of waiting requests; :mod:`skueue.client.lifecycle`
sends them and hands it every frame that comes back.  A request of a client with a
session is kept across a broken connection and sent again on the next one (the daemon
answers it with its first attempt's outcome); any other fails with the connection.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Protocol

import anyio
import attrs

from skueue.client.errors import RequestTimeout, SkueueError, error_from
from skueue.core.errors import RemoteProtocolError
from skueue.host.replies import Done, ErrorReply, More, StatsReply, Welcome
from skueue.host.requests import RETRYABLE_REQUESTS, ClientRequest
from skueue.host.results import Result
from skueue.wire.client_codec import decode_reply, encode_request
from skueue.wire.framing import pack


@attrs.define
class Waiter:
    """One request waiting for its reply."""

    blob: bytes  # the request's frame, to send again after a reconnect
    # An enqueue or dequeue of a client with a session: sent again after a reconnect
    # (stats, join and leave fail with the connection instead).
    retry: bool
    done: anyio.Event = attrs.field(factory=anyio.Event)
    results: list[Result] = attrs.field(factory=list)  # those of its ``more`` pieces
    reply: Done | StatsReply | None = None
    error: SkueueError | None = None
    sent_on: int = 0  # the connection it went out on last (0: none yet)
    answered_on: int = 0  # the connection its reply came on (a lease belongs to it)


class Requests:
    """The requests waiting for their replies, by request id."""

    def __init__(self) -> None:
        self._rids = itertools.count(1)
        self.last_rid = 0
        self.waiting: dict[int, Waiter] = {}

    def add(self, request: ClientRequest, retry: bool) -> tuple[int, Waiter]:
        """Give ``request`` the next request id and wait for its reply."""
        rid = self.last_rid = next(self._rids)
        waiter = Waiter(pack(encode_request(dataclasses.replace(request, rid=rid))), retry)
        self.waiting[rid] = waiter
        return rid, waiter

    def forget(self, rid: int) -> None:
        """Stop waiting for ``rid`` (answered, timed out or cancelled)."""
        self.waiting.pop(rid, None)

    def deliver(self, frame: Any, connection: int, name: str) -> SkueueError | None:
        """Hand a reply to the request waiting for it; raise :class:`RemoteProtocolError`
        for one that is no reply to a request of ours.  Returns the error that ends the
        client when the daemon said so (an error without a request id)."""
        reply = decode_reply(frame)
        if isinstance(reply, ErrorReply) and reply.rid is None:
            return error_from(reply, name)
        if isinstance(reply, Welcome):
            raise RemoteProtocolError(f"unexpected reply {frame!r:.60}")
        rid = reply.rid
        if rid is None or not 0 < rid <= self.last_rid:
            raise RemoteProtocolError(f"reply for unknown request {rid!r:.20}")
        waiter = self.waiting.get(rid)
        if waiter is None:
            return None  # a request we stopped waiting for (timed out or cancelled)
        if isinstance(reply, More):
            waiter.results.extend(reply.results)
            return None
        del self.waiting[rid]  # answered: a break that follows does not change that
        waiter.answered_on = connection
        if isinstance(reply, ErrorReply):
            waiter.error = error_from(reply, name)
        else:
            waiter.reply = reply
        waiter.done.set()
        return None

    def fail(self, error: SkueueError, *, retries_too: bool) -> None:
        """End the waiting requests with ``error``: all of them, or (``retries_too``
        False) those that a reconnect would not send again."""
        for rid, waiter in list(self.waiting.items()):
            if waiter.done.is_set() or (waiter.retry and not retries_too):
                continue  # an answer that already arrived stands
            waiter.error = error
            waiter.done.set()
            del self.waiting[rid]
        if retries_too:
            self.waiting.clear()

    def to_send_again(self) -> list[Waiter]:
        """The waiting requests, oldest first, their pieces so far dropped (the reply
        comes again whole on the next connection)."""
        waiters = [waiter for _, waiter in sorted(self.waiting.items())]
        for waiter in waiters:
            waiter.results.clear()
        return waiters

    def sent_any(self) -> bool:
        """A waiting request went out on some connection (its outcome is that daemon's)."""
        return any(w.sent_on for w in self.waiting.values())


# Extra wait past the request timeout, so that the daemon's own timeout error (which
# names the member that is down) normally arrives before the client gives up.
REPLY_GRACE_S = 2.0


class Carrier(Protocol):
    """What :func:`call` needs of the connection it sends on
    (:class:`skueue.client.lifecycle.Link`)."""

    requests: Requests
    broken: SkueueError | None  # the client is over: every call fails with this
    retries: bool  # a broken connection is reopened and the retryable requests go again
    request_timeout_s: float

    @property
    def name(self) -> str: ...

    async def send(self, waiter: Waiter) -> None: ...

    def why_unanswered(self) -> str: ...


async def call(
    link: Carrier, request: ClientRequest, waits_s: float = 0.0
) -> tuple[tuple[Result, ...] | dict[str, Any], int]:
    """Send one request and wait for its results (the pieces joined), or the stats
    summary, and the connection its reply came on; raise the error the daemon answered
    with, or :class:`RequestTimeout`.  ``waits_s``: how long the daemon may wait on
    purpose (a blocking remove's wait), on top of the request timeout."""
    if link.broken is not None:
        raise link.broken
    retry = link.retries and isinstance(request, RETRYABLE_REQUESTS)
    rid, waiter = link.requests.add(request, retry)
    try:
        with anyio.move_on_after(link.request_timeout_s + waits_s + REPLY_GRACE_S):
            await link.send(waiter)
            await waiter.done.wait()
    finally:
        link.requests.forget(rid)
    if not waiter.done.is_set():
        raise RequestTimeout(
            f"no reply from {link.name} within {link.request_timeout_s:g} s"
            f"{link.why_unanswered()}; the outcome is unknown"
        )
    if waiter.error is not None:
        raise waiter.error
    reply = waiter.reply
    if isinstance(reply, Done):
        return (*waiter.results, *reply.results), waiter.answered_on
    assert isinstance(reply, StatsReply)
    return reply.summary, waiter.answered_on
