"""The host of one process: its one entry point, ``step(input) -> effects``.

Theory of operation
-------------------
A host is what a process needs beyond the protocol: the
:class:`~skueue.core.process.Process` (the pure core), the client work around it
(:class:`~skueue.host.clients.Clients`: requests, retries, deadlines, blocking waits,
leases, statistics), the member directory (:class:`~skueue.host.directory.Directory`)
and the clients waiting for a join or a leave.  Every change arrives as one input
(:mod:`skueue.host.inputs`) and comes back as effects (:mod:`skueue.host.effects`); the
host has no I/O, no clock and no randomness of its own, so

- the daemon's owner (``runtime/owner.py``) is its only caller and writes each input to
  the log before stepping it, and recovery steps the log's inputs again;
- the simulators drive hosts the same way, with crashes, retries and deadlines drawn by
  hypothesis.

Besides ``step``, the driver may read the host (stats, what is due when) but changes it
only through inputs.  :meth:`Host.due` is the one exception that touches timers: it takes
the deadlines and wait ends that passed off their heaps and hands them back as inputs to
log and step.
"""

from __future__ import annotations

from typing import Any

from skueue.core.errors import RemoteProtocolError
from skueue.core.membership.removal import Hold
from skueue.core.messages.membership import JoinRequest
from skueue.core.parts.membership_state import HANDOVER_BYTES_MAX
from skueue.core.process import Process
from skueue.host.address import parse_address
from skueue.host.clients import Clients
from skueue.host.directory import Directory, Out, vouches
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
from skueue.host.inputs import (
    ClientGone,
    ControlSent,
    EndWait,
    Frame,
    FromClient,
    Hello,
    Input,
    JoinStart,
    LeaseClock,
    PeerControl,
    PeerGone,
    PeerMessage,
    RemoveMember,
    Tick,
    TimedOut,
    TookOver,
)
from skueue.host.pending import COUNTER_NAMES
from skueue.host.replies import INVALID, UNAVAILABLE, Done, ErrorReply
from skueue.host.requests import (
    ClientRequest,
    ConfigureRequest,
    CreateRequest,
    DeleteRequest,
    InsertRequest,
    LeaseRequest,
    LeaveRequest,
    PeekRequest,
    RemoveRequest,
)
from skueue.host.results import LeaseAnswer
from skueue.host.retries import RetryWindow
from skueue.overlay.labels import Kind, node_ref

GOSSIP = frozenset({"member", "members", "departed", "removed"})
"""The control frames the host takes (the rest are the daemon's: stats, removal checks)."""


