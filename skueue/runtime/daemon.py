"""The daemon: one process of the cluster, wired from its parts.

One task, the *owner* (:mod:`skueue.runtime.owner`), holds the host
(:class:`~skueue.host.host.Host`, and through it the core) and the input log, and is the
only writer of the host's state.  It reads the plaintext connections' frames itself,
from a readiness loop of its own (:mod:`skueue.runtime.network.reactor`: one wake-up for
all the connections that are ready, no task switch per frame); everything else hands it
inputs through one bounded channel, the inbox, and carries out its effects: the
incoming connections (:mod:`skueue.runtime.incoming`: handshakes, client sessions' and
peer links' tasks, TLS connections' reading), the peer links' writers
(:mod:`skueue.runtime.network.peers`) and the owner's own pacing timer.  This module only
wires them: it binds the listeners, starts the metrics, has start-up find the cluster
and the host (:mod:`skueue.runtime.startup`) and starts the owner.

Backpressure: a client may have ``requests_per_client_max`` requests outstanding; its
reader stops reading until replies go out, so a fast client slows down instead of
growing our buffers.  Errors: a peer or client that sends something malformed gets one
structured warning in the log, an error reply where it waits, and its connection closed;
everyone else is served on.  Our own bugs stop the daemon loudly.
"""

from __future__ import annotations

from typing import Any

import trio

from skueue.host.address import Address
from skueue.host.host import Host
from skueue.host.replies import Welcome
from skueue.runtime.config import DaemonConfig
from skueue.runtime.errors import DaemonError, RefusedForGood
from skueue.runtime.incoming import IncomingConnections
from skueue.runtime.network.daemon_channel import DaemonChannels
from skueue.runtime.network.peers import PeerLinks
from skueue.runtime.network.sessions import ClientSessions
from skueue.runtime.operations.health import Readiness
from skueue.runtime.owner import Owner
from skueue.runtime.replica_count import decide
from skueue.runtime.resources import files_needed, raise_open_files_limit
from skueue.runtime.startup import (
    DataDirectory,
    data_directory,
    new_directory,
    open_data_directory,
    start_owner,
)
from skueue.runtime.state import DaemonContext, log
from skueue.wire.client_hello import PROTOCOL_VERSION
from skueue.wire.client_protocol import limits_for_clients

__all__ = ["Daemon", "DaemonConfig", "bind"]


