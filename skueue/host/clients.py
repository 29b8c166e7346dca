"""A host's client work: requests in, operations on the process, replies out.

:class:`~skueue.host.host.Host` is the only caller (its ``step`` is the one entry point).
This part turns client requests into operations on the
:class:`~skueue.core.process.Process`, the process's completions into replies, and keeps
what goes with them: the retry window, deadlines, blocking waits, leases held by
connections, structure hints and the counters ``skueue stats`` shows.  What it makes
goes to :attr:`Clients.out` as effects (protocol messages as the core's ``Send``,
replies as :class:`~skueue.host.effects.Reply`).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from typing import Literal, cast

from skueue.core.effects import Complete, Effect, Send
from skueue.core.leases import KEEP, Lease
from skueue.core.ops import (
    DEFAULT_QUEUE,
    REFUSED_OTHER_STRUCTURE,
    Element,
    Item,
    OpKind,
    QueueSettings,
    Structure,
    insert_kind,
    plain_or_none,
    remove_kind,
)
from skueue.core.process import Process
from skueue.host.effects import HostEffect, Reply
from skueue.host.pending import COUNTER_NAMES, Counters, Request
from skueue.host.queue_stats import QueueStats
from skueue.host.replies import REFUSED, TIMEOUT, Done, ErrorReply
from skueue.host.results import Configured, Created, Deleted, Inserted, LeaseGrant, Removed
from skueue.host.retries import RetryKey, RetryWindow
from skueue.host.structure_hints import StructureHints, other_kind

__all__ = ["COUNTER_NAMES", "Clients", "Counters", "Request"]


WAIT_ENDS_SLACK = 64  # stale wait ends kept before the heap is rebuilt


class Clients:
    def __init__(self, process: Process, retry_window: RetryWindow | None = None) -> None:
        self.process = process
        self.structure: Structure = process.structure
        self.ops: dict[int, tuple[Request, int]] = {}
        self.out: list[HostEffect] = []  # what the step made so far (Host.step takes it)
        # Requests not finished, by number (their first operation's id).
        self.running: dict[int, Request] = {}
        self.counters = Counters()
        self.gone_clients: set[int] = set()
        # Requests not yet answered, per client: a gone client is remembered only while
        # it has some, or the set above would grow with every client ever served.
        self.pending_requests: Counter[int] = Counter()
        # Request deadlines, soonest first (ties broken by arrival).
        self.deadlines: list[tuple[float, int, Request]] = []
        self.arrivals = 0  # ties of deadlines broken by arrival
        # Counters of processes that left and named this one their heir.
        self.inherited: Counters = Counters()
        self.inherited_from: list[str] = []
        self.retry_window = retry_window or RetryWindow()
        self.queue_stats = QueueStats()  # per queue, this daemon's clients' share
        # Blocking removes still waiting, by number, and when their waits end.
        self.waits: dict[int, Request] = {}
        self.wait_ends: list[tuple[float, int]] = []
        self.retry_running: dict[RetryKey, Request] = {}
        # Leases granted to clients that had gone by then: returned at the end of the step.
        self.orphan_leases: list[int] = []
        self.hints = StructureHints()  # each name's structure, as last seen here
        self.looks: set[int] = set()  # leases of looks (Request.look), while they last

    def totals(self) -> dict[str, int]:
        """The counters, with those inherited from processes that left, so that the
        cluster's totals stay whole across leaves."""
        inherited = self.inherited
        return {k: v + getattr(inherited, k) for k, v in self.counters.as_dict().items()}

    @property
    def pending_ops(self) -> int:
        return len(self.ops)

    # -- inputs -------------------------------------------------------------------------

    def insert(
        self,
        client: int,
        rid: int,
        values: list[Element],
        deadline: float = math.inf,
        key: RetryKey | None = None,
        queue: str | None = None,
        stack: bool | None = None,
        priority: int = 0,
        prefer_stack: bool | None = None,
    ) -> None:
        """Insert ``values`` into ``queue`` (None: the default queue), a stack if
        ``stack`` (None: the queue's own structure; a new name is a stack if
        ``prefer_stack``, None: the structure this daemon was started with), at
        ``priority`` (a queue with priority levels; others ignore it)."""
        kind = insert_kind(self._structure(stack, queue, prefer_stack))
        ops: list[tuple[OpKind, Element | None]] = [(kind, v) for v in values]
        follow = stack is None
        self._submit(client, rid, ops, deadline, key, queue, priority=priority,
                     follow=follow, values=values if follow else None)  # fmt: skip

    def remove(
        self,
        client: int,
        rid: int,
        count: int,
        deadline: float = math.inf,
        key: RetryKey | None = None,
        queue: str | None = None,
        stack: bool | None = None,
        wait_until: float | None = None,
        lease_ms: int = 0,
        max_deliveries: int = 0,
        prefer_stack: bool | None = None,
        fetch: bool = False,
        look: bool = False,
    ) -> None:
        """``wait_until`` (driver time; ``math.inf`` until a logged end): a blocking
        remove, answered once an element came or the wait ended.  ``lease_ms``: a leased
        remove (skueue/core/leases.py), its elements held for ``client``.  ``stack`` and
        ``prefer_stack`` as for :meth:`insert`; ``fetch`` and ``look`` as
        :class:`Request` says."""
        kind = remove_kind(self._structure(stack, queue, prefer_stack))
        self._submit(
            client, rid, [(kind, None)] * count, deadline, key, queue, wait_until,
            lease_ms, max_deliveries, follow=stack is None, fetch=fetch, look=look,
        )  # fmt: skip

    def create(
        self,
        client: int,
        rid: int,
        queue: str,
        stack: bool | None,
        max_deliveries: int,
        priorities: int = 1,
        deadline: float = math.inf,
        key: RetryKey | None = None,
    ) -> None:
        """Make ``queue`` with these settings (``stack`` None: the daemon's structure),
        or find it made with them; the result is one :class:`Created`."""
        stack = self._structure(stack) is Structure.STACK
        settings = QueueSettings(stack, max_deliveries, priorities)
        self._submit(client, rid, [(OpKind.CREATE, None)], deadline, key, queue, settings=settings)

    def configure(
        self,
        client: int,
        rid: int,
        queue: str,
        max_deliveries: int,
        deadline: float = math.inf,
        key: RetryKey | None = None,
    ) -> None:
        """Set the delivery limit of the queue or stack ``queue`` (0: none); the result
        is one :class:`Configured`, its settings now."""
        settings = QueueSettings(max_deliveries=max_deliveries)
        ops: list[tuple[OpKind, Element | None]] = [(OpKind.CONFIGURE, None)]
        self._submit(client, rid, ops, deadline, key, queue, settings=settings)

    def delete(
        self,
        client: int,
        rid: int,
        queue: str,
        deadline: float = math.inf,
        key: RetryKey | None = None,
    ) -> None:
        """Delete ``queue``: what it holds is removed and its name is free
        (skueue/core/anchor.py); the result is one :class:`Deleted`."""
        self._submit(client, rid, [(OpKind.DELETE, None)], deadline, key, queue)

    def peek(
        self,
        client: int,
        rid: int,
        queue: str | None,
        deadline: float = math.inf,
        key: RetryKey | None = None,
    ) -> None:
        """The element a dequeue of ``queue`` would return now, left in it
        (skueue/core/peeks.py); the result is one :class:`Removed`."""
        self._submit(client, rid, [(OpKind.PEEK, None)], deadline, key, queue)

    def _structure(
        self, stack: bool | None, queue: str | None = None, prefer_stack: bool | None = None
    ) -> Structure:
        """The client's structure; else ``queue``'s as last seen here; else the one it
        prefers for a new name; else the daemon's (structure_hints.py)."""
        if stack is None:
            stack = self.hints.get(queue or DEFAULT_QUEUE)
        if stack is None:
            stack = prefer_stack
        if stack is None:
            return self.structure
        return Structure.STACK if stack else Structure.QUEUE

    def _submit(
        self,
        client: int,
        rid: int,
        ops: list[tuple[OpKind, Element | None]],
        deadline: float,
        key: RetryKey | None = None,
        queue: str | None = None,
        wait_until: float | None = None,
        lease_ms: int = 0,
        max_deliveries: int = 0,
        settings: QueueSettings | None = None,
        priority: int = 0,
        follow: bool = False,
        values: list[Element] | None = None,
        fetch: bool = False,
        look: bool = False,
    ) -> None:
        if key is not None and self.retried(client, rid, key, deadline):
            return
        if not ops:
            self.out.append(Reply(client, Done(rid, ())))
            return
        request = Request(
            client, rid, ops[0][0].inserts, [None] * len(ops), len(ops), key=key,
            queue=queue or DEFAULT_QUEUE, kind=ops[0][0], number=self.process.next_op_id,
            lease_ms=lease_ms, max_deliveries=max_deliveries, follow=follow,
            values=values, priority=priority, fetch=fetch, look=look,
        )  # fmt: skip
        if wait_until is not None:
            self.waits[request.number] = request
            if wait_until < math.inf:
                heapq.heappush(self.wait_ends, (wait_until, request.number))
        if key is not None:
            self.retry_running[key] = request
        self.running[request.number] = request
        self.pending_requests[client] += 1
        self._expires(request, deadline)
        submitted = []
        for index, (kind, value) in enumerate(ops):
            # A blocking remove's first attempt goes at once, like any remove: only the
            # attempts after an empty one are patient (_try_again).  Patient from the
            # start, a consumer's refill of a full queue waited for the idle pace.
            op = self.process.new_op(
                kind, value, request.queue, False, lease_ms, max_deliveries, settings, priority
            )
            self.ops[op.op_id] = (request, index)
            submitted.append(op)
        self._apply(self.process.submit_all(submitted))

    def knows(self, key: RetryKey) -> bool:
        """A request with this key is running here, or finished and remembered."""
        return key in self.retry_running or self.retry_window.get(key) is not None

    def retried(self, client: int, rid: int, key: RetryKey, deadline: float) -> bool:
        """Serve a request sent again from what its first attempt did (True), if this
        daemon knows it: still running, the new connection takes it over; finished, its
        stored reply goes again."""
        running = self.retry_running.get(key)
        if running is not None:
            self._settle_client(running.client)
            running.client, running.rid, running.timed_out = client, rid, False
            running.timeout_told = False
            self.pending_requests[client] += 1
            self._expires(running, deadline)
            self.counters.retried += 1
            return True
        finished = self.retry_window.get(key)
        if finished is not None:
            finished.delivered = True
            self.out.append(Reply(client, Done(rid, finished.results())))
            self.counters.retried += 1
            return True
        return False

    def _expires(self, request: Request, deadline: float) -> None:
        if deadline < math.inf:
            self.arrivals += 1
            heapq.heappush(self.deadlines, (deadline, self.arrivals, request))

    def client_gone(self, client: int) -> None:
        if self.pending_requests[client]:  # else nothing of it is left to drop
            self.gone_clients.add(client)

    def timeouts_due(self, now: float) -> list[int]:
        """The requests past their deadline by ``now`` and not answered (their numbers:
        each becomes a ``TimedOut`` input).  Taken off the timer heap."""
        due = []
        while self.deadlines and self.deadlines[0][0] <= now:
            _, _, request = heapq.heappop(self.deadlines)
            if not _answered(request):
                due.append(request.number)
        return due

    def time_out(self, number: int, why: str) -> None:
        """Tell the client of request ``number`` that its outcome is unknown (``why``:
        what the daemon knows of the cause); its operations stay in the protocol."""
        request = self.running.get(number)
        if request is None or _answered(request):
            return
        request.timed_out = True
        if request.client not in self.gone_clients:
            message = f"no answer from the cluster in time; {why}"
            self.out.append(Reply(request.client, ErrorReply(request.rid, message, TIMEOUT)))
            request.timeout_told = True

    def seconds_to_deadline(self, now: float) -> float:
        while self.deadlines and _answered(self.deadlines[0][2]):
            heapq.heappop(self.deadlines)  # no reason to wake up for it
        soonest = self.deadlines[0][0] if self.deadlines else math.inf
        if self.wait_ends:
            soonest = min(soonest, self.wait_ends[0][0])
        return max(0.0, soonest - now) if soonest < math.inf else math.inf

    def inherit(
        self,
        process: str,
        counters: dict[str, int],
        queues: dict[str, dict[str, int]] | None = None,
    ) -> None:
        """A departed process named this one heir of its counters (stats stay whole)."""
        for name, value in counters.items():
            setattr(self.inherited, name, getattr(self.inherited, name) + value)
        self.queue_stats.inherit(queues or {})
        self.inherited_from.append(process)

    # -- outputs ------------------------------------------------------------------------

    def apply(self, effects: list[Effect]) -> None:
        """Carry out the process's effects: messages go out, completions answer."""
        self._apply(effects)

    def _apply(self, effects: list[Effect]) -> None:
        if self.process.leases.landed:  # dead letters' inserts
            for queue in self.process.leases.take_landed():
                self.queue_stats.count(queue, inserted=1)
        for effect in effects:
            if isinstance(effect, Send):
                self.out.append(effect)
            else:
                self._complete(effect)

    def _complete(self, done: Complete) -> None:
        request, index = self.ops.pop(done.op_id)
        if request.kind is not None:
            kind = request.kind
            if request.retried_from is not None and done.op_id < request.retried_from:
                kind = other_kind(kind)  # an op of the first try, before the switch
            self.hints.learn_from(request.queue, kind, done)
        if done.error is not None:
            if self._try_other_structure(request, index, done):
                return
            request.refused = done.error
        elif request.kind is OpKind.CONFIGURE:
            now = done.settings
            assert now is not None
            structure: Literal["queue", "stack"] = "stack" if now.stack else "queue"
            request.results[index] = Configured(structure, now.max_deliveries, now.priorities)
        elif done.created is not None:  # a create
            request.results[index] = Created(done.created)
        elif done.removed is not None:  # a delete
            self.queue_stats.count(request.queue, deleted=done.removed)
            request.results[index] = Deleted(done.removed, done.ord)
        elif request.kind is OpKind.PEEK:  # nothing left the queue: nothing to count
            request.results[index] = Removed(_value(done.value), done.ord, done.position)
        elif request.inserts:
            self.counters.inserted += 1
            self.queue_stats.count(request.queue, inserted=1)
            request.results[index] = Inserted(done.ord, done.position)
        else:
            waiting = request.number in self.waits and not request.got
            # A fetch waits with its first remove alone: the others' empties are final.
            if done.value is None and waiting and not (request.fetch and index):
                self._try_again(request, index)
                return
            if done.value is None:
                if not request.fetch:  # a fetch's shortfall is no remove that failed
                    self.counters.empty += 1
                    self.queue_stats.count(request.queue, empty=1)
                request.results[index] = Removed(None, done.ord, done.position)
            else:
                request.got = True
                if not request.look:
                    self.counters.removed += 1
                    self.queue_stats.count(request.queue, removed=1)
                lease = self.process.leases.get(done.op_id) if request.lease_ms else None
                if lease is not None:
                    request.results[index] = self._leased(request, lease, done)
                else:
                    request.results[index] = Removed(_value(done.value), done.ord, done.position)
        request.remaining -= 1
        if request.remaining:
            return
        self._stop_waiting(request.number)
        del self.running[request.number]
        delivered = request.client not in self.gone_clients and not request.timed_out
        self._settle_client(request.client)
        if request.refused is not None:  # a request's operations are all on one queue
            if request.key is not None:
                del self.retry_running[request.key]  # sent again, it is refused again
            if delivered:
                reply = ErrorReply(request.rid, request.refused, REFUSED)
                self.out.append(Reply(request.client, reply))
            return
        results = tuple(request.results)
        if request.fetch:  # the elements alone
            results = tuple(r for r in results if r.value is not None)
        # Leased elements are not lost with an undelivered reply: their leases return them.
        removed = 0 if request.lease_ms or request.kind is OpKind.PEEK else sum(
            1 for r in results if isinstance(r, Removed) and r.value is not None
        )
        if request.key is not None:
            del self.retry_running[request.key]
            # Told it timed out, its client has its answer and will not ask again: what
            # it removed is lost now.  (Kept in the window all the same, as delivered so
            # as not to count it twice, for a client that never read that answer.)
            given_up = request.timeout_told and not delivered
            lost = self.retry_window.finish(request.key, results, delivered or given_up, removed)
            self.counters.dropped_results += lost + (removed if given_up else 0)
        elif not delivered:
            self.counters.dropped_results += removed
        if delivered:
            self.out.append(Reply(request.client, Done(request.rid, results)))

    def _leased(self, request: Request, lease: Lease, done: Complete) -> Removed:
        """A leased remove's result; the lease is its client's (if it is gone already,
        the owner returns the element: :attr:`orphan_leases`)."""
        lease.holder = request.client
        if request.client in self.gone_clients:
            self.orphan_leases.append(lease.lease_id)
        if request.look:
            self.looks.add(lease.lease_id)
        else:
            self.queue_stats.count_lease(request.queue, "leased")
        grant = LeaseGrant(lease.lease_id, lease.deliveries, lease.reason)
        return Removed(_value(lease.value), done.ord, done.position, grant)

    def _try_other_structure(self, request: Request, index: int, done: Complete) -> bool:
        """A refusal for the other structure of an operation whose structure the host
        guessed (``Request.follow``): send it again as that one (True), once; a refusal
        of the second try stands (the name changed structure meanwhile)."""
        if done.refused != REFUSED_OTHER_STRUCTURE or not request.follow:
            return False
        assert request.kind is not None
        if request.retried_from is None:
            request.kind = other_kind(request.kind)
            request.retried_from = self.process.next_op_id
        elif done.op_id >= request.retried_from:
            return False
        value = None if request.values is None else request.values[index]
        op = self.process.new_op(
            request.kind, value, request.queue, False, request.lease_ms,
            request.max_deliveries, None, request.priority,
        )  # fmt: skip
        self.ops[op.op_id] = (request, index)
        self._apply(self.process.submit(op))
        return True

    def _try_again(self, request: Request, index: int) -> None:
        """A blocking remove's attempt found the queue empty: the same again, in a later
        cycle (patient: it does not make the tree hurry)."""
        assert request.kind is not None
        op = self.process.new_op(
            request.kind, None, request.queue, True, request.lease_ms, request.max_deliveries
        )
        self.ops[op.op_id] = (request, index)
        self._apply(self.process.submit(op))

    # -- leases (skueue/core/leases.py) ----------------------------------------------------

    def clock(self, now_ms: int) -> None:
        """The lease clock (an input: logged, replayed): expired leases go back."""
        self._apply(self.process.clock(now_ms))
        for lease in self.process.leases.expired:
            self._count_return(lease, "expired")

    def leases_held(self, client: int, ids: list[int]) -> list[int]:
        """Of ``ids``, the live leases ``client`` holds: the only ones its ack, nack or
        extend may touch (a lease belongs to the connection it was granted on)."""
        leases = self.process.leases
        out = []
        for lease_id in dict.fromkeys(ids):
            lease = leases.get(lease_id)
            if lease is not None and lease.holder == client:
                out.append(lease_id)
        return out

    def leases_of(self, client: int) -> list[int]:
        """Every live lease ``client`` holds (to return when it goes away)."""
        leases = self.process.leases.table.leases
        return sorted(i for i, lease in leases.items() if lease.holder == client)

    def end_leases(self, how: str, ids: list[int], lease_ms: int | None = None) -> set[int]:
        """``how``: "ack", "extend" (by ``lease_ms``) or a return reason ("nack",
        "closed", "restart": skueue.core.ops.RETURN_REASONS).  An input: the owner logs
        it, the replay applies it here again.  Returns the leases it changed."""
        leases = self.process.leases
        done = set()
        for lease_id in ids:
            lease = leases.get(lease_id)
            if lease is None:
                continue
            if how == "extend":
                assert lease_ms is not None
                leases.extend(lease_id, lease_ms)
            elif how == "ack":
                leases.ack(lease_id)
                self._count_look(lease, how)
                self.queue_stats.count_lease(lease.queue, "acked")
            else:
                self._count_return(lease, how)
                self._apply(self.process.release(lease_id, how) or [])
            done.add(lease_id)
        return done

    def _count_return(self, lease: Lease, reason: str) -> None:
        """A returned lease in the stats: expired, or nacked (a consumer's nack, or an
        implicit one: its connection closed, its daemon restarted or left)."""
        self._count_look(lease, reason)
        if reason == KEEP:
            return  # a look (skueue dlq), not a delivery
        self.queue_stats.count_lease(lease.queue, "expired" if reason == "expired" else "nacked")
        if lease.dead_letter:
            self.queue_stats.count_lease(lease.queue, "dead_lettered")

    def _count_look(self, lease: Lease, how: str) -> None:
        """A look's lease ends: returned as it was, it counted nothing; ended otherwise
        (acked, or it expired or was nacked), it was a delivery after all."""
        if lease.lease_id not in self.looks:
            return
        self.looks.discard(lease.lease_id)
        if how != KEEP:
            self.counters.removed += 1
            self.queue_stats.count(lease.queue, removed=1)
            self.queue_stats.count_lease(lease.queue, "leased")

    def end_wait(self, number: int) -> None:
        """The wait of blocking remove ``number`` is over: its next empty attempt is its
        answer.  (An input: the owner logs it, the replay applies it where it was.)"""
        self._stop_waiting(number)

    def _stop_waiting(self, number: int) -> None:
        """Forget a wait that ended or whose request finished.  Its entry in the heap of
        wait ends is dropped when it comes up, or all such at once when they outnumber
        the live ones (a request with an hour's wait that was served at once would
        otherwise stay there for the hour)."""
        if self.waits.pop(number, None) is None:
            return
        if len(self.wait_ends) > WAIT_ENDS_SLACK + 2 * len(self.waits):
            self.wait_ends = [e for e in self.wait_ends if e[1] in self.waits]
            heapq.heapify(self.wait_ends)

    def waits_of(self, client: int) -> list[int]:
        """The blocking removes of ``client`` still waiting: when it goes away they must
        end, or a later element would be taken for nobody."""
        return sorted(n for n, r in self.waits.items() if r.client == client)

    def waits_ended(self, now: float) -> list[int]:
        """The blocking removes whose wait ended by ``now`` (to log, then end)."""
        out = []
        while self.wait_ends and self.wait_ends[0][0] <= now:
            _, number = heapq.heappop(self.wait_ends)
            if number in self.waits:
                out.append(number)
        return out

    def _settle_client(self, client: int) -> None:
        """One request of ``client`` is no longer its to wait for."""
        self.pending_requests[client] -= 1
        if not self.pending_requests[client]:
            del self.pending_requests[client]
        self.forget_client(client)

    def forget_client(self, client: int) -> None:
        """Once no request of a gone client is pending, stop remembering it."""
        if not self.pending_requests[client]:
            self.gone_clients.discard(client)


def _value(item: Item | None) -> bytes | None:
    """An element as its client gets it: the value alone (a daemon's are bytes)."""
    return cast("bytes | None", plain_or_none(item))


def _answered(request: Request) -> bool:
    return request.remaining == 0 or request.timed_out

