"""Leased elements and the prefetching consumer (issue 12; seed 002's consumer).

    async with skueue.connect(addr) as q:
        async for msg in q.consume("jobs", prefetch=100, lease=30):
            work(msg.value)
            await msg.ack()            # or msg.nack(): back into the queue, at its tail

A :class:`Leased` element is held for this connection until it is acked or nacked, its
lease runs out, or the connection closes; then it goes back into its queue (at the tail)
and is delivered again, with its delivery count one higher.  So nothing is lost when a
consumer dies: at-least-once.

The :class:`Consumer` keeps a local buffer of up to ``prefetch`` leased elements and refills
it in the background with one leased fetch whenever it falls below ``replenish`` (half of
``prefetch`` by default), so a worker rarely waits on the network.  A fetch is a pull, as
NATS's is: it asks for up to what the buffer lacks and gets what the queue has; on an
empty queue it waits in the daemon (``POLL_WAIT_S`` at a time) with one remove that rides
the tree's cycles, and what it did not get is no "empty result" in the queue's stats
(issue 28 item 8: a fetch of 100 on an idle queue used to count 100 of them, each 5 s).
Its messages are leased, so a consumer that dies loses nothing.  The buffer never holds
the same element twice: an element comes again only after its lease ended, and a
message whose lease ran out (by the client's clock, which ends it no later than the
daemon does) is dropped from the buffer before a refill lands and is never handed out.
Closing the consumer (leaving ``async with``, ``aclose()``, or the connection closing)
returns what was fetched but not yet handed out, uncounted as a delivery.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import attrs

from skueue.host.results import Removed

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

REPLENISH_FRACTION = 0.5  # refill once the buffer is below this share of prefetch
POLL_WAIT_S = 5.0  # a refill that finds the queue empty waits this long in the daemon


@attrs.frozen
class Leased:
    """An element held for this connection: ack it when done, or nack it to return it.

    ``deliveries`` counts its deliveries with a lease, this one included (1: the first);
    ``reason`` says why it came back the last time ("" the first time; "nack",
    "expired", "closed", "restart" or "leave").  ``deadline`` is when the lease ends on
    this client's clock (``anyio.current_time()``): counted from when the request went
    out, so the daemon ends it no sooner.  ``connection`` is the connection it belongs
    to: after a reconnect its lease is over (the element went back), and an ack of it
    is answered False without asking."""

    value: bytes
    lease: int
    deliveries: int
    reason: str
    deadline: float
    connection: int
    ord: int
    position: int | None


class LeaseClient(Protocol):
    """What a consumer and its messages use of :class:`skueue.client.api.Client`."""

    request_timeout_s: float

    async def ack(self, leased: Leased) -> bool: ...

    async def nack(self, leased: Leased) -> bool: ...

    async def extend(self, leased: Leased, seconds: float) -> bool: ...

    async def release(self, leased: Sequence[Leased], *, keep: bool = False) -> list[bool]: ...

    async def ack_many(self, leased: Sequence[Leased]) -> list[bool]: ...

    async def nack_many(self, leased: Sequence[Leased]) -> list[bool]: ...

    async def lease_many(
        self,
        count: int,
        queue: str | None,
        structure: str | None,
        wait: float | None,
        lease: float,
        max_deliveries: int | None,
        *,
        fetch: bool = False,
        look: bool = False,
    ) -> list[Leased]: ...

    def _spawn(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None: ...


@attrs.define(eq=False)
class Message:
    """A leased element as a consumer hands it out, with its acknowledgements."""

    leased: Leased
    client: LeaseClient
    consumer: Consumer | None = None  # the consumer that handed it out (for wait=False)

    @property
    def value(self) -> bytes:
        return self.leased.value

    @property
    def deliveries(self) -> int:
        return self.leased.deliveries

    @property
    def reason(self) -> str:
        return self.leased.reason

    async def ack(self, *, wait: bool = True) -> bool | None:
        """Done with it: gone for good.  False: its lease had ended (expired, or the
        connection closed), so it went back and may be delivered again.

        ``wait=False`` (a message from a consumer): return at once, as AMQP's basic.ack
        does; the consumer sends the acks in batches, one request in flight, and counts
        the answers that came back False in ``consumer.late_acks``."""
        if not wait and self.consumer is not None:
            self.consumer.end_soon("ack", self.leased)
            return None
        return await self.client.ack(self.leased)

    async def nack(self, *, wait: bool = True) -> bool | None:
        """Return it into its queue now (at the tail), counted as a delivery;
        ``wait=False`` as for :meth:`ack`."""
        if not wait and self.consumer is not None:
            self.consumer.end_soon("nack", self.leased)
            return None
        return await self.client.nack(self.leased)

    async def extend(self, seconds: float) -> bool:
        """Hold it ``seconds`` from now instead."""
        return await self.client.extend(self.leased, seconds)


class Consumer:
    """``async for msg in client.consume(...)``; see the module's docstring."""

    def __init__(
        self,
        client: LeaseClient,
        queue: str | None,
        structure: str | None,
        *,
        prefetch: int,
        lease: float,
        replenish: int | None,
        max_deliveries: int | None,
        idle: float | None,
    ) -> None:
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError(f"prefetch must be a positive integer, not {prefetch!r}")
        if replenish is None:
            replenish = max(1, math.ceil(prefetch * REPLENISH_FRACTION))
        if isinstance(replenish, bool) or not isinstance(replenish, int):
            raise ValueError(f"replenish must be an integer, not {replenish!r}")
        if not 1 <= replenish <= prefetch:
            raise ValueError(f"replenish must be from 1 to prefetch ({prefetch}), not {replenish}")
        if idle is not None and not idle > 0:
            raise ValueError(f"idle must be a positive number of seconds, not {idle!r}")
        self.client = client
        self.queue, self.structure = queue, structure
        self.prefetch, self.lease, self.replenish = prefetch, lease, replenish
        self.max_deliveries = max_deliveries
        self.idle = idle  # stop after this long with nothing to hand out (None: never)
        self.buffer: deque[Leased] = deque()
        self.refilling: anyio.Event | None = None  # set when the running refill ends
        self.error: BaseException | None = None
        self.closed = False
        self.handed_out = 0
        # Acks and nacks sent without waiting (Message.ack(wait=False)), batched.
        self.pending: dict[str, list[Leased]] = {"ack": [], "nack": []}
        self.ending: anyio.Event | None = None  # set when the running batch ends
        self.late_acks = 0  # answered False: the lease had ended, the element comes again
        self.answered_at: float | None = None  # when the last batch's answer came

    def __aiter__(self) -> Consumer:
        return self

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def __anext__(self) -> Message:
        if self.closed:
            raise StopAsyncIteration
        waited_since = anyio.current_time()
        while True:
            self._drop_expired()
            if self.buffer:
                leased = self.buffer.popleft()
                self.handed_out += 1
                if len(self.buffer) < self.replenish:
                    self._refill_in_background()
                return Message(leased, self.client, self)
            if self.error is not None:
                error, self.error = self.error, None
                raise error
            if self.idle is not None and anyio.current_time() - waited_since >= self.idle:
                raise StopAsyncIteration
            self._refill_in_background()
            assert self.refilling is not None
            with anyio.move_on_after(POLL_WAIT_S if self.idle is None else self.idle):
                await self.refilling.wait()

    def _drop_expired(self) -> None:
        """Messages whose lease ran out went back to the queue: they are not handed out
        (the daemon may deliver them again, here or to another consumer)."""
        now = anyio.current_time()
        if self.buffer and self.buffer[0].deadline <= now:
            self.buffer = deque(m for m in self.buffer if m.deadline > now)

    def _refill_in_background(self) -> None:
        if self.refilling is not None or self.closed:
            return
        self.refilling = anyio.Event()
        self.client._spawn(self._refill)

    async def _refill(self) -> None:
        assert self.refilling is not None
        try:
            want = self.prefetch - len(self.buffer)
            if want > 0:
                wait = POLL_WAIT_S if self.idle is None else min(POLL_WAIT_S, self.idle)
                got = await self.client.lease_many(
                    want, self.queue, self.structure, wait, self.lease, self.max_deliveries,
                    fetch=True,
                )  # fmt: skip
                self._drop_expired()  # before the new ones: never the same element twice
                if self.closed:
                    await self._give_back(got)
                else:
                    self.buffer.extend(got)
        except Exception as e:  # noqa: BLE001 - handed to the consumer's next __anext__
            self.error = e
        finally:
            done, self.refilling = self.refilling, None
            done.set()

    def end_soon(self, how: str, leased: Leased) -> None:
        """Ack or nack ``leased`` in the next batch (one request in flight at a time:
        whatever comes meanwhile goes in the one after)."""
        self.pending[how].append(leased)
        if self.ending is None:
            self.ending = anyio.Event()
            self.client._spawn(self._end_pending)

    async def _end_pending(self) -> None:
        assert self.ending is not None
        try:
            while self.pending["ack"] or self.pending["nack"]:
                acks, nacks = self.pending["ack"], self.pending["nack"]
                self.pending = {"ack": [], "nack": []}
                try:
                    if acks:
                        self.late_acks += (await self.client.ack_many(acks)).count(False)
                    if nacks:
                        await self.client.nack_many(nacks)
                    self.answered_at = anyio.current_time()
                except Exception as e:  # noqa: BLE001 - handed to the next __anext__
                    self.error = e
        finally:
            done, self.ending = self.ending, None
            done.set()

    async def aclose(self) -> None:
        """Stop: the acks and nacks not yet sent go, and what was fetched but not handed
        out goes back, as it was."""
        if self.closed:
            return
        self.closed = True
        with anyio.move_on_after(self.client.request_timeout_s):
            if self.refilling is not None:
                await self.refilling.wait()
            while self.ending is not None:
                await self.ending.wait()
        left, self.buffer = list(self.buffer), deque()
        await self._give_back(left)

    async def _give_back(self, leased: list[Leased]) -> None:
        if leased:
            await self.client.release(leased, keep=True)


