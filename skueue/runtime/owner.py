"""The owner: the one task that touches the host, and through it the core.

Each step it takes every input waiting in the inbox (up to ``inputs_per_step_max``),
dispatches them, ticks when a tick is due, expires what passed its deadline, and hands
the frames produced to the writers, one coalesced blob per connection per step.

Pacing: a tick runs at once when a batch can go up and operations wait in this process
(or another process hurried it, see ``Process.tick_due``); when only an empty batch can,
the tick waits a delay that doubles from ``idle_tick_min_ms`` to ``idle_tick_max_ms`` (an
idle cluster keeps its tree turning slowly instead of spinning); otherwise ticks follow
input.

Errors by blame: a peer message the core refuses (:class:`PeerError`, the core unchanged)
costs that peer its link.  Anything else raised while handling an input is our own bug:
the input is logged with the traceback and the daemon stops, loudly, instead of serving
on from a state nobody can vouch for.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from skueue.core.errors import PeerError
from skueue.core.process import TickDue
from skueue.host.directory import vouches
from skueue.host.retries import RetryKey
from skueue.runtime.inputs import (
    ClientError,
    Input,
    JoinStart,
    PeerControl,
    PeerGone,
    PeerHello,
    PeerInput,
    RemovalProbed,
)
from skueue.runtime.logging import DEBUG_LOGS
from skueue.runtime.member_removal import MemberRemoval
from skueue.runtime.membership_waiters import MembershipWaiters
from skueue.runtime.sessions import ClientGone, ClientInput
from skueue.runtime.snapshots import capture
from skueue.runtime.state import log
from skueue.wire.client_protocol import (
    ClientRequest,
    ConfigureRequest,
    CreateRequest,
    DeleteRequest,
    InsertRequest,
    JoinClusterRequest,
    LeaseRequest,
    LeaveRequest,
    PeekRequest,
    RemoveMemberRequest,
    RemoveRequest,
    StatsRequest,
)
from skueue.wire.client_replies import UNAVAILABLE, Done, ErrorReply, Welcome
from skueue.wire.errors import RemoteProtocolError
from skueue.wire.peer import encode_message

# Acknowledgements of peers' frames go at most this often, or after this many frames.
ACK_DELAY_S = 0.02
ACK_FRAMES_MAX = 1024


def lease_clock_ms() -> int:
    """The clock leases run on: the system's monotonic clock, which goes on across a
    restart of the daemon (trio's clock starts at a random offset each time)."""
    return int(time.monotonic() * 1000)


class OwnerLoop(MembershipWaiters, MemberRemoval):
    async def owner(self) -> None:
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
            wait = min(wait, self.stats.seconds_to_deadline(now), host.seconds_to_deadline(now),
                       self.removal_seconds_to_deadline(now))  # fmt: skip
            lease_deadline = host.process.leases.table.next_deadline()
            if lease_deadline is not None:
                wait = min(wait, max(0.0, (lease_deadline - lease_clock_ms()) / 1000))
            if self.ack_due is not None:
                wait = min(wait, max(0.0, self.ack_due - now))
            inputs = await self._first_input(wait)
            while len(inputs) < limits.inputs_per_step_max:
                try:
                    inputs.append(self.inbox.receive_nowait())
                except trio.WouldBlock:
                    break
            self.clock_read = False
            if host.process.leases.needs_clock():
                self._read_lease_clock()  # before the inputs: leases granted now start at it
            for item in inputs:
                self._handle_input(item)
            now = trio.current_time()
            due = host.process.tick_due()
            if due is TickDue.NOW:
                idle_delay = limits.idle_tick_min_ms / 1000
            if due is TickDue.NOW or (due is TickDue.IDLE and now - last_tick >= idle_delay):
                self._tick()
                last_tick = now
                if due is TickDue.IDLE:
                    idle_delay = min(limits.idle_tick_max_ms / 1000, idle_delay * 2)
            host.client_frames.extend(self.stats.expired(now))
            if self.removal_checks:
                self._removal_ready(now)
            for session, rid in host.expire(now, self._why_no_answer):
                self._log(["T", session, rid])
            for number in host.waits_ended(now):
                self._log(["w", number])
                host.end_wait(number)
            if host.orphan_leases:  # granted to clients gone meanwhile: back they go
                self._end_leases("closed", host.orphan_leases)
                host.orphan_leases = []
            host.queue_stats.sample(now)
            self.membership_progress()
            if self.input_log is not None:
                self.input_log.sync(now)  # before anything of this step goes out
            if self.entry_store is not None:
                self.entry_store.end_step()
            self._flush()
            self._snapshot_if_due()
            await trio.lowlevel.checkpoint()

    async def _first_input(self, wait: float) -> list[Input]:
        """The next input, waiting up to ``wait`` seconds for it (none: an empty list).
        Under load one is waiting already, and taking it costs no cancel scope."""
        try:
            return [self.inbox.receive_nowait()]
        except trio.WouldBlock:
            pass
        with trio.move_on_after(wait):
            return [await self.inbox.receive()]
        return []

    def _tick(self) -> None:
        assert self.host is not None
        self._log(["t"])
        process = self.host.process
        before = process.batch_counts()
        if not self.host.tick():
            return
        now = trio.current_time()
        after = process.batch_counts()
        for kind, (sent, ops), (earlier, _) in zip(process.nodes, after, before, strict=True):
            if sent == earlier:
                continue
            node = kind.name.lower()
            self.tallies.batch(node, ops, now)
            if ops and DEBUG_LOGS.enabled:
                # idle trees turn empty batches all the time: only batches with operations
                log.debug("batch up", process=self.process_id, node=node, batch_ops=ops)

    def _handle_input(self, item: Input) -> None:
        try:
            self._dispatch(item)
        except Exception:
            # Our bug (a peer's fault is PeerError, handled below): say which input did
            # it, then stop rather than serve on from a half-changed state.
            log.critical(
                "bug: an input broke the daemon; stopping",
                process=self.process_id,
                input=describe_input(item),
                exc_info=True,
            )
            raise

    def _dispatch(self, item: Input) -> None:
        assert self.host is not None and self.links is not None
        host = self.host
        match item:
            case PeerInput(peer=peer, kind=kind, message=message, number=number, encoded=encoded):
                if self._refused(peer):
                    return
                if encoded is None:
                    encoded = encode_message(message)
                self._log(["p", peer, number, int(kind), encoded])
                self._handled(peer, number)
                if self._removed_join(message):
                    return  # of a member removed since (runtime/member_removal.py)
                try:
                    host.peer_message(kind, message)
                    directory = self.directory
                    if directory is not None and not directory.is_member(peer) and vouches(message):
                        self._send_control(directory.confirm(peer))
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
            case PeerHello(peer=peer, address=address, static=static, nonce=nonce):
                assert self.directory is not None
                directory = self.directory
                if static and not directory.is_member(peer) and peer not in directory.departed:
                    # It said hello while this daemon still met its own peers; now that
                    # it knows them, it is none of them: refused, and it learns so at its
                    # next hello (it is closed now), before it is added to anything.
                    self._refuse_stranger(peer, nonce, address)
                    self._drop_peer_session(peer)
                    return
                self._log(["h", peer, str(address)])
                self.links.mark_up(peer)
                self._send_control(self.directory.on_hello(peer, address))
            case PeerGone(peer=peer, session=session):
                assert self.directory is not None
                self.directory.forget_contact(peer)
                if peer not in self.peer_sessions or self.peer_sessions[peer][0] < session:
                    self.links.mark_down(peer)
            case ClientInput(client=client, request=request):
                self._request(client, request)
            case ClientGone(client=client):
                self.tallies.client_gone(client)
                for number in host.waits_of(client):  # nobody is left to wait for
                    self._log(["w", number])
                    host.end_wait(number)
                self._end_leases("closed", host.leases_of(client))
                host.client_gone(client)
            case JoinStart(seed=seed, client=client, rid=rid):
                assert self.directory is not None
                at = self.directory.address(seed)
                self._log(["J", seed, None if at is None else str(at)])
                host.process = self._joining_process(seed)
                host.apply(self.pending_join_effects)
                self.pending_join_effects = []
                self.joined = trio.Event()
                self.join_waiters.append((client, rid))
            case RemovalProbed():
                self._probed(item)
            case ClientError(client=client, rid=rid, message=message):
                host.client_frames.append((client, ErrorReply(rid, message, UNAVAILABLE)))
            case PeerControl(peer=peer, frame=frame, number=number):
                if self._refused(peer):
                    return
                self._log(["c", peer, number, frame])
                self._handled(peer, number)
                self._control(peer, frame)

    def _refused(self, peer: str) -> bool:
        """Frames of a peer refused as no member that were read before its session was
        closed: dropped, neither handled nor logged."""
        directory = self.directory
        return directory is not None and peer in directory.refused

    def _snapshot_if_due(self) -> None:
        """Compact the input log into a snapshot once it has grown past its limit, or
        early under the disk reserve to free what dequeues took (between steps:
        everything of this step is logged, synced and flushed)."""
        input_log, store, disk = self.input_log, self.entry_store, self.disk
        if input_log is None:
            return
        if not input_log.snapshot_due(self.limits.snapshot_log_bytes) and not (
            disk is not None
            and store is not None
            and disk.compact_now(trio.current_time(), bool(store.removed))
        ):
            return
        assert self.host is not None and self.directory is not None and self.links is not None
        if store is not None:
            store.before_snapshot()
        host, directory, inbound, links = self.host, self.directory, self.inbound, self.links
        input_log.snapshot(lambda f: capture(f, host, directory, inbound, links, store))
        if store is not None:
            store.after_snapshot()

    def _acknowledge(self) -> None:
        """Tell peers what was handled of their frames: at most every ``ACK_DELAY_S``, or
        at once past ``ACK_FRAMES_MAX`` frames.  Each ack wakes the peer's ack reader, so
        one per step per peer cost a fifth of the throughput; acks only free the peer's
        outbox, so a short delay costs nothing else."""
        now = trio.current_time()
        due = self.ack_due is not None and now >= self.ack_due
        waiting = False
        for inbound in self.inbound.values():
            behind = inbound.handled - inbound.acked
            if behind and (due or behind >= ACK_FRAMES_MAX):
                inbound.send_ack()
            waiting = waiting or inbound.handled != inbound.acked or bool(inbound.unsent)
        if not waiting:
            self.ack_due = None
        elif due or self.ack_due is None:
            self.ack_due = now + ACK_DELAY_S

    def _handled(self, peer: str, number: int) -> None:
        """Frame ``number`` of the peer's link is being handled: the next ack says so.
        (Counted first: a frame the core refuses is not wanted again either.)"""
        self.inbound[peer].handled = number

    def _request(self, client: int, request: ClientRequest) -> None:
        assert self.host is not None
        host = self.host
        self.tallies.request(client, request.rid, request_kind(request), trio.current_time())
        match request:
            case InsertRequest(rid=rid, values=values, queue=queue, stack=stack):
                key = self._retry_key(client, rid)
                if not self._refuse_while_leaving(client, rid) and not self._refuse_for_space(
                    client, rid, key
                ):
                    deadline = self._deadline(client)
                    priority, prefer = request.priority or 0, request.prefer_stack
                    self._log(["i", key and key[0], rid, list(values), queue, stack, priority,
                               prefer])  # fmt: skip
                    host.insert(client, rid, list(values), deadline, key, queue, stack, priority,
                                prefer)  # fmt: skip
            case RemoveRequest(rid=rid, count=count, queue=queue, stack=stack, wait_ms=wait_ms):
                if not self._refuse_while_leaving(client, rid):
                    deadline, key = self._deadline(client), self._retry_key(client, rid)
                    wait_until = None
                    if wait_ms is not None:  # a blocking remove: its time out starts later
                        wait_until = trio.current_time() + wait_ms / 1000
                        deadline += wait_ms / 1000
                    lease_ms, max_deliveries = request.lease_ms or 0, request.max_deliveries or 0
                    if lease_ms:
                        self._read_lease_clock()  # its lease may start in this very step
                    prefer, fetch, look = request.prefer_stack, request.fetch, request.look
                    self._log(["r", key and key[0], rid, count, queue, stack, wait_ms,
                               lease_ms, max_deliveries, prefer, fetch, look])  # fmt: skip
                    host.remove(client, rid, count, deadline, key, queue, stack, wait_until,
                                lease_ms, max_deliveries, prefer, fetch, look)  # fmt: skip
            case CreateRequest(rid=rid, queue=queue, stack=stack, max_deliveries=limit):
                if not self._refuse_while_leaving(client, rid):
                    deadline, key = self._deadline(client), self._retry_key(client, rid)
                    levels = request.priorities or 1
                    self._log(["C", key and key[0], rid, queue, stack, limit, levels])
                    host.create(client, rid, queue, stack, limit or 0, levels, deadline, key)
            case ConfigureRequest(rid=rid, queue=queue, max_deliveries=limit):
                if not self._refuse_while_leaving(client, rid):
                    deadline, key = self._deadline(client), self._retry_key(client, rid)
                    self._log(["K", key and key[0], rid, queue, limit])
                    host.configure(client, rid, queue, limit, deadline, key)
            case DeleteRequest(rid=rid, queue=queue):
                if not self._refuse_while_leaving(client, rid):
                    deadline, key = self._deadline(client), self._retry_key(client, rid)
                    self._log(["d", key and key[0], rid, queue])
                    host.delete(client, rid, queue, deadline, key)
            case PeekRequest(rid=rid, queue=queue):
                if not self._refuse_while_leaving(client, rid):
                    deadline, key = self._deadline(client), self._retry_key(client, rid)
                    self._log(["v", key and key[0], rid, queue])
                    host.peek(client, rid, queue, deadline, key)
            case LeaseRequest(kind=kind, rid=rid, leases=leases, lease_ms=lease_ms):
                done = self._end_leases(kind, host.leases_held(client, leases), lease_ms)
                host.client_frames.append((client, Done(rid, [i in done for i in leases])))
            case LeaveRequest(rid=rid):
                self._leave(client, rid)
            case JoinClusterRequest(rid=rid, seed=seed):
                self._join(client, rid, seed)
            case RemoveMemberRequest(rid=rid, members=members):
                self._remove_members(client, rid, members)
            case StatsRequest(rid=rid):
                assert self.directory is not None and self.links is not None
                peers = self.directory.others()
                own = self._own_stats()
                now = trio.current_time()
                self.stats.start(client, rid, own, peers, now, self.links.down())
                self._send_control([(peer, ["stats-query", self.stats.last_qid]) for peer in peers])
                self._stats_ready()

    def _read_lease_clock(self) -> None:
        """Give the core the lease clock, once per step (logged: the replay reads it)."""
        assert self.host is not None
        if not self.clock_read:
            self.clock_read = True
            now_ms = lease_clock_ms()
            self._log(["k", now_ms])
            self.host.clock(now_ms)

    def _end_leases(self, how: str, ids: list[int], lease_ms: int | None = None) -> set[int]:
        """Log, then carry out, an ack, extend or return of leases (Host.end_leases)."""
        assert self.host is not None
        if not ids:
            return set()
        self._log(["L", how, ids, lease_ms])
        return self.host.end_leases(how, ids, lease_ms)

    def _refuse_while_leaving(self, client: int, rid: int) -> bool:
        """A leaving process takes no new operations: say so, retryably, instead of
        letting the core refuse them (which used to stop the daemon)."""
        assert self.host is not None
        if not self.host.process.leaving:
            return False
        message = "this daemon is leaving the cluster; send the request to another member"
        self.host.client_frames.append((client, ErrorReply(rid, message, UNAVAILABLE)))
        return True

    def _refuse_for_space(self, client: int, rid: int, key: RetryKey | None) -> bool:
        """Below the disk reserve a new enqueue is refused, retryably (runtime/disk_space.py);
        a retry of one this daemon already took gets its first outcome, as always."""
        assert self.host is not None
        if self.disk is None:
            return False
        shortage = self.disk.shortage(trio.current_time())
        if shortage is None or (key is not None and self.host.knows(key)):
            return False
        self.disk.refused += 1
        self.host.client_frames.append((client, ErrorReply(rid, shortage, UNAVAILABLE)))
        return True

    def _retry_key(self, client: int, rid: int) -> RetryKey | None:
        session = self.sessions.clients.get(client)
        return None if session is None or session.session is None else (session.session, rid)

    def _deadline(self, client: int) -> float:
        session = self.sessions.clients.get(client)
        asked = None if session is None else session.request_timeout_s
        timeout = self.limits.request_timeout_s if asked is None else asked
        return trio.current_time() + min(timeout, self.limits.request_timeout_s_max)

    def _control(self, peer: str, frame: list[Any]) -> None:
        assert self.host is not None and self.directory is not None and self.links is not None
        host = self.host
        match frame[0]:
            case "stats-query":
                answer = self._own_stats()
                self._send_control([(peer, ["stats-answer", frame[1], answer])])
            case "stats-answer":
                self.stats.answer(peer, frame[1], frame[2])
                self._stats_ready()
            case "remove-check" | "remove-answer" | "removed":
                try:
                    self._removal_control(peer, frame)
                except RemoteProtocolError as e:
                    log.warning("bad removal frame; dropping the peer's link", peer=peer,
                                error=str(e))  # fmt: skip
                    self._drop_peer_session(peer)
            case _:
                try:
                    out, departure = self.directory.on_gossip(peer, frame)
                except RemoteProtocolError as e:
                    log.warning("bad gossip; dropping the peer's link", peer=peer, error=str(e))
                    self._drop_peer_session(peer)
                    return
                self._send_control(out)
                if departure is not None:
                    log.info("a member left the cluster", member=departure.process)
                    self.links.forget(departure.process)
                    if departure.heir == self.process_id:
                        host.inherit(departure.process, departure.counters, departure.queues)

    def _stats_ready(self) -> None:
        assert self.host is not None
        self.host.client_frames.extend(self.stats.complete())

    def _flush(self) -> None:
        assert self.host is not None and self.links is not None
        peer_frames, replies = self.host.take_frames()
        if self.links.unaddressed:
            self.links.start_addressed()
        for peer, batch in peer_frames.items():
            self.links.send(peer, batch)
        self._acknowledge()
        now = trio.current_time()
        for client, reply in replies:
            if not isinstance(reply, Welcome):
                outcome = (reply.code or "error") if isinstance(reply, ErrorReply) else "ok"
                self.tallies.replied(client, reply.rid, outcome, now)
            self.sessions.deliver(client, reply)


def request_kind(request: ClientRequest) -> str:
    """The request's name in the metrics: its kind, a blocking remove apart (its time
    includes the wait), a lease request by what it does (ack, nack, extend)."""
    match request:
        case InsertRequest():
            return "insert"
        case RemoveRequest(wait_ms=wait_ms):
            return "remove" if wait_ms is None else "remove_blocking"
        case LeaseRequest(kind=kind):
            return str(kind)
        case StatsRequest():
            return "stats"
        case CreateRequest():
            return "create"
        case ConfigureRequest():
            return "configure"
        case DeleteRequest():
            return "delete"
        case PeekRequest():
            return "peek"
        case JoinClusterRequest():
            return "join"
        case RemoveMemberRequest():
            return "remove_member"
        case LeaveRequest():
            return "leave"
    return "other"


def describe_input(item: Input) -> str:
    """One line for the log: the input's kind and, for a peer message, its describe()."""
    if isinstance(item, PeerInput):
        return f"from {item.peer}: {item.message.describe()}"
    return repr(item)[:300]
