"""The daemon: one process of the cluster on trio, driving the unchanged pure core.

Theory of operation
-------------------
One task, the *owner*, is the only one that touches the :class:`Host` (and through it
the :class:`~skueue.core.process.Process`).  Everything else feeds it through one bounded
channel, the inbox: a reader task per incoming connection (peers and clients) and the
owner's own pacing timer.  Each step the owner takes every input waiting (up to a bound),
handles them, ticks when a tick is due, and hands the frames it produced to one writer
task per connection, one coalesced blob per connection per step.

Pacing: a tick runs at once when a batch with operations in it can go up (or the
cluster was busy a moment ago); when only an empty batch can, the tick waits a delay
that doubles from ``idle_tick_min_ms`` to ``idle_tick_max_ms`` (an idle cluster keeps
its tree turning slowly instead of spinning); otherwise ticks follow input.

Backpressure: a client may have ``requests_per_client_max`` requests outstanding; its
reader stops reading until replies go out, so a fast client slows down instead of
growing our buffers.

Errors: a peer or client that sends something malformed (:class:`RemoteProtocolError`)
gets one structured warning in the log, an error reply where it waits, and its
connection closed; everyone else is served on.
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import structlog
import trio

from skueue.core.effects import Effect
from skueue.core.errors import PeerError
from skueue.core.ops import Structure
from skueue.core.process import Process, TickDue
from skueue.overlay.labels import Kind, node_ref
from skueue.overlay.ring import build_views
from skueue.runtime.address import Address, AddressError, parse_address
from skueue.runtime.connections import frames
from skueue.runtime.directory import Directory
from skueue.runtime.errors import DaemonError
from skueue.runtime.handshake import check_distinct, parse_peer_hello, reachable
from skueue.runtime.host import COUNTER_NAMES, Host
from skueue.runtime.inputs import (
    ClientError,
    Input,
    JoinStart,
    PeerControl,
    PeerGone,
    PeerHello,
    PeerInput,
)
from skueue.runtime.limits import Limits
from skueue.runtime.logging import DEBUG_LOGS
from skueue.runtime.peers import PeerLinks, parse_peer_frame
from skueue.runtime.resources import files_needed, raise_open_files_limit
from skueue.runtime.sessions import DISCONNECTED, ClientGone, ClientInput, ClientSessions
from skueue.runtime.stats import StatsGathering
from skueue.wire.client_protocol import (
    PROTOCOL_VERSION,
    ClientRequest,
    InsertRequest,
    JoinClusterRequest,
    LeaveRequest,
    RemoveRequest,
    StatsRequest,
    limits_for_clients,
)
from skueue.wire.errors import RemoteProtocolError
from skueue.wire.framing import FrameDecoder, pack, pack_many

log = structlog.get_logger("skueued")


@attrs.frozen
class DaemonConfig:
    listen: Address
    peers: tuple[Address, ...] = ()
    process_id: str | None = None
    structure: Structure = Structure.QUEUE
    limits: Limits = Limits()
    join: Address | None = None  # join the cluster this daemon belongs to (SPEC §8)


class Daemon:
    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.limits = config.limits
        self.inbox_send, self.inbox = trio.open_memory_channel[Input](self.limits.inbox_items_max)
        self.sessions = ClientSessions(self.limits, self.inbox_send, self._welcome)
        self.ready = trio.Event()
        self.host: Host | None = None
        self.address: Address = config.listen
        self.process_id = config.process_id or ""
        self.links: PeerLinks | None = None
        self.directory: Directory | None = None
        # The newest incoming session of each peer, and how to end it (a bad frame).
        self.peer_sessions: dict[str, tuple[int, trio.CancelScope]] = {}
        self.session_numbers = itertools.count(1)
        self.stats = StatsGathering(self.limits.stats_timeout_s)
        self.nursery: trio.Nursery | None = None
        # Membership: clients waiting for a join or a leave to go through.
        self.joined = trio.Event()
        self.left = trio.Event()
        self.join_waiters: list[tuple[int, int]] = []
        self.pending_join_effects: list[Effect] = []
        self.leave_waiters: list[tuple[int, int]] = []

    # -- start-up ---------------------------------------------------------------------

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
        self.address = Address(listen.host, port)
        self.process_id = self.config.process_id or str(self.address)
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            nursery.start_soon(trio.serve_listeners, self._on_connection, listeners)
            self.directory = Directory(self.process_id, self.address)
            self.links = PeerLinks(
                self.process_id, self.address, self.limits, nursery, self.directory
            )
            if self.config.join is not None:
                seed = await self.links.connect_seed(self.config.join, self.limits.join_timeout_s)
                self.host = Host(self._joining_process(seed))
                members = 0
            else:
                peers = await self.links.connect_all(self.config.peers)
                check_distinct(peers)
                ids = [self.process_id, *dict.fromkeys(peers.values())]
                self.host = Host(self._build_process(ids))
                members = len(ids)
            nursery.start_soon(self._owner)
            self.ready.set()
            if self.config.join is not None:
                await self.joined.wait()
            log.info(
                "ready",
                process=self.process_id,
                listen=str(self.address),
                members=members or "joined",
                structure=self.config.structure.value,
            )
            task_status.started(self.address)

    def _welcome(self) -> list[Any]:
        return [
            "welcome",
            self.process_id,
            self.config.structure.value,
            PROTOCOL_VERSION,
            limits_for_clients(self.limits),
        ]

    def _joining_process(self, seed: str) -> Process:
        contact = node_ref(seed, Kind.LEFT)
        process = Process.create_joining(
            self.process_id,
            contact,
            self.config.structure,
            handover_bytes_max=self.limits.handover_bytes_max,
        )
        self.pending_join_effects = process.join()
        return process

    def _build_process(self, members: list[str]) -> Process:
        views = {n.kind: v for n, v in build_views(members).items() if n.process == self.process_id}
        return Process.create(
            self.process_id,
            views,
            self.config.structure,
            handover_bytes_max=self.limits.handover_bytes_max,
        )

    # -- connections ------------------------------------------------------------------

    async def _on_connection(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder(self.limits.frame_bytes_max)
        async with stream:  # the error reply below must go out before the stream closes
            try:
                hello, rest = await self.sessions.greet(stream, decoder)
                if isinstance(hello, list) and hello[:1] == ["hello-peer"]:
                    await self._peer_session(stream, decoder, hello, rest)
                elif isinstance(hello, list) and hello[:1] == ["hello-client"]:
                    await self.ready.wait()
                    await self.sessions.serve(stream, decoder, rest, hello)
                else:
                    raise RemoteProtocolError(f"expected a hello, got {hello!r:.60}")
            except RemoteProtocolError as e:
                log.warning("bad input, closing connection", error=str(e))
                await _try_send(stream, pack(["error", None, str(e)]))
            except DISCONNECTED:
                pass  # an abrupt disconnect: nothing to answer

    async def _peer_session(
        self, stream: trio.SocketStream, decoder: FrameDecoder, hello: Any, rest: list[Any]
    ) -> None:
        assert self.links is not None  # peers are served once the links exist
        peer, advertised, nonce = parse_peer_hello(hello)
        address = reachable(advertised, stream)
        if not self.links.same_incarnation(peer, nonce):
            raise RemoteProtocolError(
                f"{peer} restarted without its state; the cluster cannot take it back "
                "(no durable storage yet): restart the whole cluster"
            )
        await stream.send_all(pack(self.links.hello()))
        log.debug("peer connected", peer=peer)
        session = next(self.session_numbers)
        with trio.CancelScope() as scope:
            self.peer_sessions[peer] = (session, scope)
            await self.inbox_send.send(PeerHello(peer, address, session))
            try:
                async for frame in frames(stream, decoder, rest):
                    parsed = parse_peer_frame(frame)
                    if isinstance(parsed, tuple):
                        kind, message = parsed
                        await self.inbox_send.send(PeerInput(peer, kind, message))
                    else:
                        await self.inbox_send.send(PeerControl(peer, parsed))
            finally:
                if self.peer_sessions.get(peer, (0,))[0] == session:
                    del self.peer_sessions[peer]
                self.inbox_send.send_nowait(PeerGone(peer, session))  # the inbox is large

    # -- the owner --------------------------------------------------------------------

    async def _owner(self) -> None:
        assert self.host is not None and self.links is not None
        host, limits = self.host, self.limits
        host.apply(self.pending_join_effects)
        self.pending_join_effects = []
        last_tick = trio.current_time()
        idle_delay = limits.idle_tick_min_ms / 1000
        while True:
            due = host.process.tick_due()
            now = trio.current_time()
            if due is TickDue.NOW:
                wait = 0.0
            elif due is TickDue.IDLE:
                wait = max(0.0, last_tick + idle_delay - now)
            else:
                wait = limits.wait_tick_ms / 1000
            wait = min(
                wait, self.stats.seconds_to_deadline(now), host.seconds_to_deadline(now)
            )
            inputs: list[Input] = []
            with trio.move_on_after(wait):
                inputs.append(await self.inbox.receive())
            while len(inputs) < limits.inputs_per_step_max:
                try:
                    inputs.append(self.inbox.receive_nowait())
                except trio.WouldBlock:
                    break
            for item in inputs:
                self._dispatch(item)
            now = trio.current_time()
            due = host.process.tick_due()
            if due is TickDue.NOW:
                idle_delay = limits.idle_tick_min_ms / 1000
            if due is TickDue.NOW or (due is TickDue.IDLE and now - last_tick >= idle_delay):
                self._tick()
                last_tick = now
                if due is TickDue.IDLE:
                    idle_delay = min(limits.idle_tick_max_ms / 1000, idle_delay * 2)
            for rid_client, frame in self.stats.expired(now):
                host.client_frames.append((rid_client, frame))
            host.expire(now, self._why_no_answer)
            self._membership_progress()
            await self._flush()
            await trio.lowlevel.checkpoint()

    def _tick(self) -> None:
        assert self.host is not None
        if not DEBUG_LOGS.enabled:
            self.host.tick()
            return
        before = self.host.process.stats().nodes
        self.host.tick()
        for name, node in self.host.process.stats().nodes.items():
            if node.batches_sent != before[name].batches_sent and node.last_batch_operations:
                # idle trees turn empty batches all the time: only batches with operations
                log.debug("batch up", process=self.process_id, node=name,
                          batch_ops=node.last_batch_operations)

    def _dispatch(self, item: Input) -> None:
        assert self.host is not None and self.links is not None
        host = self.host
        match item:
            case PeerInput(peer=peer, kind=kind, message=message):
                try:
                    host.peer_message(kind, message)
                    if self.directory is not None and not self.directory.is_member(peer):
                        self._gossip(self.directory.confirm(peer))
                except PeerError as e:
                    # The peer's fault: the core changed nothing; drop the link so that a
                    # peer that sends garbage is not served on.
                    log.warning(
                        "rejected a message from a peer; dropping its link",
                        peer=peer,
                        message=message.describe(),
                        error=str(e),
                    )
                    self._drop_peer_session(peer)
            case PeerHello(peer=peer, address=address, session=_):
                assert self.directory is not None
                self.links.mark_up(peer)
                self._gossip(self.directory.on_hello(peer, address))
            case PeerGone(peer=peer, session=session):
                assert self.directory is not None
                self.directory.forget_contact(peer)
                if peer not in self.peer_sessions or self.peer_sessions[peer][0] < session:
                    self.links.mark_down(peer)
            case ClientInput(client=client, request=request):
                self._request(client, request)
            case ClientGone(client=client):
                host.client_gone(client)
            case JoinStart(seed=seed, client=client, rid=rid):
                host.process = self._joining_process(seed)
                host.apply(self.pending_join_effects)
                self.pending_join_effects = []
                self.joined = trio.Event()
                self.join_waiters.append((client, rid))
            case ClientError(client=client, rid=rid, message=message):
                host.client_frames.append((client, ["error", rid, message, "unavailable"]))
            case PeerControl(peer=peer, frame=frame):
                self._control(peer, frame)

    def _request(self, client: int, request: ClientRequest) -> None:
        assert self.host is not None
        host = self.host
        match request:
            case InsertRequest(rid=rid, values=values):
                if not self._refuse_while_leaving(client, rid):
                    host.insert(client, rid, list(values), self._deadline(client))
            case RemoveRequest(rid=rid, count=count):
                if not self._refuse_while_leaving(client, rid):
                    host.remove(client, rid, count, self._deadline(client))
            case LeaveRequest(rid=rid):
                self._leave(client, rid)
            case JoinClusterRequest(rid=rid, seed=seed):
                self._join(client, rid, seed)
            case StatsRequest(rid=rid):
                assert self.directory is not None and self.links is not None
                peers = self.directory.others()
                own = self._own_stats()
                now = trio.current_time()
                self.stats.start(client, rid, own, peers, now, self.links.down())
                for peer in peers:
                    host.peer_frames[peer].append(["stats-query", self.stats.last_qid])
                self._stats_ready()

    def _own_stats(self) -> dict[str, Any]:
        """This process's part of ``skueue stats``: the host's, plus the elements whose
        replies never reached their client (counted by the sessions)."""
        assert self.host is not None
        stats = self.host.stats()
        stats["dropped_results"] += self.sessions.dropped_results
        return {**stats, "address": str(self.address)}

    def _refuse_while_leaving(self, client: int, rid: int) -> bool:
        """A leaving process takes no new operations: say so, retryably, instead of
        letting the core refuse them (which used to stop the daemon)."""
        assert self.host is not None
        if not self.host.process.leaving:
            return False
        message = "this daemon is leaving the cluster; send the request to another member"
        self.host.client_frames.append((client, ["error", rid, message, "unavailable"]))
        return True

    def _deadline(self, client: int) -> float:
        session = self.sessions.clients.get(client)
        asked = None if session is None else session.request_timeout_s
        timeout = self.limits.request_timeout_s if asked is None else asked
        return trio.current_time() + min(timeout, self.limits.request_timeout_s_max)

    def _why_no_answer(self) -> str:
        """What the daemon knows of why the cluster is not answering (for timeouts)."""
        assert self.links is not None and self.directory is not None
        down = self.links.down()
        if not down:
            return "no member is known to be down (overloaded, or in an update phase?)"

        def named(process: str) -> str:
            address = str(self.directory.address(process) if self.directory else None)
            return process if address == process else f"{process} at {address}"

        return "members unreachable: " + ", ".join(
            f"{named(p)} ({'restarted without its state' if p in self.links.restarted else 'down'}"
            f" for {s:.0f} s)"
            for p, s in down.items()
        )

    def _control(self, peer: str, frame: list[Any]) -> None:
        assert self.host is not None and self.directory is not None and self.links is not None
        host = self.host
        match frame[0]:
            case "stats-query":
                answer = self._own_stats()
                host.peer_frames[peer].append(["stats-answer", frame[1], answer])
            case "stats-answer":
                self.stats.answer(peer, frame[1], frame[2])
                self._stats_ready()
            case _:
                try:
                    out, departure = self.directory.on_gossip(peer, frame)
                except RemoteProtocolError as e:
                    log.warning("bad gossip; dropping the peer's link", peer=peer, error=str(e))
                    self._drop_peer_session(peer)
                    return
                self._gossip(out)
                if departure is not None:
                    log.info("a member left the cluster", member=departure.process)
                    self.links.forget(departure.process)
                    if departure.heir == self.process_id:
                        host.inherit(departure.process, departure.counters)

    def _gossip(self, out: list[tuple[str, list[Any]]]) -> None:
        assert self.host is not None
        for to, frame in out:
            self.host.peer_frames[to].append(frame)

    def _drop_peer_session(self, peer: str) -> None:
        session = self.peer_sessions.get(peer)
        if session is not None:
            session[1].cancel()

    # -- membership -------------------------------------------------------------------

    def _leave(self, client: int, rid: int) -> None:
        assert self.host is not None
        host = self.host
        stats = host.process.stats()
        if stats.alone:
            # The last member: nobody can take its data, and no update phase can run.
            held = stats.held_elements + host.pending_ops
            if held:
                message = (
                    f"this daemon is the last member of its cluster and holds {held} "
                    "elements: they would have nowhere to go; drain it first"
                )
                host.client_frames.append((client, ["error", rid, message, "invalid"]))
                return
            log.info("the last member leaves; the cluster is empty", process=self.process_id)
            host.client_frames.append((client, ["done", rid, []]))
            self.left.set()
            return
        assert self.links is not None
        if self.links.down() and not host.process.leaving:
            # A leave needs an update phase, which needs every member: it would hang.
            message = f"cannot leave while members are unreachable ({self._why_no_answer()})"
            host.client_frames.append((client, ["error", rid, message, "unavailable"]))
            return
        if not host.process.leaving:
            why = host.process.why_not_leave()
            if why is not None:
                host.client_frames.append((client, ["error", rid, why, "unavailable"]))
                return
            host.process.leave()
        log.info("leaving", process=self.process_id)
        self.leave_waiters.append((client, rid))

    def _join(self, client: int, rid: int, seed: str) -> None:
        assert self.host is not None and self.nursery is not None
        problem = alone_and_empty(self.host)
        if problem:
            self.host.client_frames.append((client, ["error", rid, problem, "invalid"]))
            return
        try:
            address = parse_address(seed)
        except AddressError as e:
            self.host.client_frames.append((client, ["error", rid, str(e), "invalid"]))
            return
        self.nursery.start_soon(self._reach_seed, address, client, rid)

    async def _reach_seed(self, address: Address, client: int, rid: int) -> None:
        assert self.links is not None
        try:
            seed = await self.links.connect_seed(address, self.limits.join_timeout_s)
        except DaemonError as e:
            await self.inbox_send.send(ClientError(client, rid, str(e)))
            return
        await self.inbox_send.send(JoinStart(seed, client, rid))

    def _membership_progress(self) -> None:
        """Answer the clients waiting for a join or a leave once it went through."""
        assert self.host is not None
        process = self.host.process
        if process.joined and not self.joined.is_set():
            self.joined.set()
            log.info("joined", process=self.process_id)
            for client, rid in self.join_waiters:
                self.host.client_frames.append((client, ["done", rid, []]))
            self.join_waiters.clear()
        if process.departed and not self.left.is_set():
            log.info("left the cluster; its data is held by the others", process=self.process_id)
            self._announce_departure()
            for client, rid in self.leave_waiters:
                self.host.client_frames.append((client, ["done", rid, []]))
            self.leave_waiters.clear()
            self.left.set()

    def _announce_departure(self) -> None:
        """Tell every member this process is gone, and hand its counters to one heir so
        that the cluster's totals in ``skueue stats`` stay whole."""
        assert self.host is not None and self.directory is not None
        counters = self._own_stats()
        frame = [
            "departed",
            self.process_id,
            self.directory.heir(),
            {k: counters[k] for k in COUNTER_NAMES},
        ]
        self._gossip([(p, frame) for p in self.directory.others()])

    async def drain_links(self, timeout_s: float = 5.0) -> None:
        """Give the last messages (a leaver's hand-over) time to reach the peers."""
        with trio.move_on_after(timeout_s):
            while self.links is not None and any(
                ch.statistics().current_buffer_used for ch in self.links.channels.values()
            ):
                await trio.sleep(0.01)
            await trio.sleep(0.1)

    def _stats_ready(self) -> None:
        assert self.host is not None
        self.host.client_frames.extend(self.stats.complete())

    async def _flush(self) -> None:
        assert self.host is not None and self.links is not None
        peer_frames, client_frames = self.host.take_frames()
        if self.links.held:
            await self.links.release_held()
        for peer, batch in peer_frames.items():
            await self.links.send(peer, pack_many(batch))
        for client, frame in client_frames:
            self.sessions.deliver(client, frame)


async def bind(listen: Address) -> list[trio.SocketListener]:
    try:
        return await trio.open_tcp_listeners(listen.port, host=listen.host)
    except OSError as e:
        raise DaemonError(f"cannot listen on {listen}: {e.strerror or e}") from None


def alone_and_empty(host: Host) -> str | None:
    """Why this daemon may not join another cluster (None: it may): only a one-process
    cluster with nothing stored and nothing pending can give up its own ring."""
    stats = host.process.stats()
    if not stats.alone:
        return "only a daemon that is alone (a one-process cluster) can join another cluster"
    if stats.held_elements + host.pending_ops:
        return "this daemon holds elements; drain it before it joins another cluster"
    return None


async def _try_send(stream: trio.SocketStream, blob: bytes) -> None:
    try:
        with trio.move_on_after(1):
            await stream.send_all(blob)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass
