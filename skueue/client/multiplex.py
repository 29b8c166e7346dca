"""Many requests on one connection: each caller's call waits in an outbox until the
connection's writer takes every waiting call at once, joins those it can into one
request (:mod:`skueue.client.coalesce`) and writes the frames in one write; each frame
gets a request id, its reply is matched by that id, the pieces of a large reply are
joined in order, and a joined request's results are split among its calls.

:class:`Requests` is the outbox and the table of waiting requests;
:mod:`skueue.client.lifecycle` writes them and hands it every frame that comes back.
A request of a client with a session is kept across a broken connection and sent again
on the next one (the daemon answers it with its first attempt's outcome); any other
fails with the connection.
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol

import attrs

from skueue.client.coalesce import JoinLimits, join
from skueue.client.errors import NodeUnreachable, RequestTimeout, SkueueError, error_from
from skueue.client.signals import Signal, signal_factory
from skueue.core.errors import RemoteProtocolError
from skueue.host.replies import ErrorReply, More, StatsReply, Welcome
from skueue.host.requests import RETRYABLE_REQUESTS, ClientRequest
from skueue.host.results import Result
from skueue.wire.client_codec import decode_reply, encode_request
from skueue.wire.framing import pack


@attrs.define(eq=False)
class Call:
    """One caller waiting for its results: its request (``rid`` 0 until it is sent), and
    what came back for it."""

    request: ClientRequest
    # An enqueue or dequeue of a client with a session: sent again after a reconnect
    # (stats, join and leave fail with the connection instead).
    retry: bool
    done: Signal  # set once its reply, or its timeout, came
    results: tuple[Result, ...] = ()
    summary: dict[str, Any] | None = None  # a stats request's
    error: SkueueError | None = None
    answered_on: int = 0  # the connection its reply came on (a lease belongs to it)
    waiter: Waiter | None = None  # the request it went out in (None: not yet)
    left: bool = False  # its caller stopped waiting (timed out or cancelled)

    @property
    def over(self) -> bool:
        """Answered, or its caller stopped waiting (its deadline need not be kept)."""
        return self.left or self.done.is_set()

    def finish(self, connection: int, error: SkueueError | None = None) -> None:
        if self.left:
            return  # timed out: a reply that comes later is not its caller's
        self.answered_on, self.error = connection, error
        self.done.set()


@attrs.define(eq=False)
class Waiter:
    """One request frame waiting for its reply, on behalf of one call or of several
    joined ones (:mod:`skueue.client.coalesce`), each owning a run of its results."""

    rid: int
    blob: bytes  # the request's frame, to send again after a reconnect
    retry: bool
    calls: list[Call]
    counts: list[int]
    results: list[Result] = attrs.field(factory=list)  # those of its ``more`` pieces
    live: int = 1  # its calls still waiting for it
    sent_on: int = 0  # the connection it went out on last (0: none yet)


class Requests:
    """The calls not yet sent, and the requests waiting for their replies, by id."""

    def __init__(self) -> None:
        self._rids = itertools.count(1)
        self.last_rid = 0
        self.waiting: dict[int, Waiter] = {}
        self.outbox: list[Call] = []  # calls made since the writer last ran
        self.unsent: list[Waiter] = []  # requests the writer is to send, oldest first
        self.limits = JoinLimits()  # how far calls may be joined (the daemon's limits)
        self.new_signal = signal_factory()  # made in the loop the connection lives in

    def take(self) -> None:
        """The outbox as request frames, calls joined where they can be, added to
        :attr:`unsent`; each frame gets the next request id and waits for its reply from
        now on."""
        calls = [c for c in self.outbox if not c.left]
        self.outbox = []
        for joined in join([c.request for c in calls], self.limits):
            rid = self.last_rid = next(self._rids)
            members = [calls[i] for i in joined.members]
            frame = encode_request(joined.request)
            frame[1] = rid  # [KIND, rid, ...]: cheaper than a copy of the request
            blob = pack(frame)
            waiter = Waiter(rid, blob, members[0].retry, members, joined.counts, live=len(members))
            for c in members:
                c.waiter = waiter
            self.waiting[rid] = waiter
            self.unsent.append(waiter)

    def leave(self, call: Call) -> None:
        """``call``'s caller stops waiting (timed out or cancelled): unsent, it is never
        sent; its request is forgotten once none of its calls waits for it."""
        call.left = True
        waiter = call.waiter
        if waiter is None:
            return
        waiter.live -= 1
        if waiter.live <= 0:
            self.waiting.pop(waiter.rid, None)

    def deliver(self, frame: Any, connection: int, name: str) -> SkueueError | None:
        """Hand a reply to the calls waiting for it; raise :class:`RemoteProtocolError`
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
        calls = waiter.calls
        if isinstance(reply, ErrorReply):
            for c in calls:  # a joined request's error is every one of its calls'
                c.finish(connection, error_from(reply, name))
        elif isinstance(reply, StatsReply):
            calls[0].summary = reply.summary
            calls[0].finish(connection)
        elif len(calls) == 1:
            calls[0].results = (*waiter.results, *reply.results)
            calls[0].finish(connection)
        else:
            _split(waiter, (*waiter.results, *reply.results), connection, name)
        return None

    def fail(self, error: SkueueError, *, retries_too: bool) -> None:
        """End the waiting calls with ``error``: all of them, or (``retries_too`` False)
        those that a reconnect would not send again."""
        for rid, waiter in list(self.waiting.items()):
            if waiter.retry and not retries_too:
                continue
            del self.waiting[rid]
            for c in waiter.calls:
                c.finish(0, error)
        for c in self.outbox:
            if retries_too or not c.retry:
                c.finish(0, error)
        self.outbox = [c for c in self.outbox if not c.done.is_set()]

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


