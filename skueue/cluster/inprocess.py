"""A whole cluster inside the calling program, for embedding and tests.

    with skueue.local_cluster(processes=4) as cluster:        # or: async with
        with skueue.connect_blocking(cluster.addresses[0]) as q: ...

The daemons run on loopback in a thread of their own with their own trio loop, so the
caller may be plain code, trio or asyncio alike.  They talk over real TCP, exactly as
separate ``skueued`` processes would.
"""

from __future__ import annotations

import contextlib
import threading
from types import TracebackType
from typing import Any

import anyio.to_thread
import structlog
import trio

from skueue.core.ops import Structure
from skueue.host.address import Address
from skueue.runtime.daemon import Daemon, DaemonConfig, bind
from skueue.runtime.limits import Limits
from skueue.runtime.operations.logging import configure
from skueue.wire.client_hello import PROTOCOL_VERSION
from skueue.wire.framing import FrameDecoder, pack

START_TIMEOUT_S = 30.0


class LocalCluster:
    def __init__(
        self,
        processes: int = 4,
        structure: Structure | str = Structure.QUEUE,
        host: str = "127.0.0.1",
        limits: Limits | None = None,
    ) -> None:
        if processes < 1:
            raise ValueError("a cluster needs at least one process")
        self.processes = processes
        self.structure = Structure(structure)
        self.host = host
        self.limits = limits or Limits()
        self.addresses: list[str] = []
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._cancel = scope
            listeners = [await bind(Address(self.host, 0)) for _ in range(self.processes)]
            addresses = [Address(self.host, ls[0].socket.getsockname()[1]) for ls in listeners]
            async with trio.open_nursery() as nursery:
                for i, ls in enumerate(listeners):
                    peers = tuple(a for j, a in enumerate(addresses) if j != i)
                    daemon = Daemon(
                        DaemonConfig(addresses[i], peers, None, self.structure, self.limits)
                    )
                    nursery.start_soon(_run_daemon, daemon, ls)
                self.addresses = [str(a) for a in addresses]
                await _wait_until_serving(addresses)
                self._ready.set()

    def _thread_main(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as e:  # noqa: BLE001 - handed to the starting thread
            self._error = e
        finally:
            self._ready.set()

    def start(self) -> LocalCluster:
        if not structlog.is_configured():
            # An embedding program that set up no logging gets warnings only, not the
            # daemons' chatter.
            configure("console", "warning")
        self._thread = threading.Thread(target=self._thread_main, name="skueue-local", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise TimeoutError(f"local cluster did not start within {START_TIMEOUT_S:g} s")
        if self._error is not None:
            raise RuntimeError(f"local cluster failed to start: {self._error!r}") from self._error
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._token is not None and self._cancel is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
        self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> LocalCluster:
        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await anyio.to_thread.run_sync(self.stop)


async def _run_daemon(daemon: Daemon, listeners: list[trio.SocketListener]) -> None:
    await daemon.run(listeners=listeners)


async def _wait_until_serving(addresses: list[Address]) -> None:
    """Every daemon has finished its handshakes once a client gets its welcome."""
    for a in addresses:
        stream = await trio.open_tcp_stream(a.host, a.port)
        async with stream:
            await stream.send_all(pack(["hello-client", PROTOCOL_VERSION]))
            decoder = FrameDecoder()
            while not decoder.feed(await stream.receive_some(65536)):
                pass


def local_cluster(
    processes: int = 4, structure: Structure | str = "queue", **kw: Any
) -> LocalCluster:
    """A cluster of ``processes`` daemons on loopback; use with ``with`` or ``async with``."""
    return LocalCluster(processes, structure, **kw)
