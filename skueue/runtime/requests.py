"""The daemon's side of a client's request, before (or instead of) the host.

Most requests go to the host as they are (:meth:`Owner.from_client`).  What the host
cannot know is decided here first: a new enqueue under the disk reserve is refused, a
leased remove first gives the host the lease clock, a leave waits for no member to be
unreachable.  Some requests are the daemon's alone: ``stats`` gathers every member's
view, ``join`` reaches the seed first (the host becomes a joiner once it answered), and
``remove-member`` asks the cluster (``runtime/member_removal.py``).  The control frames
of the stats and the removal checks come here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from skueue.core.errors import RemoteProtocolError
from skueue.host.address import AddressError, parse_address
from skueue.host.replies import INVALID, UNAVAILABLE, ErrorReply
from skueue.host.requests import (
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
from skueue.runtime.errors import DaemonError, RefusedForGood
from skueue.runtime.failover import host_lost, took_over
from skueue.runtime.inbox import ClientError, JoinReached
from skueue.runtime.state import log

if TYPE_CHECKING:
    from skueue.runtime.owner import Owner


class ClientDesk:
    def __init__(self, owner: Owner) -> None:
        self.owner = owner

    def request(self, client: int, request: ClientRequest) -> None:
        owner = self.owner
        match request:
            case InsertRequest(rid=rid):
                if not self._refuse_for_space(client, rid):
                    owner.from_client(client, request)
            case RemoveRequest(lease_ms=lease_ms):
                if lease_ms:
                    owner.read_lease_clock()  # its lease may start in this very step
                owner.from_client(client, request)
            case LeaveRequest(rid=rid):
                self._leave(client, rid, request)
            case JoinClusterRequest(rid=rid, seed=seed):
                self._join(client, rid, seed)
            case RemoveMemberRequest(rid=rid, members=members):
                owner.removal.start(client, rid, members)
            case StatsRequest(rid=rid):
                self._stats(client, rid)
            case _:
                owner.from_client(client, request)

    def control(self, peer: str, frame: list[Any]) -> None:
        """A question or answer from a member's daemon channel."""
        owner = self.owner
        match frame[0]:
            case "stats-query":
                owner.send_on_channels([(peer, ["stats-answer", frame[1], owner.own_stats()])])
            case "stats-answer":
                owner.stats.answer(peer, frame[1], frame[2])
                owner.replies.extend(owner.stats.complete())
            case "leader":
                took_over(owner, peer, frame)
            case "host-lost":
                host_lost(owner, peer, frame)
            case "remove-check" | "remove-answer":
                try:
                    owner.removal.control(peer, frame)
                except RemoteProtocolError as e:
                    log.warning("bad removal frame; closing the member's channel", peer=peer,
                                error=str(e))  # fmt: skip
                    owner.ctx.drop_channel_session(peer)

    def _stats(self, client: int, rid: int) -> None:
        owner = self.owner
        links = owner.ctx.links
        assert links is not None
        peers = owner.host.directory.others()
        owner.stats.start(client, rid, owner.own_stats(), peers, trio.current_time(),
                          links.down())  # fmt: skip
        qid = owner.stats.last_qid
        owner.send_on_channels([(peer, ["stats-query", qid]) for peer in peers])
        owner.replies.extend(owner.stats.complete())

    def _refuse_for_space(self, client: int, rid: int) -> bool:
        """Below the disk reserve a new enqueue is refused, retryably
        (runtime/durability/disk_space.py); a retry of one this daemon already took gets
        its first outcome, as always."""
        owner = self.owner
        disk = owner.disk
        if disk is None:
            return False
        shortage = disk.shortage(trio.current_time())
        session = owner.ctx.sessions.clients.get(client)
        key = None if session is None or session.session is None else (session.session, rid)
        if shortage is None or (key is not None and owner.host.clients.knows(key)):
            return False
        disk.refused += 1
        owner.reply(client, ErrorReply(rid, shortage, UNAVAILABLE))
        return True

    def _leave(self, client: int, rid: int, request: LeaveRequest) -> None:
        """A leave needs an update phase, which needs every member: with one
        unreachable it would hang, so it is refused at once."""
        owner = self.owner
        links = owner.ctx.links
        assert links is not None
        process = owner.host.process
        refusal = None if owner.replicas is None else _replicated_leave_refusal(owner)
        if refusal is not None:
            owner.reply(client, ErrorReply(rid, *refusal))
            return
        if links.down() and not process.leaving and not process.stats().alone:
            why = owner.ctx.why_no_answer()
            message = f"cannot leave while members are unreachable ({why})"
            owner.reply(client, ErrorReply(rid, message, UNAVAILABLE))
            return
        was_leaving = process.leaving
        owner.from_client(client, request)
        if owner.host.process.leaving and not was_leaving:
            log.info("leaving", process=owner.ctx.process_id)

    def _join(self, client: int, rid: int, seed: str) -> None:
        owner = self.owner
        problem = owner.host.alone_and_empty()
        if problem:
            owner.reply(client, ErrorReply(rid, problem, INVALID))
            return
        try:
            address = parse_address(seed)
        except AddressError as e:
            owner.reply(client, ErrorReply(rid, str(e), INVALID))
            return
        assert owner.ctx.nursery is not None
        owner.ctx.nursery.start_soon(self._reach_seed, address, client, rid)

    async def _reach_seed(self, address: Any, client: int, rid: int) -> None:
        ctx = self.owner.ctx
        assert ctx.links is not None
        try:
            seed = await ctx.links.connect_seed(address, ctx.limits.join_timeout_s)
        except DaemonError as e:
            # Refused for good (another release, another --replicas): not worth a retry.
            retryable = not isinstance(e, RefusedForGood)
            await ctx.to_owner(ClientError(client, rid, str(e), retryable))
            return
        await ctx.to_owner(JoinReached(seed, address, client, rid))


def request_kind(request: ClientRequest) -> str:
    """The request's name in the metrics: its kind, a blocking remove apart (its time
    includes the wait), a lease request by what it does (ack, nack, extend)."""
    match request:
        case InsertRequest():
            return "insert"
        case RemoveRequest(wait_ms=wait_ms):
            return "remove" if wait_ms is None else "remove_blocking"
        case LeaseRequest(how=how):
            return str(how)
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


def _replicated_leave_refusal(owner: Owner) -> tuple[str, str] | None:
    """Why a member of a replicated cluster may not leave now (its message and code):
    its groups' copies move to the others as a lost host's do (runtime/replicas.py)."""
    replicas = owner.replicas
    assert replicas is not None
    if replicas.standing:
        # Its stand-ins would go with it, and their processes have no other home.
        return (f"this daemon serves the process of a member that is down "
                f"({', '.join(sorted(replicas.standing))}); it can leave once that "
                "process is served by its home again, or removed", UNAVAILABLE)  # fmt: skip
    k = replicas.voters_per_group
    live = set(owner.host.directory.addresses) - replicas.lost
    if len(live) <= k:
        return (f"a cluster run with --replicas {k} keeps at least {k} members; "
                f"it has {len(live)}, so none of them can leave", INVALID)  # fmt: skip
    return None
