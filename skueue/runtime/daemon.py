"""The daemon: one process of the cluster on trio, driving the unchanged pure core.

Theory of operation
-------------------
One task, the *owner* (:mod:`skueue.runtime.owner`), is the only one that touches the
:class:`~skueue.host.host.Host` (and through it the
:class:`~skueue.core.process.Process`).  Everything else feeds it through one bounded
channel, the inbox: a reader task per incoming connection (:mod:`skueue.runtime.incoming`
for peers, :mod:`skueue.runtime.sessions` for clients) and the owner's own pacing timer.
Joins and leaves asked by clients are in :mod:`skueue.runtime.membership_waiters`, the
shared state in :mod:`skueue.runtime.state`.  This module only wires them: it binds the
listeners, connects to the peers (or to the cluster to join), builds the process and
starts the tasks.

Backpressure: a client may have ``requests_per_client_max`` requests outstanding; its
reader stops reading until replies go out, so a fast client slows down instead of
growing our buffers.

Errors: a peer or client that sends something malformed (:class:`RemoteProtocolError`)
gets one structured warning in the log, an error reply where it waits, and its
connection closed; everyone else is served on.  Our own bugs stop the daemon loudly.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from skueue.core.process import Process
from skueue.host.address import Address, parse_address
from skueue.host.directory import Directory
from skueue.host.host import Host
from skueue.host.retries import RetryWindow
from skueue.overlay.ring import build_views
from skueue.runtime.config import DaemonConfig
from skueue.runtime.data_lock import DataDirLock
from skueue.runtime.disk_space import DiskSpace
from skueue.runtime.entry_store import ENTRIES_DIRECTORY, SnapshotEntryStore, attach
from skueue.runtime.errors import DaemonError
from skueue.runtime.handshake import check_distinct
from skueue.runtime.incoming import IncomingConnections
from skueue.runtime.input_log import InputLog, Meta
from skueue.runtime.peers import PeerLinks
from skueue.runtime.replay import Replay
from skueue.runtime.resources import files_needed, raise_open_files_limit
from skueue.runtime.state import log
from skueue.wire.client_protocol import PROTOCOL_VERSION, limits_for_clients
from skueue.wire.client_replies import Welcome

__all__ = ["Daemon", "DaemonConfig", "bind"]


class Daemon(Replay, IncomingConnections):
    async def run(
        self,
        *,
        listeners: list[trio.SocketListener] | None = None,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until cancelled.  ``listeners`` may be bound already (a local cluster
        binds every port first so that each daemon can be told the others' addresses)."""
        listen = self.config.listen
        raise_open_files_limit(files_needed(self.limits, len(self.config.peers)))
        if listeners is None:
            listeners = await bind(listen)
        port = listeners[0].socket.getsockname()[1]
        listening = Address(listen.host, port)
        self.address = self.config.advertise or listening
        self.process_id = self.config.process_id or str(self.address)
        log.info("starting", process=self.process_id, listen=str(listening))
        try:
            await self._serve(listeners, listening, task_status)
        finally:
            if self.data_lock is not None:
                self.data_lock.release()

    async def _serve(
        self, listeners: list[trio.SocketListener], listening: Address, task_status: Any
    ) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            nursery.start_soon(trio.serve_listeners, self._on_connection, listeners)
            if self.config.metrics is not None:
                # First: /healthz answers, and /readyz says why not, while start-up waits.
                await self._serve_metrics(self.config.metrics, nursery)
            self.directory = Directory(self.process_id, self.address)
            self.links = PeerLinks(
                self.process_id, self.address, self.limits, nursery, self.directory,
                self.config.cluster_keys, self.config.tls,
            )  # fmt: skip
            input_log = self._open_input_log()
            if input_log is None:
                self.links.ready.set()
            if self.config.join is not None:
                seed = await self._seed(input_log)
                self.host = Host(self._joining_process(seed), self._retry_window())
                members = 0
                if input_log is not None:
                    # Where the owner would put them, before any input: a restart's
                    # replay numbers these frames as the first life did.
                    self.host.apply(self.pending_join_effects)
                    self.pending_join_effects = []
            else:
                ids = await self._static_members(input_log)
                self.host = Host(self._build_process(ids), self._retry_window())
                members = len(ids)
                self.joined.set()  # in the ring from the start: no join to wait for, or log
            if input_log is not None:
                began, recovering = time.perf_counter(), not input_log.fresh()
                if input_log.snapshot_file is not None:
                    self._restore(input_log.snapshot_file)
                    input_log.snapshot_file = None
                self._forget_lost_appends()
                self._replay(input_log.records())
                input_log.replay_segments = []
                if recovering:
                    log.info(
                        "recovery done",
                        process=self.process_id,
                        seconds=round(time.perf_counter() - began, 3),
                        records=input_log.record_count,
                    )
                self.input_log = input_log
                self.links.ready.set()
            nursery.start_soon(self.owner)
            self.ready.set()
            if self.config.join is not None:
                await self.joined.wait()
            log.info(
                "ready",
                process=self.process_id,
                listen=str(listening),
                advertise=str(self.address),
                members=members or "joined",
                structure=self.config.structure.value,
            )
            task_status.started(listening)

    async def _serve_metrics(self, address: Address, nursery: trio.Nursery) -> None:
        from skueue.runtime.metrics import probe  # prometheus_client: only where asked for

        listeners = await bind(address)
        served = Address(address.host, listeners[0].socket.getsockname()[1])
        nursery.start_soon(probe(self).serve, listeners)
        log.info("serving metrics", address=str(served), paths="/metrics /healthz /readyz")

    def _open_input_log(self) -> InputLog | None:
        """The data directory's log (None: an in-memory daemon).  The daemon keeps the
        nonce it had the first time, so that its peers take it back as the same member."""
        config = self.config
        directory = config.data_dir
        if directory is None and config.data_root is not None:
            directory = config.data_root / _directory_name(self.process_id)
        if directory is None:
            return None
        # First, before anything in the directory is read or written (runtime/data_lock.py).
        self.data_lock = DataDirLock(directory)
        assert self.links is not None
        meta = Meta(self.process_id, self.links.nonce, config.structure.value, ())
        input_log = InputLog.open(directory, meta, config.fsync)
        if input_log.meta.left:
            raise DaemonError(
                f"the daemon of {directory} left its cluster; it cannot come back as "
                "that member (start it with an empty --data-dir to serve again)"
            )
        self.links.nonce = input_log.meta.nonce
        self.links.incarnations.update(input_log.meta.incarnations)
        self.links.remember_incarnation = input_log.record_incarnation
        limits = self.limits
        self.entry_store = SnapshotEntryStore(
            directory / ENTRIES_DIRECTORY, limits.entry_page_bytes, limits.entry_pages_mapped_max
        )
        self.disk = DiskSpace(directory, limits.disk_free_min_bytes)
        log.info(
            "durable",
            data_dir=str(directory),
            records=input_log.record_count,
            fsync=config.fsync.mode,
        )
        return input_log

    async def _seed(self, input_log: InputLog | None) -> str:
        """The process this daemon joins through: asked at the first start; a durable
        daemon coming back knows it from its data directory (the seed may be gone)."""
        assert self.links is not None and self.directory is not None
        config = self.config
        assert config.join is not None
        if input_log is not None and not input_log.fresh():
            if input_log.meta.join is None:
                raise DaemonError(
                    f"{input_log.directory} belongs to a member of a static cluster: "
                    "start it with --peers, not --join"
                )
            seed, address = input_log.meta.join
            self.directory.learn(seed, parse_address(address))
            return seed
        seed = await self.links.connect_seed(config.join, self.limits.join_timeout_s)
        if input_log is not None:
            input_log.record_join(seed, str(self.directory.address(seed) or config.join))
        return seed

    async def _static_members(self, input_log: InputLog | None) -> list[str]:
        """A static member's cluster: met through ``--peers`` at the first start (every
        peer must answer then), and recorded in a durable daemon's data directory.  A
        restart builds the ring from that record and replays its log: it waits for no
        peer, so a member that left since, or is down now, does not hold it up, and
        ``--peers`` is not read again (the log knows who left and who joined)."""
        assert self.links is not None and self.directory is not None
        recorded = None if input_log is None else input_log.meta
        if recorded is not None and recorded.members:
            for peer, address in recorded.addresses:
                self.directory.learn(peer, parse_address(address))
            given = {str(a) for a in self.config.peers}
            if given != {address for _, address in recorded.addresses}:
                log.info(
                    "the data directory names this member's cluster; --peers is read at "
                    "the first start only",
                    recorded=[address for _, address in recorded.addresses],
                )
            others = [p for p in recorded.members if p != self.process_id]
            return [self.process_id, *others]
        peers = await self.links.connect_all(self.config.peers)
        check_distinct(peers)
        ids = [self.process_id, *dict.fromkeys(peers.values())]
        if input_log is not None:
            met = [(peer, str(address)) for address, peer in peers.items()]
            input_log.record_members(ids, met)
        return ids

    def _retry_window(self) -> RetryWindow:
        limits = self.limits
        return RetryWindow(limits.retry_window_requests_max, limits.retry_window_bytes_max)

    def welcome(self) -> list[Any]:
        return Welcome(
            self.process_id,
            self.config.structure.value,
            PROTOCOL_VERSION,
            limits_for_clients(self.limits),
        ).frame()

    def _build_process(self, members: list[str]) -> Process:
        views = {n.kind: v for n, v in build_views(members).items() if n.process == self.process_id}
        process = Process.create(
            self.process_id,
            views,
            self.config.structure,
            handover_bytes_max=self.limits.handover_bytes_max,
            hurry=True,
        )
        return attach(process, self.entry_store)


def _directory_name(process_id: str) -> str:
    """A file name for a process id (an address has a colon, an IPv6 one brackets)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in process_id)


async def bind(listen: Address) -> list[trio.SocketListener]:
    try:
        return await trio.open_tcp_listeners(listen.port, host=listen.host)
    except OSError as e:
        raise DaemonError(f"cannot listen on {listen}: {e.strerror or e}") from None

