"""``skueue remove-member``: the members' answers to one check, and what they decide.

Every member but those to remove says, for each of them, what its core holds of it
(:class:`~skueue.core.membership.removal.Hold`, with the words why) and whether its own
link to it is up.  The members may be forgotten only if every member answered, none
reaches them, and none holds them as part of the ring; otherwise the first reason in
that order is the answer.  No I/O here: the owner feeds it (runtime/member_removal.py).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import attrs

from skueue.core.membership.removal import Hold
from skueue.host.replies import REFUSED, UNAVAILABLE

WHY_CHARS_MAX = 300  # a member's reason, as shown to the operator

Holding = tuple[Hold, str, bool]
"""What one member holds of one member to remove: the hold, why, and whether it reaches it."""


def ring_refusal(member: str, why: str) -> str:
    """Why a member in the ring cannot be forgotten, and what can be done instead."""
    return (
        f"cannot remove {member}: it is part of the ring ({why}). Its three nodes, its share "
        "of the elements and maybe the anchor exist only on it (Skueue keeps one copy: no "
        "replication yet), so the cluster cannot go on without it and waits for it. Start it "
        "again from its data directory (the same --data-dir and --id, at the address the "
        "members know it by; on another host, move the address with it). If its data is "
        "lost, so are its elements, and the cluster cannot serve again: start a new cluster"
    )


@attrs.define
class RemovalCheck:
    client: int
    rid: int
    members: tuple[str, ...]  # process ids to forget
    addresses: dict[str, str]  # where each listened, for the answer
    deadline: float
    waiting: set[str]  # members asked that have not answered
    answers: dict[str, list[Holding]] = attrs.Factory(dict)  # per member, per target

    def answer(self, peer: str, holdings: Any) -> None:
        """A member's answer; a late, unknown or malformed one is left out (the check
        then lacks it, and says so)."""
        if peer not in self.waiting or not isinstance(holdings, list):
            return
        if len(holdings) != len(self.members) or not all(_holding(h) for h in holdings):
            return
        self.waiting.discard(peer)
        self.answers[peer] = [(Hold(h[0]), h[1][:WHY_CHARS_MAX], h[2]) for h in holdings]

    def refusal(self, served: Collection[str] = ()) -> tuple[str, str] | None:
        """Why the members may not be forgotten (an error code and one line), or None.
        A member in ``served`` may hold part of the ring and have links up: its copies
        serve its process (``--failover``), and only its host is forgotten."""
        names = ", ".join(self.members)
        if self.waiting:
            silent = ", ".join(sorted(self.waiting))
            return UNAVAILABLE, (
                f"cannot tell whether {names} hold part of the ring: no answer from {silent} "
                "(a member that is down cannot be asked; if it is gone for good too, name it "
                "in the same skueue remove-member)"
            )
        for index, member in enumerate(self.members):
            for peer, holdings in sorted(self.answers.items()):
                # (A link to a served member's process goes to the copy that serves it,
                # whether the peer heard where yet or not: the probe tried its host.)
                if holdings[index][2] and member not in served:
                    return REFUSED, (
                        f"{member} is not gone: {peer} has a link up with it (a live member "
                        "leaves with skueue leave --node ITS-ADDRESS)"
                    )
        for index, member in enumerate(self.members):
            for _, holdings in sorted(self.answers.items()):
                hold, why, _ = holdings[index]
                if hold is Hold.RING and member not in served:
                    return REFUSED, ring_refusal(member, why)
        return None

    def held(self, member: str) -> str:
        """What ``member`` held, for the answer: nothing, or a joiner's place in line."""
        index = self.members.index(member)
        if any(h[index][0] is Hold.JOINER for h in self.answers.values()):
            return "a joiner's place (it never got into the ring): nothing lost"
        return "nothing (it was in no member's ring): nothing lost"


def _holding(x: Any) -> bool:
    return (
        isinstance(x, list)
        and len(x) == 3
        and type(x[0]) is int
        and x[0] in tuple(Hold)
        and type(x[1]) is str
        and type(x[2]) is bool
    )