def _split(waiter: Waiter, results: tuple[Result, ...], connection: int, name: str) -> None:
    """A joined request's results, each call its own run of them, in order."""
    if len(results) != sum(waiter.counts):
        error = NodeUnreachable(
            f"bad reply from {name}: {len(results)} results for {sum(waiter.counts)} operations"
        )
        for c in waiter.calls:
            c.finish(connection, error)
        return
    start = 0
    for c, n in zip(waiter.calls, waiter.counts, strict=True):
        c.results = results[start : start + n]
        start += n
        c.finish(connection)


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

    def submit(self, call: Call, seconds: float, waits: bool) -> None: ...

    def why_unanswered(self) -> str: ...


async def call(
    link: Carrier, request: ClientRequest, waits_s: float = 0.0
) -> tuple[tuple[Result, ...] | dict[str, Any], int]:
    """Send one request (joined with others waiting on the connection where it can be)
    and wait for its results (the pieces joined), or the stats summary, and the
    connection its reply came on; raise the error the daemon answered with, or
    :class:`RequestTimeout`.  ``waits_s``: how long the daemon may wait on purpose (a
    blocking remove's wait), on top of the request timeout."""
    if link.broken is not None:
        raise link.broken
    retry = link.retries and isinstance(request, RETRYABLE_REQUESTS)
    pending = Call(request, retry, link.requests.new_signal())
    link.submit(pending, link.request_timeout_s + waits_s + REPLY_GRACE_S, waits_s > 0)
    try:
        await pending.done.wait()
    finally:
        if not pending.done.is_set():
            link.requests.leave(pending)  # cancelled
    if pending.left:  # its deadline passed (Link's Deadlines)
        raise RequestTimeout(
            f"no reply from {link.name} within {link.request_timeout_s:g} s"
            f"{link.why_unanswered()}; the outcome is unknown"
        )
    if pending.error is not None:
        raise pending.error
    if pending.summary is not None:
        return pending.summary, pending.answered_on
    return pending.results, pending.answered_on