def leased_from(result: Removed, deadline: float, connection: int) -> Leased:
    """A leased remove's result (with its element and its lease) as the caller gets it."""
    grant = result.lease
    if result.value is None or grant is None:
        raise ValueError(f"not a leased element: {result!r:.80}")
    return Leased(
        result.value, grant.lease_id, grant.deliveries, grant.reason, deadline, connection,
        result.ord, result.position,
    )  # fmt: skip


class BlockingMessage:
    """A :class:`Message` for plain code: each call blocks until its answer."""

    def __init__(self, message: Message, portal: BlockingPortal) -> None:
        self.message, self._portal = message, portal
        self.leased = message.leased
        self.value, self.deliveries, self.reason = message.value, message.deliveries, message.reason

    def ack(self) -> bool:
        return bool(self._portal.call(self.message.ack))

    def nack(self) -> bool:
        return bool(self._portal.call(self.message.nack))

    def extend(self, seconds: float) -> bool:
        return self._portal.call(self.message.extend, seconds)


class BlockingConsumer:
    """``for msg in client.consume(...)``: a :class:`Consumer` for plain code."""

    def __init__(self, consumer: Consumer, portal: BlockingPortal) -> None:
        self.consumer, self._portal = consumer, portal

    def __iter__(self) -> BlockingConsumer:
        return self

    def __next__(self) -> BlockingMessage:
        try:
            message = self._portal.call(self.consumer.__anext__)
        except StopAsyncIteration:
            raise StopIteration from None
        return BlockingMessage(message, self._portal)

    def __enter__(self) -> BlockingConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """What was fetched but not handed out goes back."""
        self._portal.call(self.consumer.aclose)
