"""The owner: the one task that holds the host and the input log, and the only writer of
the host's state.

Each step it takes what waits in the inbox (up to ``inputs_per_step_max``) and what it
reads itself from the plaintext connections that are ready (runtime/network/reactor.py),
turns each item into host inputs (:meth:`Owner.enter`: logged first when durable, then stepped),
ticks when a tick is due, enters what time made due (ended waits, timeouts), commits the
step's logged inputs in its replication group (runtime/group.py: written, synced,
committed), and only then carries out the step's effects: one coalesced write per peer
link, the replies to their clients.

Pacing: a tick runs at once when a batch can go up and operations wait in this process
(or another process hurried it, see ``Process.tick_due``); when only an empty batch can,
the tick waits a delay that doubles from ``idle_tick_min_ms`` to ``idle_tick_max_ms`` (an
idle cluster keeps its tree turning slowly instead of spinning); otherwise ticks follow
input.

Errors by blame: what a peer sent that the host refuses comes back as a ``DropPeer``
effect (the host unchanged) and costs that peer its link.  Anything raised while
stepping an input is our own bug: the input is logged with the traceback and the daemon
stops, loudly, instead of serving on from a state nobody can vouch for.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import trio

from skueue.core.effects import Send
from skueue.core.process import TickDue
from skueue.host.effects import (
    DropPeer,
    ForgetPeer,
    HostEffect,
    Joined,
    Left,
    Reply,
    SendControl,
    Warn,
)
from skueue.host.host import Host
from skueue.host.inputs import (
    ClientGone,
    ControlSent,
    FromClient,
    Hello,
    Input,
    JoinStart,
    LeaseClock,
    PeerControl,
    PeerGone,
    PeerMessage,
    Tick,
    TookOver,
)
from skueue.host.replies import INVALID, UNAVAILABLE, ErrorReply, Welcome
from skueue.runtime.copies import answer_copy
from skueue.runtime.deferred_inputs import DeferredInputs
from skueue.runtime.durability.disk_space import DiskSpace
from skueue.runtime.durability.entry_store import SnapshotEntryStore
from skueue.runtime.durability.input_log import InputLog
from skueue.runtime.durability.records import record_of
from skueue.runtime.durability.snapshots import capture
from skueue.runtime.group import ProcessGroup
from skueue.runtime.held_effects import HeldEffects, HeldStep
from skueue.runtime.inbox import (
    ChannelFrame,
    ClientError,
    CopyWanted,
    InboxItem,
    JoinReached,
    LinkClosed,
    PeerHello,
    RemovalProbed,
)
from skueue.runtime.member_removal import MemberRemoval
from skueue.runtime.network.client_reader import ClientInput
from skueue.runtime.network.daemon_channel import REPLICATION_FRAMES, TAKEN_ALWAYS
from skueue.runtime.operations.health import PhaseWatch, Readiness, readiness
from skueue.runtime.operations.logging import DEBUG_LOGS, describe_input
from skueue.runtime.operations.member_stats import member_stats
from skueue.runtime.operations.stats import StatsGathering
from skueue.runtime.replicas import DaemonReplicas, take_replication_frame, takes_channel_frame
from skueue.runtime.requests import ClientDesk, request_kind
from skueue.runtime.state import DaemonContext, log
from skueue.wire.peer import encode_message

# Acknowledgements of peers' frames go at most this often, or after this many frames.
ACK_DELAY_S = 0.02
ACK_FRAMES_MAX = 1024


def lease_clock_ms() -> int:
    """The clock leases run on: the system's monotonic clock, which goes on across a
    restart of the daemon (trio's clock starts at a random offset each time)."""
    return int(time.monotonic() * 1000)


class Owner:
    def __init__(
        self,
        ctx: DaemonContext,
        host: Host,
        input_log: InputLog | None = None,
        entry_store: SnapshotEntryStore | None = None,
        disk: DiskSpace | None = None,
    ) -> None:
        self.ctx = ctx
        self.host = host
        ctx.directory = host.directory
        ctx.members_known = True
        # The write-ahead log of inputs (None: an in-memory daemon), the replication
        # group that writes it (set at start, runtime/startup.py), and whether the host
        # is being replayed from it (runtime/replay.py): then nothing goes out.
        self.input_log = input_log
        self.group: ProcessGroup | None = None
        self.replaying = False
        # With more than one voter (``--replicas``): the group's replicas here, and what
        # waits while the group cannot take inputs (it is not leading yet, or it waits
        # for its commit to catch up before a snapshot).
        self.replicas: DaemonReplicas | None = None
        self.deferred = DeferredInputs()
        self.must_take_over = False  # the host's TookOver goes first once the group leads
        self.led = trio.Event()  # the group has led since the start: clients are served
        # The links start once the commit reaches the replay's last entry (its frames
        # numbered on them as in the last life): None, started.
        self.links_wait_for: int | None = None
        # A snapshot waits for its commit; one is wanted (a new copy starts from it).
        self.quiescing = self.snapshot_wanted = False
        # Where the DHT tables keep their elements
        # (None: in memory; runtime/durability/entry_store.py).
        self.entry_store = entry_store
        self.disk = disk  # the data directory's free space against the reserve (None: in memory)
        self.clock_read = False  # the lease clock went to the host in this step
        self.ack_due: float | None = None  # when the owner next acknowledges
        self.stats = StatsGathering(ctx.limits.stats_timeout_s)
        self.phase_watch = PhaseWatch()  # how long an update phase lasts (operations/health.py)
        self.joined, self.left = trio.Event(), trio.Event()
        if host.joined:
            self.joined.set()  # in the ring from the start: no join to wait for, or log
        self.removal = MemberRemoval(self)
        self.desk = ClientDesk(self)
        # What this step sends: frames per peer, replies per client, and the last frame
        # of each peer's link it took; held until the step is committed.
        self.peer_frames: dict[str, list[Any]] = defaultdict(list)
        self.replies: list[tuple[int, Any]] = []
        self.handled: dict[str, int] = {}
        self.held = HeldEffects()

    # -- inputs and effects -------------------------------------------------------------

    def enter(self, item: Input) -> None:
        """Log ``item`` (if it is of a kind the log keeps), step the host with it, and
        queue what that asks for."""
        if item.logged and self.group is not None and not self.replaying:
            self.group.stage(record_of(item))
        self.carry_out(self.host.step(item))

    def carry_out(self, effects: list[HostEffect]) -> None:
        for effect in effects:
            match effect:
                case Send(to=to, message=message):
                    frame = ["msg", int(to.kind), encode_message(message)]
                    self.peer_frames[to.process].append(frame)
                case Reply(client=client, reply=reply):
                    if not self.replaying:  # the last life's clients are gone
                        self.replies.append((client, reply))
                case SendControl(peer=peer, frame=frame):
                    self.peer_frames[peer].append(frame)
                case DropPeer(peer=peer, why=why, what=what):
                    if not self.replaying:
                        log.warning("rejected a message from a peer; dropping its link",
                                    peer=peer, message=what, error=why)  # fmt: skip
                        self.ctx.drop_peer_session(peer)
                case ForgetPeer(peer=peer, removed=removed):
                    self._forget_peer(peer, removed)
                case Joined():
                    if not self.joined.is_set():
                        self.joined.set()
                        log.info("joined", process=self.ctx.process_id)
                case Left(alone=alone):
                    self._left(alone)
                case Warn(event=event, fields=fields):
                    if not self.replaying:
                        log.warning(event, **fields)

    def _forget_peer(self, peer: str, removed: bool) -> None:
        links, channels = self.ctx.links, self.ctx.channels
        assert links is not None and channels is not None
        links.forget(peer)
        channels.forget(peer)
        if removed:
            links.failed.discard(peer)
            self.ctx.drop_peer_session(peer)
            if not self.replaying:
                log.warning("forgot a member for good (skueue remove-member)", member=peer)
        elif self.replicas is not None:  # (None while replaying)
            self.replicas.departed(peer)
        elif not self.replaying:
            log.info("a member left the cluster", member=peer)

    def _left(self, alone: bool) -> None:
        """This process left, not to come back as that member; unless it was the last,
        every member hears of it, with its counters for one heir to keep (stats stay whole)."""
        if self.replaying:
            return  # said the first time (the departure frames are in the log)
        if alone:
            log.info("the last member leaves; the cluster is empty", process=self.ctx.process_id)
        else:
            log.info("left the cluster; its data is held by the others",
                     process=self.ctx.process_id)  # fmt: skip
            frame = self.host.departure_frame(self.ctx.sessions.dropped_results)
            for peer in self.host.directory.others():
                self.enter(ControlSent(peer, frame))
        if self.input_log is not None:
            self.input_log.record_left()  # as every member that left: not back as it
        self.left.set()

    def send_on_channels(self, out: list[tuple[str, list[Any]]]) -> None:
        """The daemon's own questions and answers (stats, removal checks), on the daemon
        channels: neither logged nor numbered (runtime/network/daemon_channel.py)."""
        channels = self.ctx.channels
        assert channels is not None
        for peer, frame in out:
            channels.send(peer, frame)

    def reply(self, client: int, reply: Any) -> None:
        self.replies.append((client, reply))

    # -- the loop -----------------------------------------------------------------------

    async def run(self) -> None:
        ctx, host, limits = self.ctx, self.host, self.ctx.limits
        last_tick = trio.current_time()
        idle_delay = limits.idle_tick_min_ms / 1000
        while True:
            if not self._group_takes_inputs():
                await self._replicate_only()
                continue
            host = self.host
            due = host.process.tick_due()
            now = trio.current_time()
            if due is TickDue.NOW:
                wait = 0.0
            elif due is TickDue.IDLE:
                wait = max(0.0, last_tick + idle_delay - now)
            else:
                wait = limits.wait_tick_ms / 1000
            wait = min(wait, self.stats.seconds_to_deadline(now), host.seconds_to_due(now),
                       self.removal.seconds_to_deadline(now))  # fmt: skip
            lease_deadline = host.process.leases.table.next_deadline()
            if lease_deadline is not None:
                wait = min(wait, max(0.0, (lease_deadline - lease_clock_ms()) / 1000))
            if self.ack_due is not None:
                wait = min(wait, max(0.0, self.ack_due - now))
            items = await self._next_items(self._until_replica_tick(wait))
            if self.replicas is not None:
                # Replication first: a group that stops leading takes no more inputs.
                items = self._replicate(items)
                if not self._group_takes_inputs():
                    self.deferred.add(items, trio.current_time())
                    self._end_step(trio.current_time())  # its votes and acks: synced, sent
                    await trio.lowlevel.checkpoint()
                    continue
            if self.deferred:
                items = [*self.deferred.take(), *items]
            self.clock_read = False
            if host.process.leases.needs_clock():
                self.read_lease_clock()  # before the inputs: leases granted now start at it
            for item in items:
                self._guarded(self._dispatch, item)
            now = trio.current_time()
            due = host.process.tick_due()
            if due is TickDue.NOW:
                idle_delay = limits.idle_tick_min_ms / 1000
            if due is TickDue.NOW or (due is TickDue.IDLE and now - last_tick >= idle_delay):
                self._tick()
                last_tick = now
                if due is TickDue.IDLE:
                    idle_delay = min(limits.idle_tick_max_ms / 1000, idle_delay * 2)
            self.replies.extend(self.stats.expired(now))
            self.removal.expire(now)
            if host.seconds_to_due(now) == 0.0:
                for made in host.due(now, ctx.why_no_answer()):
                    self._guarded(self.enter, made)
            host.clients.queue_stats.sample(now)
            self._end_step(now)
            await trio.lowlevel.checkpoint()

    def _end_step(self, now: float) -> None:
        if self.group is not None:
            self.group.end_step(now)  # nothing of this step goes out before its commit
        if self.replicas is not None:
            self.replicas.end_followers_step(now)
        if self.entry_store is not None:
            self.entry_store.end_step()
        self.flush()
        self._snapshot_if_due()

    # -- replication (runtime/replicas.py) ----------------------------------------------

    def _group_takes_inputs(self) -> bool:
        """Whether the host may step inputs now: its group leads (each input is proposed
        at the end of the step), and no snapshot waits for the commit to catch up."""
        group = self.group
        if self.replicas is None or group is None:
            return True
        if not group.leading or self.quiescing:
            return False
        if self.must_take_over:
            # The first input of a new life, as a group of one steps it in replay().
            self.must_take_over = False
            self.enter(TookOver(group.node.term, lease_clock_ms()))
            self.led.set()
        return True

    def _until_replica_tick(self, wait: float) -> float:
        if self.replicas is None:
            return wait
        return min(wait, self.replicas.seconds_to_tick(trio.current_time()))

    def _replicate(self, items: list[InboxItem]) -> list[InboxItem]:
        """Take the channel frames among ``items`` that go at once (``TAKEN_ALWAYS``), answer
        copies wanted (led or not), and tick the group; return the rest, in order."""
        assert self.replicas is not None
        rest: list[InboxItem] = []
        for item in items:
            if isinstance(item, CopyWanted) or (isinstance(item, ChannelFrame)
                                                and item.frame[0] in TAKEN_ALWAYS):
                self._guarded(self._dispatch, item)
            else:
                rest.append(item)
        self.replicas.tick_if_due(trio.current_time())
        return rest

    async def _replicate_only(self) -> None:
        """One step while the group cannot take inputs: its messages and ticks only;
        the rest waits in ``deferred``, unlogged, so its answers go at once."""
        # Only the replicas' tick: a stats gathering whose deadline passes now answers
        # once the group leads again, and waking for it would spin.
        items = await self._next_items(self._until_replica_tick(1.0))
        now = trio.current_time()
        self.deferred.add(self._replicate(items), now)
        self._send({}, self.deferred.expired(now, self))
        self._end_step(now)
        await trio.lowlevel.checkpoint()

    async def _next_items(self, wait: float) -> list[InboxItem]:
        """The inputs of the next step: what tasks put in the inbox (up to
        ``inputs_per_step_max``), then what the owner reads itself from the ready
        connections (runtime/network/reactor.py); when there is neither, first waits up
        to ``wait`` seconds for either."""
        reactor = self.ctx.reactor
        items = self._from_inbox()
        if not items and not reactor.items:
            await reactor.wait(wait)
            items = self._from_inbox()
        if len(items) == self.ctx.limits.inputs_per_step_max:
            # More waits in the inbox: what the owner would read now may come after it
            # (a peer's hello, in the inbox, before its frames).
            return items
        reactor.read_ready()
        if reactor.items:
            items.extend(reactor.take())
        return items

    def _from_inbox(self) -> list[InboxItem]:
        inbox, items = self.ctx.inbox, []
        for _ in range(self.ctx.limits.inputs_per_step_max):
            try:
                items.append(inbox.receive_nowait())
            except trio.WouldBlock:
                break
        return items

    def read_lease_clock(self) -> None:
        """Give the host the lease clock, once per step (an input: the replay reads it)."""
        if not self.clock_read:
            self.clock_read = True
            self.enter(LeaseClock(lease_clock_ms()))

    def _tick(self) -> None:
        process = self.host.process
        before = process.batch_counts()
        self._guarded(self.enter, Tick())
        if not process.last_tick_fired:
            return
        now = trio.current_time()
        after = process.batch_counts()
        for kind, (sent, ops), (earlier, _) in zip(process.nodes, after, before, strict=True):
            if sent == earlier:
                continue
            node = kind.name.lower()
            self.ctx.tallies.batch(node, ops, now)
            if ops and DEBUG_LOGS.enabled:
                # idle trees turn empty batches all the time: only batches with operations
                log.debug("batch up", process=self.ctx.process_id, node=node, batch_ops=ops)

    def _guarded(self, act: Any, item: Any) -> None:
        try:
            act(item)
        except Exception:
            # Our bug (a peer's fault comes back as DropPeer): say which input did it,
            # then stop rather than serve on from a half-changed state.
            log.critical(
                "bug: an input broke the daemon; stopping",
                process=self.ctx.process_id,
                input=describe_input(item),
                exc_info=True,
            )
            raise

    def _dispatch(self, item: InboxItem) -> None:
        ctx = self.ctx
        links = ctx.links
        assert links is not None
        match item:
            case PeerMessage(peer=peer, number=number):
                if not self._refused(peer):
                    self._handled(peer, number)
                    self.enter(item)
            case PeerControl(peer=peer, number=number):
                if not self._refused(peer):
                    self._handled(peer, number)
                    self.enter(item)
            case ChannelFrame(peer=peer, frame=frame):
                if not takes_channel_frame(self.host.directory, peer, frame):
                    pass  # answers and replicas are for members (and a joiner's own group)
                elif frame[0] in REPLICATION_FRAMES:
                    take_replication_frame(self.replicas, ctx, peer, frame)
                else:
                    self.desk.control(peer, frame)
            case PeerHello(peer=peer, address=address, static=static, nonce=nonce):
                directory = self.host.directory
                if not (static and not directory.is_member(peer)):
                    links.mark_up(peer)
                self.enter(Hello(peer, str(address), nonce, static))
            case LinkClosed(peer=peer, session=session):
                self.enter(PeerGone(peer))
                if peer not in ctx.peer_sessions or ctx.peer_sessions[peer][0] < session:
                    links.mark_down(peer)
            case ClientInput(client=client, request=request):
                ctx.tallies.request(client, request.rid, request_kind(request),
                                    trio.current_time())  # fmt: skip
                self.desk.request(client, request)
            case ClientGone(client=client):
                ctx.tallies.client_gone(client)
                self.enter(item)
            case JoinReached(seed=seed, address=address, client=client, rid=rid):
                self.joined = trio.Event()
                self.enter(JoinStart(seed, str(address), client, rid))
            case RemovalProbed():
                self.removal.probed(item)
            case CopyWanted():
                answer_copy(ctx, self.replicas, item)
            case ClientError(client=client, rid=rid, message=message, retryable=retryable):
                self.reply(client, ErrorReply(rid, message, UNAVAILABLE if retryable else INVALID))

    def from_client(self, client: int, request: Any, extra_s: float = 0.0) -> None:
        """Enter a client's request for the host, with its retry key's session and its
        deadline (``extra_s`` later: a blocking remove's wait)."""
        session = self.ctx.sessions.clients.get(client)
        now = trio.current_time()
        name = None if session is None else session.session
        self.enter(FromClient(client, name, request, now + self.request_timeout_s(client), now))

    def request_timeout_s(self, client: int) -> float:
        """How long a request of ``client`` may take: what it asked for in its hello,
        within the limits."""
        session, limits = self.ctx.sessions.clients.get(client), self.ctx.limits
        asked = None if session is None else session.request_timeout_s
        timeout = limits.request_timeout_s if asked is None else asked
        return min(timeout, limits.request_timeout_s_max)

    def _refused(self, peer: str) -> bool:
        """Frames of a peer refused as no member that were read before its session was
        closed: dropped, neither handled nor logged."""
        return peer in self.host.directory.refused

    def _handled(self, peer: str, number: int) -> None:
        """Frame ``number`` of the peer's link is handled: the first ack after the step's
        commit says so (counted first: a frame the host refuses is not wanted again)."""
        self.handled[peer] = number

    # -- what goes out ------------------------------------------------------------------

    def flush(self) -> None:
        """End the step: hold what it made under its last log index, and carry out
        what the group has committed (held_effects.py)."""
        group = self.group
        index, commit = (0, 0) if group is None else (group.node.last_index, group.releasable)
        self.held.hold(HeldStep(index, self.peer_frames, self.replies, self.handled))
        self.peer_frames, self.replies, self.handled = defaultdict(list), [], {}
        released = self.held.release(commit)
        for peer, number in released.handled.items():
            self.ctx.inbound[peer].handled = number
        self._send(released.peer_frames, released.replies)
        if self.links_wait_for is not None and commit >= self.links_wait_for:
            self.links_wait_for = None
            assert self.ctx.links is not None
            self.ctx.links.ready.set()

    def _send(self, peer_frames: dict[str, list[Any]], replies: list[tuple[int, Any]]) -> None:
        links, ctx = self.ctx.links, self.ctx
        assert links is not None
        if links.unaddressed:
            links.start_addressed()
        channels = ctx.channels
        if channels is not None and channels.unaddressed:
            channels.start_addressed()
        for peer, batch in peer_frames.items():
            links.send(peer, batch)
        self._acknowledge()
        now = trio.current_time()
        by_client: dict[int, list[Any]] = defaultdict(list)  # one write per client
        for client, reply in replies:
            if not isinstance(reply, Welcome):
                outcome = (reply.code or "error") if isinstance(reply, ErrorReply) else "ok"
                ctx.tallies.replied(client, reply.rid, outcome, now)
            by_client[client].append(reply)
        for client, theirs in by_client.items():
            ctx.sessions.deliver(client, theirs)

    def _acknowledge(self) -> None:
        """Tell peers what was handled of their frames: at most every ``ACK_DELAY_S``, or
        at once past ``ACK_FRAMES_MAX`` frames.  Each ack wakes the peer's ack reader, so
        one per step per peer cost a fifth of the throughput; acks only free the peer's
        outbox, so a short delay costs nothing else."""
        now = trio.current_time()
        due = self.ack_due is not None and now >= self.ack_due
        waiting = False
        for inbound in self.ctx.inbound.values():
            behind = inbound.handled - inbound.acked
            if behind and (due or behind >= ACK_FRAMES_MAX):
                inbound.send_ack()
            waiting = waiting or inbound.handled != inbound.acked or bool(inbound.unsent)
        if not waiting:
            self.ack_due = None
        elif due or self.ack_due is None:
            self.ack_due = now + ACK_DELAY_S

    def _snapshot_if_due(self) -> None:
        """Compact the input log into a snapshot once it has grown past its limit, or
        early under the disk reserve to free what dequeues took (between steps:
        everything of this step is logged, synced and flushed)."""
        input_log, store, disk, group = self.input_log, self.entry_store, self.disk, self.group
        if input_log is None or group is None or (self.replicas and not group.leading):
            return  # (a host that does not lead may be stale: runtime/stand_in.py)
        limit = self.ctx.limits.snapshot_log_bytes
        due = self.snapshot_wanted or input_log.snapshot_due(limit) or (
            disk is not None
            and store is not None
            and disk.compact_now(trio.current_time(), bool(store.removed))
        )
        if not due and not self.quiescing:
            return
        # A snapshot holds only committed inputs (docs/replication.md §5.4): with steps
        # in flight, inputs wait until their commit catches up.
        self.quiescing = group.node.commit < group.node.last_index
        if self.quiescing:
            return
        links = self.ctx.links
        assert links is not None
        if store is not None:
            store.before_snapshot()
        host, inbound = self.host, self.ctx.inbound
        index, term, config = group.snapshot_position()
        input_log.snapshot(lambda f: capture(f, host, inbound, links, store), index, term, config)
        group.snapshot_taken(index)
        self.snapshot_wanted = False
        if store is not None:
            store.after_snapshot()
        if self.replicas is not None:
            self.replicas.send_check(index, host, inbound)

    # -- what the daemon says of itself -------------------------------------------------

    def own_stats(self) -> dict[str, Any]:
        """This process's part of ``skueue stats`` (runtime/operations/member_stats.py)."""
        return member_stats(self)

    def readiness(self) -> Readiness:
        """Whether this daemon is ready to serve, and if not why (runtime/operations/health.py)."""
        ctx = self.ctx
        started = ctx.ready.is_set() and ctx.links is not None
        group = self.group
        if started and self.replicas is not None and group is not None and not group.leading:
            return Readiness(False, "its process's replication group does not lead now "
                             "(fewer than a majority of its replicas answer)")
        return readiness(
            self.host.process.stats() if started else None,
            ctx.links.down() if started and ctx.links is not None else {},
            self.phase_watch,
            ctx.limits.update_phase_stall_s,
            trio.current_time(),
        )

