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
4. the daemon forgets them (its input log's ``R`` record) and tells every member
   (``removed``, passed on like a departure): each drops them from its directory, its
   links and its core's joiners, and refuses them if they ever come back.

Issue 31 (replication) builds on these steps: a RING hold on a replicated member becomes
a failover to its replicas and a re-replication, instead of a refusal.
"""

from __future__ import annotations

from typing import Any

import trio

from skueue.core.membership.removal import Hold
from skueue.core.messages.membership import JoinRequest
from skueue.host.address import AddressError, parse_address
from skueue.runtime.inputs import RemovalProbed
from skueue.runtime.removal_check import RemovalCheck
from skueue.runtime.state import DaemonState, log
from skueue.wire.client_replies import INVALID, REFUSED, Done, ErrorReply
from skueue.wire.errors import RemoteProtocolError

MEMBERS_PER_CHECK_MAX = 16  # as REMOVE_MEMBERS_MAX: what a peer's remove-check may name


class MemberRemoval(DaemonState):
    def _remove_members(self, client: int, rid: int, names: tuple[str, ...]) -> None:
        """Step 1: look the names up, then try their addresses (step 2, in a task)."""
        assert self.host is not None and self.directory is not None and self.nursery is not None
        directory, members, gone = self.directory, [], []
        for name in names:
            member = self._member_named(name)
            if member == self.process_id:
                message = (f"{name} is this daemon: ask another member to remove it, or make "
                           "it leave (skueue leave)")  # fmt: skip
                self.host.client_frames.append((client, ErrorReply(rid, message, INVALID)))
                return
            if member is None and name in directory.departed:
                gone.append(name)
            elif member is None:
                known = ", ".join(directory.others()) or "none"
                message = f"no member {name} in this cluster (the other members: {known})"
                self.host.client_frames.append((client, ErrorReply(rid, message, INVALID)))
                return
            else:
                members.append(member)
        if not members:
            self.host.client_frames.append((client, Done(rid, [_result([], gone, {})])))
            return
        addresses = {m: directory.address(m) for m in members}
        self.nursery.start_soon(self._probe, client, rid, tuple(members), addresses)

    def _member_named(self, name: str) -> str | None:
        """The member a process id or an address names (None: none)."""
        assert self.directory is not None
        if self.directory.is_member(name):
            return name
        try:
            address = parse_address(name)
        except AddressError:
            return None
        found = [p for p, a in self.directory.addresses.items() if a == address]
        return found[0] if found else None

    async def _probe(self, client: int, rid: int, members: tuple[str, ...], addresses: Any) -> None:
        """Step 2: which of them still accept a connection (a bare TCP connect)."""
        assert self.links is not None
        answering = []
        timeout_s = self.limits.member_probe_timeout_s
        for member in members:
            address = addresses[member]
            if address is not None and await self.links.answers(address, timeout_s):
                answering.append(member)
        await self.inbox_send.send(RemovalProbed(client, rid, members, tuple(answering)))

    def _probed(self, probed: RemovalProbed) -> None:
        """Step 3: ask every other member what it holds of them."""
        assert self.host is not None and self.directory is not None
        client, rid, members = probed.client, probed.rid, probed.members
        if probed.answering:
            where = ", ".join(
                f"{m} at {self.directory.address(m)}" for m in probed.answering
            )
            message = (f"{where} accepts connections: not gone (a live member leaves with "
                       "skueue leave --node ITS-ADDRESS; remove-member forgets only a member "
                       "that will never come back)")  # fmt: skip
            self.host.client_frames.append((client, ErrorReply(rid, message, REFUSED)))
            return
        members = tuple(m for m in members if self.directory.is_member(m))
        if not members:  # removed meanwhile (another request): done
            self.host.client_frames.append((client, Done(rid, [_result([], [], {})])))
            return
        others = [p for p in self.directory.others() if p not in members]
        qid = next(self.removal_numbers)
        addresses = {m: str(self.directory.address(m)) for m in members}
        deadline = trio.current_time() + self.limits.stats_timeout_s
        check = RemovalCheck(client, rid, members, addresses, deadline, {*others, self.process_id})
        check.answer(self.process_id, self._holdings(members))
        self.removal_checks[qid] = check
        self._send_control([(peer, ["remove-check", qid, list(members)]) for peer in others])
        self._removal_ready()

    def _holdings(self, members: tuple[str, ...]) -> list[list[Any]]:
        """This daemon's answer to a check: per member, its core's hold, why, and whether
        this daemon reaches it now."""
        assert self.host is not None and self.links is not None
        out = []
        for member in members:
            hold, why = self.host.process.hold_on(member)
            up = member in self.links.connected or member in self.peer_sessions
            out.append([int(hold), why, up])
        return out

    def _removal_control(self, peer: str, frame: list[Any]) -> None:
        """The control frames of a check and of a removal, from a peer."""
        assert self.directory is not None
        kind = frame[0]
        if kind == "remove-check":
            qid, members = frame[1], frame[2]
            if not (isinstance(members, list) and 0 < len(members) <= MEMBERS_PER_CHECK_MAX
                    and all(type(m) is str and 0 < len(m) <= 256 for m in members)):  # fmt: skip
                raise RemoteProtocolError("remove-check: expected a list of process ids")
            self._send_control([(peer, ["remove-answer", qid, self._holdings(tuple(members))])])
        elif kind == "remove-answer":
            check = self.removal_checks.get(frame[1]) if type(frame[1]) is int else None
            if check is not None:
                check.answer(peer, frame[2])
                self._removal_ready()
        else:  # ["removed", id]
            member = frame[1]
            if type(member) is not str or not 0 < len(member) <= 256:
                raise RemoteProtocolError("removed: expected a process id")
            if member == self.process_id:
                # Never sent by a correct member: this daemon answers, so it is not gone.
                raise RemoteProtocolError("removed: names the daemon it is sent to")
            if member not in self.directory.removed:
                self._forget_member(member)
                self._send_control([(p, frame) for p in self.directory.others() if p != peer])

    def _removal_ready(self, now: float | None = None) -> None:
        """Step 4 for every check that has all its answers (or, with ``now``, whose
        deadline passed): forget the members, or answer why not."""
        assert self.host is not None and self.directory is not None
        done = [
            q for q, c in self.removal_checks.items()
            if not c.waiting or (now is not None and c.deadline <= now)
        ]  # fmt: skip
        for qid in done:
            check = self.removal_checks.pop(qid)
            refusal = check.refusal()
            if refusal is not None:
                code, message = refusal
                self.host.client_frames.append((check.client, ErrorReply(check.rid, message, code)))
                continue
            held = {m: check.held(m) for m in check.members}
            for member in check.members:
                self._log(["R", member])
                self._forget_member(member)
                self._send_control([(p, ["removed", member]) for p in self.directory.others()])
            result = _result(list(check.members), [], held, check.addresses)
            self.host.client_frames.append((check.client, Done(check.rid, [result])))

    def removal_seconds_to_deadline(self, now: float) -> float:
        if not self.removal_checks:
            return float("inf")
        return max(0.0, min(c.deadline for c in self.removal_checks.values()) - now)

    def _forget_member(self, member: str) -> None:
        """Forget a member for good, here: the directory, the links, the core's joiners.
        (An input: logged as the R record where asked, as the peer's removed frame
        elsewhere; the replay does the same.)"""
        assert self.host is not None and self.directory is not None and self.links is not None
        self.directory.remove(member)
        self.links.forget(member)
        self.links.failed.discard(member)
        self._drop_peer_session(member)
        hold, why = self.host.process.hold_on(member)
        if hold is Hold.RING:
            # The check found nothing; a message that came in between changed that.
            log.error(
                "a member was removed from the cluster, but this daemon's ring still holds "
                "it; its part of the tree waits for it",
                member=member,
                why=why,
            )
        else:
            self.host.process.forget_joiner(member)
        log.warning("forgot a member for good (skueue remove-member)", member=member)

    def _removed_join(self, message: object) -> bool:
        """A join request, routed on, of a member removed since: never placed again."""
        return (
            isinstance(message, JoinRequest)
            and self.directory is not None
            and message.joiner.process in self.directory.removed
        )


def _result(
    removed: list[str],
    gone: list[str],
    held: dict[str, str],
    addresses: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The answer to the client: what was removed and what it held; what was gone already."""
    return {
        "removed": [
            {"member": m, "address": (addresses or {}).get(m), "held": held[m]} for m in removed
        ],
        "gone_already": gone,
    }
