"""``skueue remove-member``: make the cluster forget, for good, members that will never come
back (issue 28, item 2).

Theory of operation
-------------------
The static member list defines the ring.  A member in the ring holds three nodes of the
tree, its share of the elements and maybe the anchor, and without replication none of it
exists anywhere else: the cluster cannot go on without it, so it is not forgotten, and
the answer says what can be done (bring it back from its data directory, on any host).
What can be forgotten is a member that holds nothing: an entry of the member directory
that never was in the ring, or a joiner that died before any of its operations went up
the tree, which stalls the whole tree until it is forgotten
(:mod:`skueue.core.membership.removal`).

The daemon asked goes step by step, and answers its client at the first that fails:

1. the names (process ids, or the addresses members listen at) are looked up; itself and
   unknown names are refused, members that are gone already are answered as such;
2. each member's address is tried (``member_probe_timeout_s``): one that accepts a
   connection is not gone (a live member leaves with ``skueue leave``);
3. every other member is asked (``remove-check``) what its core holds of them and whether
   its own link to them is up (:mod:`skueue.runtime.removal_check` decides);
4. the daemon forgets them (a ``RemoveMember`` input of its host, logged) and tells
   every member (``removed``, passed on like a departure): each drops them from its
   directory, its links and its core's joiners, and refuses them if they ever come back.

Issue 31 (replication) builds on these steps: a RING hold on a replicated member becomes
a failover to its replicas and a re-replication, instead of a refusal.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import trio

from skueue.core.errors import RemoteProtocolError
from skueue.host.address import AddressError, parse_address
from skueue.host.inputs import RemoveMember
from skueue.host.replies import INVALID, REFUSED, Done, ErrorReply
from skueue.host.results import MembersRemoved, RemovedMember
from skueue.runtime.inbox import RemovalProbed
from skueue.runtime.removal_check import RemovalCheck

if TYPE_CHECKING:
    from skueue.runtime.owner import Owner

MEMBERS_PER_CHECK_MAX = 16  # as REMOVE_MEMBERS_MAX: what a peer's remove-check may name


class MemberRemoval:
    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        # The checks waiting for the members' answers.
        self.checks: dict[int, RemovalCheck] = {}
        self.numbers = itertools.count(1)

    def start(self, client: int, rid: int, names: tuple[str, ...]) -> None:
        """Step 1: look the names up, then try their addresses (step 2, in a task)."""
        owner = self.owner
        directory, members, gone = owner.host.directory, [], []
        for name in names:
            member = self._member_named(name)
            if member == owner.ctx.process_id:
                message = (f"{name} is this daemon: ask another member to remove it, or make "
                           "it leave (skueue leave)")  # fmt: skip
                owner.reply(client, ErrorReply(rid, message, INVALID))
                return
            if member is None and name in directory.departed:
                gone.append(name)
            elif member is None:
                known = ", ".join(directory.others()) or "none"
                message = f"no member {name} in this cluster (the other members: {known})"
                owner.reply(client, ErrorReply(rid, message, INVALID))
                return
            else:
                members.append(member)
        if not members:
            owner.reply(client, Done(rid, (_result([], gone, {}),)))
            return
        addresses = {m: directory.address(m) for m in members}
        assert owner.ctx.nursery is not None
        owner.ctx.nursery.start_soon(self._probe, client, rid, tuple(members), addresses)

    def _member_named(self, name: str) -> str | None:
        """The member a process id or an address names (None: none)."""
        directory = self.owner.host.directory
        if directory.is_member(name):
            return name
        try:
            address = parse_address(name)
        except AddressError:
            return None
        found = [p for p, a in directory.addresses.items() if a == address]
        return found[0] if found else None

    async def _probe(self, client: int, rid: int, members: tuple[str, ...], addresses: Any) -> None:
        """Step 2: which of them still accept a connection (a bare TCP connect)."""
        ctx = self.owner.ctx
        assert ctx.links is not None
        answering = []
        timeout_s = ctx.limits.member_probe_timeout_s
        for member in members:
            address = addresses[member]
            if address is not None and await ctx.links.answers(address, timeout_s):
                answering.append(member)
        await ctx.to_owner(RemovalProbed(client, rid, members, tuple(answering)))

    def probed(self, probed: RemovalProbed) -> None:
        """Step 3: ask every other member what it holds of them."""
        owner = self.owner
        directory = owner.host.directory
        client, rid, members = probed.client, probed.rid, probed.members
        if probed.answering:
            where = ", ".join(f"{m} at {directory.address(m)}" for m in probed.answering)
            message = (f"{where} accepts connections: not gone (a live member leaves with "
                       "skueue leave --node ITS-ADDRESS; remove-member forgets only a member "
                       "that will never come back)")  # fmt: skip
            owner.reply(client, ErrorReply(rid, message, REFUSED))
            return
        members = tuple(m for m in members if directory.is_member(m))
        if not members:  # removed meanwhile (another request): done
            owner.reply(client, Done(rid, (_result([], [], {}),)))
            return
        own = owner.ctx.process_id
        # (Not a host lost for good already: nothing answers on its channel.  Its
        # process, served by a copy, stays in the ring and is not removed.)
        lost = set() if owner.replicas is None else owner.replicas.lost
        others = [p for p in directory.others() if p not in members and p not in lost]
        qid = next(self.numbers)
        addresses = {m: str(directory.address(m)) for m in members}
        deadline = trio.current_time() + owner.ctx.limits.stats_timeout_s
        check = RemovalCheck(client, rid, members, addresses, deadline, {*others, own})
        check.answer(own, self._holdings(members))
        self.checks[qid] = check
        owner.send_on_channels([(peer, ["remove-check", qid, list(members)]) for peer in others])
        self._ready()

    def _holdings(self, members: tuple[str, ...]) -> list[list[Any]]:
        """This daemon's answer to a check: per member, its core's hold, why, and whether
        this daemon reaches it now."""
        ctx = self.owner.ctx
        assert ctx.links is not None
        out = []
        for member in members:
            hold, why = self.owner.host.process.hold_on(member)
            up = member in ctx.links.connected or member in ctx.peer_sessions
            out.append([int(hold), why, up])
        return out

    def _served_elsewhere(self, member: str) -> bool:
        """With ``--failover``: a copy of ``member``'s process serves it, at another
        address than its own (runtime/stand_in.py)."""
        links, home = self.owner.ctx.links, self.owner.host.directory.address(member)
        assert links is not None
        return home is not None and links.where(member, home) != home

    def control(self, peer: str, frame: list[Any]) -> None:
        """The control frames of a check, from a peer."""
        kind = frame[0]
        if kind == "remove-check":
            qid, members = frame[1], frame[2]
            if not named_members(members):
                raise RemoteProtocolError("remove-check: expected a list of process ids")
            answer = ["remove-answer", qid, self._holdings(tuple(members))]
            self.owner.send_on_channels([(peer, answer)])
        else:  # remove-answer
            check = self.checks.get(frame[1]) if type(frame[1]) is int else None
            if check is not None:
                check.answer(peer, frame[2])
                self._ready()

    def expire(self, now: float) -> None:
        if self.checks:
            self._ready(now)

    def _ready(self, now: float | None = None) -> None:
        """Step 4 for every check that has all its answers (or, with ``now``, whose
        deadline passed): forget the members, or answer why not."""
        owner = self.owner
        done = [
            q for q, c in self.checks.items()
            if not c.waiting or (now is not None and c.deadline <= now)
        ]  # fmt: skip
        for qid in done:
            check = self.checks.pop(qid)
            served = [m for m in check.members if self._served_elsewhere(m)]
            refusal = check.refusal(served)
            if refusal is not None:
                code, message = refusal
                owner.reply(check.client, ErrorReply(check.rid, message, code))
                continue
            held = {m: check.held(m) for m in check.members}
            for member in check.members:
                if member in served:
                    held[member] = self._lost_for_good(member)
                else:
                    owner.enter(RemoveMember(member))
            result = _result(list(check.members), [], held, check.addresses)
            owner.reply(check.client, Done(check.rid, (result,)))

    def _lost_for_good(self, member: str) -> str:
        """A ring member whose process its copies serve (``--failover``): its host is
        lost for good, and every group that kept a copy on it gets a new one
        (runtime/re_replication.py); the process stays in the ring, served by a copy.
        Returns what the answer says of it."""
        owner = self.owner
        assert owner.replicas is not None and owner.ctx.links is not None
        owner.replicas.host_lost([member])
        others = owner.host.directory.others()
        owner.send_on_channels([(peer, ["host-lost", [member]]) for peer in others])
        where = owner.ctx.links.led_at[member][1]
        return (f"its process goes on, served by a copy at {where}; each group that kept a "
                "copy on its host gets a new one on a survivor (skueue stats: durable.copies)")

    def seconds_to_deadline(self, now: float) -> float:
        if not self.checks:
            return float("inf")
        return max(0.0, min(c.deadline for c in self.checks.values()) - now)


def named_members(x: Any) -> bool:
    """Whether a peer's frame names members as it may: a short list of process ids."""
    return (isinstance(x, list) and 0 < len(x) <= MEMBERS_PER_CHECK_MAX
            and all(type(m) is str and 0 < len(m) <= 256 for m in x))  # fmt: skip


def _result(
    removed: list[str],
    gone: list[str],
    held: dict[str, str],
    addresses: dict[str, str] | None = None,
) -> MembersRemoved:
    """The answer to the client: what was removed and what it held; what was gone already."""
    return MembersRemoved(
        tuple(RemovedMember(m, (addresses or {}).get(m), held[m]) for m in removed),
        tuple(gone),
    )