class Host:
    def __init__(
        self,
        process: Process,
        directory: Directory,
        *,
        retry_window: RetryWindow | None = None,
        storage: Any = None,
        handover_bytes_max: int = HANDOVER_BYTES_MAX,
    ) -> None:
        """``storage``: where the tables of a process made later (a join) keep their
        elements, as the first process's do (None: in memory).  ``handover_bytes_max``:
        a joiner's hand-over limit."""
        self.clients = Clients(process, retry_window)
        self.directory = directory
        self.storage = storage
        self.handover_bytes_max = handover_bytes_max
        self.join_waiters: list[tuple[int | None, int]] = []
        self.leave_waiters: list[tuple[int, int]] = []
        self.joined = process.joined  # a static member is in the ring from the start
        self.left = False
        self.client_ids_max = 0  # the highest connection number any input named

    @property
    def process(self) -> Process:
        return self.clients.process

    # -- the entry point ----------------------------------------------------------------

    def step(self, item: Input) -> list[HostEffect]:
        """Take one input; what the driver must do because of it."""
        out = self.clients.out = []
        match item:
            case FromClient():
                self._from_client(item)
            case PeerMessage(peer=peer, to=to, message=message):
                self._peer_message(peer, to, message)
            case PeerControl(peer=peer, frame=frame):
                if frame and frame[0] in GOSSIP:
                    self._gossip(peer, frame)
            case Tick():
                self.clients.apply(self.process.tick())
            case LeaseClock(now_ms=now_ms):
                self.clients.clock(now_ms)
            case ClientGone(client=client):
                self._client_gone(client)
            case EndWait(number=number):
                self.clients.end_wait(number)
            case TimedOut(number=number, why=why):
                self.clients.time_out(number, why)
            case Hello():
                self._hello(item)
            case PeerGone(peer=peer):
                self.directory.forget_contact(peer)
            case ControlSent(peer=peer, frame=frame):
                out.append(SendControl(peer, frame))
            case JoinStart():
                self._join_start(item)
            case RemoveMember(member=member):
                self._forget_member(member)
                self._control([(p, ["removed", member]) for p in self.directory.others()])
            case TookOver(lease_clock_ms=lease_clock_ms):
                # The leases of the last term went back just now: only new ones run on
                # the new leader's clock, which never goes below the log's last reading.
                self._took_over()
                self.clients.clock(max(lease_clock_ms, self.process.leases.now_ms))
        if self.clients.orphan_leases:  # granted to clients gone meanwhile: back they go
            orphans, self.clients.orphan_leases = self.clients.orphan_leases, []
            self.clients.end_leases("closed", orphans)
        self._membership_progress()
        return out

    def due(self, now: float, why: str | None = None) -> list[Input]:
        """The inputs that time makes due by ``now`` (driver seconds): waits that ended,
        then requests past their deadline (``why``: what to tell their clients of the
        cause).  The driver logs and steps each."""
        due: list[Input] = [EndWait(n) for n in self.clients.waits_ended(now)]
        for number in self.clients.timeouts_due(now):
            due.append(TimedOut(number, why or "the cause is unknown"))
        return due

    def seconds_to_due(self, now: float) -> float:
        """How long until :meth:`due` may have something (inf: nothing is waiting)."""
        return self.clients.seconds_to_deadline(now)

    # -- clients ------------------------------------------------------------------------

    def _from_client(self, item: FromClient) -> None:
        client, request = item.client, item.request
        self.client_ids_max = max(self.client_ids_max, client)
        rid = request.rid
        key = None if item.session is None else (item.session, rid)
        clients = self.clients
        if isinstance(request, LeaseRequest):
            # Sent again with its key (its reply was lost with a connection, or with a
            # leader: docs/replication.md §5.6), it gets its first answer: the first
            # attempt may have acked the element for good.
            if key is not None and clients.retried(client, rid, key, item.deadline):
                return
            held = clients.leases_held(client, list(request.leases))
            done = clients.end_leases(request.how, held, request.lease_ms)
            answers = tuple(LeaseAnswer(i in done) for i in request.leases)
            if key is not None:
                clients.counters.dropped_results += clients.retry_window.finish(
                    key, answers, True, 0)
            self._reply(client, Done(rid, answers))
            return
        if isinstance(request, LeaveRequest):
            self._leave(client, rid)
            return
        if self.process.leaving and (key is None or not clients.knows(key)):
            # A leaving process takes no new operations: said retryably, instead of
            # letting the core refuse them.  A request it knows is no new one: sent
            # again, it gets its first attempt's outcome here, the only place that has
            # it (sent elsewhere, it would take effect twice).
            message = "this daemon is leaving the cluster; send the request to another member"
            self._reply(client, ErrorReply(rid, message, UNAVAILABLE))
            return
        self._operations(client, key, request, item.deadline, item.now)

    def _operations(
        self, client: int, key: Any, request: ClientRequest, deadline: float, now: float
    ) -> None:
        clients, rid = self.clients, request.rid
        match request:
            case InsertRequest(values=values, queue=queue, stack=stack):
                clients.insert(client, rid, list(values), deadline, key, queue, stack,
                               request.priority or 0, request.prefer_stack)  # fmt: skip
            case RemoveRequest(count=count, queue=queue, stack=stack, wait_ms=wait_ms):
                wait_until = None
                if wait_ms is not None:  # a blocking remove: its time out starts later
                    wait_until = now + wait_ms / 1000
                    deadline += wait_ms / 1000
                clients.remove(client, rid, count, deadline, key, queue, stack, wait_until,
                               request.lease_ms or 0, request.max_deliveries or 0,
                               request.prefer_stack, request.fetch, request.look)  # fmt: skip
            case CreateRequest(queue=queue, stack=stack, max_deliveries=limit):
                clients.create(client, rid, queue, stack, limit or 0, request.priorities or 1,
                               deadline, key)  # fmt: skip
            case ConfigureRequest(queue=queue, max_deliveries=limit):
                clients.configure(client, rid, queue, limit, deadline, key)
            case DeleteRequest(queue=queue):
                clients.delete(client, rid, queue, deadline, key)
            case PeekRequest(queue=queue):
                clients.peek(client, rid, queue, deadline, key)
            case _:
                raise TypeError(f"not a request for the host: {request!r:.80}")

    def _client_gone(self, client: int) -> None:
        clients = self.clients
        for number in clients.waits_of(client):  # nobody is left to wait for
            clients.end_wait(number)
        clients.end_leases("closed", clients.leases_of(client))
        clients.client_gone(client)

    def _took_over(self) -> None:
        """The last term's clients are gone: their waits end, their leases go back, what
        their requests still return is dropped; deadlines of its clock mean nothing."""
        clients = self.clients
        self._end_waits()
        clients.orphan_leases = []
        clients.end_leases("restart", sorted(self.process.leases.table.leases))
        for client in list(clients.pending_requests):
            clients.client_gone(client)
        clients.deadlines = []
        clients.wait_ends = []

    def _reply(self, client: int | None, reply: Any) -> None:
        if client is not None:
            self.clients.out.append(Reply(client, reply))

    # -- peers --------------------------------------------------------------------------

    def _peer_message(self, peer: str, to: Kind, message: Any) -> None:
        directory = self.directory
        if isinstance(message, JoinRequest) and message.joiner.process in directory.removed:
            return  # a join, routed on, of a member removed since: never placed again
        try:
            self.clients.apply(self.process.handle(self.process.node_ref(to), message))
        except RemoteProtocolError as e:
            # The peer's fault: the core changed nothing; its link goes, so that a peer
            # that sends garbage is not served on.
            self.clients.out.append(DropPeer(peer, str(e), message.describe()))
            return
        if not directory.is_member(peer) and vouches(message):
            self._control(directory.confirm(peer))

    def _hello(self, hello: Hello) -> None:
        directory, peer = self.directory, hello.peer
        if hello.static and not directory.is_member(peer) and peer not in directory.departed:
            # It said hello while this daemon still met its own peers; now that it knows
            # them, it is none of them: refused, and it learns so at its next hello.
            if not directory.is_refused(peer, hello.nonce):
                directory.refuse(peer, hello.nonce)
                self.clients.out.append(Warn(
                    "refused a daemon that is not a member of this cluster (started with "
                    "--peers; told to start with --join)", {"peer": peer,
                                                             "address": hello.address}))
            self.clients.out.append(DropPeer(peer, "not a member of this cluster"))
            return
        directory.forget_refusal(peer, hello.nonce)
        self._control(directory.on_hello(peer, parse_address(hello.address)))

    def _gossip(self, peer: str, frame: list[Any]) -> None:
        directory = self.directory
        try:
            if frame[0] == "removed":
                self._removed(peer, frame)
                return
            out, departure = directory.on_gossip(peer, frame)
        except RemoteProtocolError as e:
            self.clients.out.append(DropPeer(peer, f"bad gossip: {e}"))
            return
        self._control(out)
        if departure is not None:
            self.clients.out.append(ForgetPeer(departure.process))
            if departure.heir == directory.own_id:
                self.clients.inherit(departure.process, departure.counters, departure.queues)

    def _removed(self, peer: str, frame: list[Any]) -> None:
        """``["removed", id]``: a member removed for good, passed on by every member."""
        if len(frame) != 2:
            raise RemoteProtocolError("removed: expected [\"removed\", id]")
        member = frame[1]
        if type(member) is not str or not 0 < len(member) <= 256:
            raise RemoteProtocolError("removed: expected a process id")
        if member == self.directory.own_id:
            # Never sent by a correct member: this daemon answers, so it is not gone.
            raise RemoteProtocolError("removed: names the daemon it is sent to")
        if member not in self.directory.removed:
            self._forget_member(member)
            self._control([(p, frame) for p in self.directory.others() if p != peer])

    def _forget_member(self, member: str) -> None:
        """Forget a member for good: the directory, the links (an effect), the core's
        joiners."""
        self.directory.remove(member)
        self.clients.out.append(ForgetPeer(member, removed=True))
        hold, why = self.process.hold_on(member)
        if hold is Hold.RING:
            # The cluster's check found nothing; a message that came in between did.
            self.clients.out.append(Warn(
                "a member was removed from the cluster, but this daemon's ring still holds "
                "it; its part of the tree waits for it", {"member": member, "why": why}))
        else:
            self.process.forget_joiner(member)

    def _control(self, frames: list[Out]) -> None:
        self.clients.out.extend(SendControl(peer, frame) for peer, frame in frames)

    # -- membership ---------------------------------------------------------------------

    def _join_start(self, start: JoinStart) -> None:
        """Become a joiner of the seed's cluster (a lone, empty process: checked by the
        driver before it reached the seed)."""
        if start.address is not None:
            self.directory.learn(start.seed, parse_address(start.address))
        old = self.process
        contact = node_ref(start.seed, Kind.LEFT)
        process = Process.create_joining(old.process_id, contact, old.structure,
                                         handover_bytes_max=self.handover_bytes_max,
                                         hurry=old.hurry)  # fmt: skip
        if self.storage is not None:
            for node in process.nodes.values():
                node.store.attach(self.storage)
        self.clients.process = process
        self.joined = False
        self.join_waiters.append((start.client, start.rid))
        self.clients.apply(process.join())

    def _leave(self, client: int, rid: int) -> None:
        if self.left:  # asked again once it went through: it has left, say so now
            self._reply(client, Done(rid, ()))
            return
        process = self.process
        stats = process.stats()
        if stats.alone:
            # The last member: nobody can take its data, and no update phase can run.
            held = stats.held_elements + self.clients.pending_ops
            if held:
                message = (
                    f"this daemon is the last member of its cluster and holds {held} "
                    "elements: they would have nowhere to go; drain it first"
                )
                self._reply(client, ErrorReply(rid, message, INVALID))
                return
            self._reply(client, Done(rid, ()))
            self.left = True
            self.clients.out.append(Left(alone=True))
            return
        if not process.leaving:
            why = process.why_not_leave()
            if why is not None:
                self._reply(client, ErrorReply(rid, why, UNAVAILABLE))
                return
            self.clients.apply(process.leave())  # its leases go back first
            # A blocking remove may not try again once the process takes no new
            # operations: its next empty attempt is its answer.
            self._end_waits()
        self.leave_waiters.append((client, rid))

    def _end_waits(self) -> None:
        for number in sorted(self.clients.waits):
            self.clients.end_wait(number)

    def _membership_progress(self) -> None:
        """Answer the clients waiting for a join or a leave once it went through."""
        process = self.process
        if process.joined and not self.joined:
            self.joined = True
            self.clients.out.append(Joined())
            for client, rid in self.join_waiters:
                self._reply(client, Done(rid, ()))
            self.join_waiters.clear()
        if process.departed and not self.left:
            self.left = True
            self.clients.out.append(Left(alone=False))
            for client, rid in self.leave_waiters:
                self._reply(client, Done(rid, ()))
            self.leave_waiters.clear()

    def departure_frame(self, dropped_results: int = 0) -> Frame:
        """What a process that left tells every member it knows (as ``ControlSent``
        inputs of its own): its id, its heir, and its counters for the heir to keep, so
        that the cluster's totals stay whole.  ``dropped_results``: results the driver
        could not deliver, counted outside the host."""
        clients = self.clients
        counters = clients.totals()
        counters["dropped_results"] += dropped_results
        directory = self.directory
        return [
            "departed", directory.own_id, directory.heir(),
            {k: counters[k] for k in COUNTER_NAMES} | {"queues": clients.queue_stats.counts()},
        ]  # fmt: skip

    def alone_and_empty(self) -> str | None:
        """Why this process may not join another cluster (None: it may): only a
        one-process cluster with nothing stored and nothing pending can give up its own
        ring."""
        stats = self.process.stats()
        if not stats.alone:
            return "only a daemon that is alone (a one-process cluster) can join another cluster"
        if stats.held_elements + self.clients.pending_ops:
            return "this daemon holds elements; drain it before it joins another cluster"
        return None

