"""Requests a client may send again: a retry gets the first attempt's outcome, never a
second effect (issue 11, item 5; as NATS de-duplicates by ``Msg-Id`` and Kafka's
idempotent producer by sequence number).

A client that names a session in its hello (``{"session": id}``) makes every request of
its own unique by ``(session, rid)``, across its connections.  When a connection breaks
in the middle of a request, the client cannot know whether it took effect; it reconnects
and sends the same request again:

- still running: the new connection takes over the first attempt (its reply goes there);
- finished: the stored reply is sent again, with the same results: an enqueue is not
  made twice, and the elements a dequeue removed are not lost with the broken reply;
- unknown (never arrived, or forgotten): it runs as new.

Finished requests are remembered, oldest forgotten first, up to
``retry_window_requests_max`` requests and ``retry_window_bytes_max`` bytes of results.
A retry that comes later than that runs again: the window bounds the time within which a
client must retry (see the README).  Elements forgotten here that no client received
count in ``dropped_results``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import msgpack

RetryKey = tuple[str, int]  # (client session, request id)

# Defaults of the runtime's limits of the same names.
RETRY_WINDOW_REQUESTS_MAX = 100_000
RETRY_WINDOW_BYTES_MAX = 64 * 1024 * 1024

# Bytes counted per finished request on top of its packed results: its entry in the
# window, its key and its record (measured with tracemalloc, test_retries.py).
REQUEST_OVERHEAD_BYTES = 240


@dataclass(slots=True)
class Finished:
    # The results, packed with msgpack: a result as a list ([ord, position]) took 144 B
    # of memory, about ten times its packed size, and a window of enqueue results held
    # that way was a third of a durable daemon's memory.  Unpacked only for a retry.
    packed: bytes
    delivered: bool  # the reply went to a connected client at least once
    removed: int  # elements it removed (lost with it if never delivered)

    @property
    def bytes(self) -> int:
        return len(self.packed) + REQUEST_OVERHEAD_BYTES

    def results(self) -> list[Any]:
        return msgpack.unpackb(self.packed)


@dataclass(slots=True)
class RetryWindow:
    requests_max: int = RETRY_WINDOW_REQUESTS_MAX
    bytes_max: int = RETRY_WINDOW_BYTES_MAX
    finished: OrderedDict[RetryKey, Finished] = field(default_factory=OrderedDict)
    bytes: int = 0

    def get(self, key: RetryKey) -> Finished | None:
        return self.finished.get(key)

    def finish(self, key: RetryKey, results: list[Any], delivered: bool, removed: int) -> int:
        """Remember a finished request; the elements lost by forgetting older ones that
        no client received."""
        finished = self.finished[key] = Finished(msgpack.packb(results), delivered, removed)
        self.bytes += finished.bytes
        lost = 0
        while self.finished and (
            len(self.finished) > self.requests_max or self.bytes > self.bytes_max
        ):
            _, old = self.finished.popitem(last=False)
            self.bytes -= old.bytes
            if not old.delivered:
                lost += old.removed
        return lost

