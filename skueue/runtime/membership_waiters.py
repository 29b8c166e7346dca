"""Join and leave as a client asks for them: start them, and answer once they went through.

A join starts by reaching a member of the cluster to join (the seed), then restarts the
daemon's process as a joiner; a leave asks the core's ``why_not_leave`` first and refuses
at once what would hang (the last member holding elements, unreachable members).  The
owner calls :meth:`MembershipWaiters.membership_progress` every step to answer the
waiting clients once the core says the process joined or departed.
"""

from __future__ import annotations

import trio

from skueue.core.process import Process
from skueue.host.address import Address, AddressError, parse_address
from skueue.host.host import COUNTER_NAMES, Host
from skueue.overlay.labels import Kind, node_ref
from skueue.runtime.entry_store import attach
from skueue.runtime.errors import DaemonError
from skueue.runtime.inputs import ClientError, JoinStart
from skueue.runtime.state import DaemonState, log
from skueue.wire.client_replies import INVALID, UNAVAILABLE, Done, ErrorReply


class MembershipWaiters(DaemonState):
    def _joining_process(self, seed: str) -> Process:
        contact = node_ref(seed, Kind.LEFT)
        process = Process.create_joining(
            self.process_id,
            contact,
            self.config.structure,
            handover_bytes_max=self.limits.handover_bytes_max,
            hurry=True,
        )
        attach(process, self.entry_store)
        self.pending_join_effects = process.join()
        return process

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
                host.client_frames.append((client, ErrorReply(rid, message, INVALID)))
                return
            log.info("the last member leaves; the cluster is empty", process=self.process_id)
            if self.input_log is not None:
                self.input_log.record_left()  # as every member that left: not back as it
            host.client_frames.append((client, Done(rid, [])))
            self.left.set()
            return
        assert self.links is not None
        if self.links.down() and not host.process.leaving:
            # A leave needs an update phase, which needs every member: it would hang.
            message = f"cannot leave while members are unreachable ({self._why_no_answer()})"
            host.client_frames.append((client, ErrorReply(rid, message, UNAVAILABLE)))
            return
        if not host.process.leaving:
            why = host.process.why_not_leave()
            if why is not None:
                host.client_frames.append((client, ErrorReply(rid, why, UNAVAILABLE)))
                return
            host.apply(host.process.leave())  # its leases go back first
            self._log(["l"])
        log.info("leaving", process=self.process_id)
        self.leave_waiters.append((client, rid))

    def _join(self, client: int, rid: int, seed: str) -> None:
        assert self.host is not None and self.nursery is not None
        problem = alone_and_empty(self.host)
        if problem:
            self.host.client_frames.append((client, ErrorReply(rid, problem, INVALID)))
            return
        try:
            address = parse_address(seed)
        except AddressError as e:
            self.host.client_frames.append((client, ErrorReply(rid, str(e), INVALID)))
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

    def membership_progress(self) -> None:
        """Answer the clients waiting for a join or a leave once it went through."""
        assert self.host is not None
        process = self.host.process
        if process.joined and not self.joined.is_set():
            self.joined.set()
            log.info("joined", process=self.process_id)
            for client, rid in self.join_waiters:
                self.host.client_frames.append((client, Done(rid, [])))
            self.join_waiters.clear()
        if process.departed and not self.left.is_set():
            log.info("left the cluster; its data is held by the others", process=self.process_id)
            if self.input_log is not None:
                self.input_log.record_left()
            self._announce_departure()
            for client, rid in self.leave_waiters:
                self.host.client_frames.append((client, Done(rid, [])))
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
            {k: counters[k] for k in COUNTER_NAMES} | {"queues": self.host.queue_stats.counts()},
        ]
        self._send_control([(p, frame) for p in self.directory.others()])

    async def drain_links(self, timeout_s: float = 5.0) -> None:
        """Wait until the peers acknowledged the last messages (a leaver's hand-over) and
        the clients' last replies are written (the leave's own answer among them)."""
        with trio.move_on_after(timeout_s):
            while (self.links is not None and self.links.unacknowledged()) or any(
                s.pending for s in self.sessions.clients.values()
            ):
                await trio.sleep(0.01)


def alone_and_empty(host: Host) -> str | None:
    """Why this daemon may not join another cluster (None: it may): only a one-process
    cluster with nothing stored and nothing pending can give up its own ring."""
    stats = host.process.stats()
    if not stats.alone:
        return "only a daemon that is alone (a one-process cluster) can join another cluster"
    if stats.held_elements + host.pending_ops:
        return "this daemon holds elements; drain it before it joins another cluster"
    return None

