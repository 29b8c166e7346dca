"""The embedded Python API for plain (non-async) code: :class:`BlockingClient` runs the
async :class:`~skueue.client.api.Client` in a trio loop on a thread of its own, and each
call blocks until its reply.

    with skueue.connect_blocking("127.0.0.1:7400") as q:
        q.enqueue(b"job-1")
        item = q.dequeue()                # bytes, or None when the queue was empty

Every method is derived from the async client's coroutine of the same name
(:func:`blocking`): the same parameters, the same docstring (``help()`` shows both) and,
for mypy, the same signature (a ``ParamSpec``), so the API is signed once.
``tests/unit/test_blocking_client.py`` fails when a public coroutine has no twin here.
"""

from __future__ import annotations

import atexit
import functools
import ssl
from collections.abc import Callable, Coroutine
from contextlib import ExitStack
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from anyio.from_thread import start_blocking_portal

from skueue.client.api import CONNECT_TIMEOUT_S, Client, connect
from skueue.client.consumer import BlockingConsumer

P = ParamSpec("P")
T = TypeVar("T")


def blocking(
    method: Callable[Concatenate[Client, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[BlockingClient, P], T]:
    """The blocking twin of one of :class:`Client`'s coroutines: it runs the coroutine on
    the connection's thread and waits for it."""

    @functools.wraps(method)
    def run(self: BlockingClient, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._portal.call(functools.partial(method, self._client, *args, **kwargs))

    run.__module__, run.__qualname__ = __name__, f"BlockingClient.{method.__name__}"
    return run


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
        # A script that never calls close() must still exit: left to the garbage collector
        # at shutdown, the portal would wait for a thread that is no longer running.
        atexit.register(self.close)

    @property
    def process_id(self) -> str:
        return self._client.process_id

    @property
    def structure(self) -> str:
        return self._client.structure

    @property
    def address(self) -> str:
        return self._client.address

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

    def consume(self, queue: str | None = None, **options: Any) -> BlockingConsumer:
        """``for msg in q.consume("jobs", prefetch=100, lease=30): ...; msg.ack()``
        (options as in Client.consume; use it in ``with`` to give back the rest)."""
        return BlockingConsumer(self._client.consume(queue, **options), self._portal)

    # Every public coroutine of Client, as a blocking call (the order is Client's).
    enqueue = blocking(Client.enqueue)
    dequeue = blocking(Client.dequeue)
    enqueue_many = blocking(Client.enqueue_many)
    dequeue_many = blocking(Client.dequeue_many)
    lease_many = blocking(Client.lease_many)
    ack = blocking(Client.ack)
    ack_many = blocking(Client.ack_many)
    nack = blocking(Client.nack)
    nack_many = blocking(Client.nack_many)
    release = blocking(Client.release)
    extend = blocking(Client.extend)
    push = blocking(Client.push)
    push_many = blocking(Client.push_many)
    pop = blocking(Client.pop)
    pop_many = blocking(Client.pop_many)
    insert = blocking(Client.insert)
    remove = blocking(Client.remove)
    create_queue = blocking(Client.create_queue)
    configure_queue = blocking(Client.configure_queue)
    peek = blocking(Client.peek)
    peek_element = blocking(Client.peek_element)
    delete_queue = blocking(Client.delete_queue)
    stats = blocking(Client.stats)
    leave = blocking(Client.leave)
    join = blocking(Client.join)
    remove_member = blocking(Client.remove_member)


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