class Daemon:
    def __init__(self, config: DaemonConfig) -> None:
        self.ctx = DaemonContext(config, self.welcome)
        self.owner: Owner | None = None  # from when start-up has built the host
        self.data = DataDirectory()

    @property
    def config(self) -> DaemonConfig:
        """As given, with what start-up decided (runtime/replica_count.py)."""
        return self.ctx.config

    async def run(
        self,
        *,
        listeners: list[trio.SocketListener] | None = None,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until cancelled.  ``listeners`` may be bound already (a local cluster
        binds every port first so that each daemon can be told the others' addresses)."""
        ctx, listen = self.ctx, self.config.listen
        raise_open_files_limit(files_needed(ctx.limits, len(self.config.peers)))
        if listeners is None:
            listeners = await bind(listen)
        listening = Address(listen.host, listeners[0].socket.getsockname()[1])
        ctx.address = self.config.advertise or listening
        ctx.process_id = self.config.process_id or str(ctx.address)
        # Before any peer's hello is answered: the hello says how many replicas.
        ctx.config = decide(self.config, data_directory(ctx), ctx.address)
        log.info("starting", process=ctx.process_id, listen=str(listening))
        try:
            async with trio.open_nursery() as nursery:
                ctx.nursery = nursery
                nursery.start_soon(_stop_when_refused, ctx)
                incoming = IncomingConnections(ctx)
                nursery.start_soon(trio.serve_listeners, incoming.on_connection, listeners)
                if self.config.metrics is not None:
                    # First: /healthz answers, and /readyz says why not, while start-up waits.
                    await self._serve_metrics(self.config.metrics, nursery)
                ctx.directory = new_directory(ctx)
                ctx.links = PeerLinks(
                    ctx.process_id, ctx.address, ctx.limits, nursery, ctx.directory,
                    self.config.cluster_keys, self.config.tls,
                )  # fmt: skip
                ctx.links.replicas = self.config.replicas
                ctx.channels = DaemonChannels(ctx.links)
                self.data = await open_data_directory(ctx)
                self.owner, members = await start_owner(ctx, self.data)
                nursery.start_soon(self.owner.run)
                # A replicated process: once its group elected it, or a backup of it.
                await _led_or_backup(self.owner)
                ctx.ready.set()
                await self.owner.joined.wait()
                log.info("ready", process=ctx.process_id, listen=str(listening),
                         advertise=str(ctx.address), members=members or "joined",
                         structure=self.config.structure.value)  # fmt: skip
                task_status.started(listening)
        finally:
            ctx.reactor.close()
            if self.data.lock is not None:
                self.data.lock.release()

    async def _serve_metrics(self, address: Address, nursery: trio.Nursery) -> None:
        from skueue.runtime.operations.metrics import (
            probe,  # prometheus_client: only where asked for
        )

        listeners = await bind(address)
        served = Address(address.host, listeners[0].socket.getsockname()[1])
        nursery.start_soon(probe(self).serve, listeners)
        log.info("serving metrics", address=str(served), paths="/metrics /healthz /readyz")

    def welcome(self) -> Welcome:
        return Welcome(self.ctx.process_id, self.config.structure.value, PROTOCOL_VERSION,
                       limits_for_clients(self.ctx.limits))  # fmt: skip

    def readiness(self) -> Readiness:
        if self.owner is None:
            return Readiness(False, "starting: meeting the members or replaying the log")
        return self.owner.readiness()

    async def drain_links(self, timeout_s: float = 5.0) -> None:
        """Wait until the steps so far are committed in the process's group (they go out
        only then), the peers acknowledged the last messages (a leaver's hand-over) and
        the clients' last replies are written (the leave's own answer among them).
        (Not the steps after: once a leaver's departure is out, the other members drop
        their copies of its group, and nothing it steps later can commit.)"""
        ctx, owner = self.ctx, self.owner
        group = None if owner is None else owner.group
        through = None if group is None else group.node.last_index
        with trio.move_on_after(timeout_s):
            while (
                (owner is not None and through is not None and owner.held.holds_through(through))
                or (ctx.links is not None and ctx.links.unacknowledged())
                or any(s.pending for s in ctx.sessions.clients.values())
            ):
                await trio.sleep(0.01)

    # What the daemon's users read: its address and id, its parts, the events.
    @property
    def address(self) -> Address:
        return self.ctx.address

    @property
    def process_id(self) -> str:
        return self.ctx.process_id

    @property
    def sessions(self) -> ClientSessions:
        return self.ctx.sessions

    @property
    def host(self) -> Host:
        assert self.owner is not None
        return self.owner.host

    @property
    def left(self) -> trio.Event:
        assert self.owner is not None
        return self.owner.left


async def bind(listen: Address) -> list[trio.SocketListener]:
    try:
        return await trio.open_tcp_listeners(listen.port, host=listen.host)
    except OSError as e:
        raise DaemonError(f"cannot listen on {listen}: {e.strerror or e}") from None


async def _stop_when_refused(ctx: DaemonContext) -> None:
    """Stop the daemon, with the reason, once it must stop for good (runtime/failover.py)."""
    await ctx.refused.wait()
    raise RefusedForGood(ctx.refused_for_good or "refused for good")


async def _led_or_backup(owner: Owner) -> None:
    """Until the owner's group leads, or, with failover, follows another replica of its
    process (runtime/failover.py: this daemon is a backup of it from now)."""
    group = owner.group
    if group is None or not group.failover:
        await owner.led.wait()
        return
    async with trio.open_nursery() as nursery:

        async def until(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(until, owner.led)
        nursery.start_soon(until, group.deposed)
