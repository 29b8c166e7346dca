"""The embedded Python API for plain (non-async) code: :class:`BlockingClient` runs the
async :class:`~skueue.client.api.Client` in a trio loop on a thread of its own, and each
call blocks until its reply.

    with skueue.connect_blocking("127.0.0.1:7400") as q:
        q.enqueue(b"job-1")
        item = q.dequeue()                # bytes, or None when the queue was empty
"""

from __future__ import annotations

import atexit
import ssl
from collections.abc import Awaitable, Callable, Sequence
from contextlib import ExitStack
from functools import partial
from types import TracebackType
from typing import Any, TypeVar

from anyio.from_thread import start_blocking_portal

from skueue.client.api import CONNECT_TIMEOUT_S, Inserted, Removed, connect
from skueue.client.consumer import BlockingConsumer, Leased

T = TypeVar("T")

class BlockingClient:
    """The same API for plain (non-async) code; each call blocks until its reply.

    Made by :func:`connect_blocking`; use it in a ``with`` block or call :meth:`close`.
    The connection lives in a trio loop on a thread of its own."""

    def __init__(self, address: str | None = None, **options: Any) -> None:
        self._exits = ExitStack()
        try:
            portal = self._exits.enter_context(start_blocking_portal(backend="trio"))
            client = self._exits.enter_context(
                portal.wrap_async_context_manager(connect(address, **options))
            )
        except BaseException:
            self._exits.close()
            raise
        self._portal = portal
        self._client = client
        self.process_id = client.process_id
        self.structure = client.structure
        self.address = client.address
        # A script that never calls close() must still exit: left to the garbage collector
        # at shutdown, the portal would wait for a thread that is no longer running.
        atexit.register(self.close)

    def close(self) -> None:
        """Close the connection and stop its thread; calling it again does nothing.
        A request still waiting (e.g. after Ctrl-C) ends with NodeUnreachable."""
        atexit.unregister(self.close)
        self._exits.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self, method: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run one of the async client's calls on the connection's thread."""
        return self._portal.call(partial(method, *args, **kwargs))

    def enqueue(
        self,
        value: bytes,
        *,
        queue: str | None = None,
        structure: str | None = None,
        priority: int | None = None,
    ) -> Inserted:
        return self._run(
            self._client.enqueue, value, queue=queue, structure=structure, priority=priority
        )

    def dequeue(
        self,
        *,
        queue: str | None = None,
        structure: str | None = None,
        wait: float | None = None,
        lease: float | None = None,
        max_deliveries: int | None = None,
    ) -> Any:
        """bytes or None; with ``lease``, a Leased or None (see Client.dequeue)."""
        return self._run(
            self._client.dequeue, queue=queue, structure=structure, wait=wait,
            lease=lease, max_deliveries=max_deliveries,
        )  # fmt: skip

    def ack(self, leased: Leased) -> bool:
        return self._run(self._client.ack, leased)

    def nack(self, leased: Leased) -> bool:
        return self._run(self._client.nack, leased)

    def ack_many(self, leased: Sequence[Leased]) -> list[bool]:
        return self._run(self._client.ack_many, leased)

    def nack_many(self, leased: Sequence[Leased]) -> list[bool]:
        return self._run(self._client.nack_many, leased)

    def extend(self, leased: Leased, seconds: float) -> bool:
        return self._run(self._client.extend, leased, seconds)

    def consume(self, queue: str | None = None, **options: Any) -> BlockingConsumer:
        """``for msg in q.consume("jobs", prefetch=100, lease=30): ...; msg.ack()``
        (options as in Client.consume; use it in ``with`` to give back the rest)."""
        return BlockingConsumer(self._client.consume(queue, **options), self._portal)

    def enqueue_many(
        self,
        values: Sequence[bytes],
        *,
        queue: str | None = None,
        structure: str | None = None,
        priority: int | None = None,
    ) -> list[Inserted]:
        return self._run(
            self._client.enqueue_many, values, queue=queue, structure=structure, priority=priority
        )

    def dequeue_many(
        self,
        count: int,
        *,
        queue: str | None = None,
        structure: str | None = None,
        wait: float | None = None,
        lease: float | None = None,
        max_deliveries: int | None = None,
    ) -> Any:
        """list[bytes]; with ``lease``, list[Leased] (see Client.dequeue_many)."""
        return self._run(
            self._client.dequeue_many, count, queue=queue, structure=structure, wait=wait,
            lease=lease, max_deliveries=max_deliveries,
        )  # fmt: skip

    def insert(
        self,
        values: Sequence[bytes],
        *,
        queue: str | None = None,
        structure: str | None = None,
        priority: int | None = None,
    ) -> list[Inserted]:
        return self._run(
            self._client.insert, values, queue=queue, structure=structure, priority=priority
        )

    def remove(
        self,
        count: int,
        *,
        queue: str | None = None,
        structure: str | None = None,
        wait: float | None = None,
    ) -> list[Removed]:
        return self._run(self._client.remove, count, queue=queue, structure=structure, wait=wait)

    def create_queue(self, queue: str, **settings: Any) -> bool:
        return self._portal.call(partial(self._client.create_queue, queue, **settings))

    def configure_queue(self, queue: str, *, max_deliveries: int) -> dict[str, Any]:
        """See :meth:`Client.configure_queue`."""
        return self._run(self._client.configure_queue, queue, max_deliveries=max_deliveries)

    def peek(self, *, queue: str | None = None) -> bytes | None:
        """See :meth:`Client.peek`."""
        return self._run(self._client.peek, queue=queue)

    def delete_queue(self, queue: str) -> int:
        return self._portal.call(self._client.delete_queue, queue)

    def stats(self) -> dict[str, Any]:
        return self._portal.call(self._client.stats)

    def leave(self) -> None:
        self._portal.call(self._client.leave)

    def join(self, seed: str) -> None:
        self._portal.call(self._client.join, seed)

    def remove_member(self, *members: str) -> dict[str, Any]:
        """See :meth:`Client.remove_member`."""
        return self._portal.call(lambda: self._client.remove_member(*members))

    def push(self, value: bytes, **options: Any) -> Inserted:
        """See :meth:`Client.push`: a new name becomes a stack."""
        return self._run(self._client.push, value, **options)

    def push_many(self, values: Sequence[bytes], **options: Any) -> list[Inserted]:
        return self._run(self._client.push_many, values, **options)

    def pop(self, **options: Any) -> Any:
        """See :meth:`Client.pop`."""
        return self._run(self._client.pop, **options)

    def pop_many(self, count: int, **options: Any) -> Any:
        return self._run(self._client.pop_many, count, **options)


def connect_blocking(
    address: str | None = None,
    *,
    timeout_s: float = CONNECT_TIMEOUT_S,
    request_timeout_s: float | None = None,
    admin: bool = False,
    token: str | None = None,
    tls: bool | ssl.SSLContext | None = None,
) -> BlockingClient:
    """A connected :class:`BlockingClient` for scripts:

        with skueue.connect_blocking(addr) as q:
            q.enqueue(b"x")

    or ``q = skueue.connect_blocking(addr)`` ... ``q.close()``."""
    return BlockingClient(
        address, timeout_s=timeout_s, request_timeout_s=request_timeout_s, admin=admin,
        token=token, tls=tls,
    )  # fmt: skip
