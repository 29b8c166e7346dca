"""What waits, in order, while a replicated process's group cannot take inputs: it does
not lead (at a start, or after CheckQuorum: fewer than a majority of its replicas
answer), or a snapshot waits for the commit to catch up (runtime/owner.py).

Nothing of it is logged yet.  So a client request that has waited its whole timeout is
answered then, retryably (``unavailable``, saying why), rather than left to the client's
own timeout with no word: the group may not lead again for a long while, and a client
told so may retry or go to another member.  Everything else (peer frames, hellos, a
client's leaving) waits on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from skueue.host.host import Host
from skueue.host.replies import UNAVAILABLE, ErrorReply
from skueue.runtime.inbox import InboxItem
from skueue.runtime.network.client_reader import ClientInput
from skueue.runtime.network.sessions import ClientSessions

if TYPE_CHECKING:
    from skueue.runtime.owner import Owner

NOT_LEADING = (
    "this member's process cannot take requests now: its replication group does not "
    "lead (fewer than a majority of its replicas answer); retry, or use another member"
)


@attrs.define
class DeferredInputs:
    items: list[tuple[float, InboxItem]] = attrs.field(factory=list)  # (since, item)

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, items: list[InboxItem], now: float) -> None:
        self.items.extend((now, item) for item in items)

    def take(self) -> list[InboxItem]:
        """Everything, in order, for the group leads again."""
        items, self.items = [item for _, item in self.items], []
        return items

    def expired(self, now: float, owner: Owner) -> list[tuple[int, ErrorReply]]:
        """The answers to the client requests that waited their timeout; they wait no
        more.  Not a request sent again whose first attempt the host took (running, or
        finished): something may have been done for it, so it waits on for the group,
        and for its client's own timeout."""
        host, sessions = owner.host, owner.ctx.sessions
        answers, kept = [], []
        for since, item in self.items:
            if (isinstance(item, ClientInput)
                    and now - since >= owner.request_timeout_s(item.client)
                    and not _taken_before(item, host, sessions)):  # fmt: skip
                answers.append((item.client, ErrorReply(item.request.rid, NOT_LEADING,
                                                        UNAVAILABLE)))  # fmt: skip
            else:
                kept.append((since, item))
        self.items = kept
        return answers


def _taken_before(item: ClientInput, host: Host, sessions: ClientSessions) -> bool:
    session = sessions.clients.get(item.client)
    if session is None or session.session is None:
        return False  # no retry key: every request is a first attempt
    return host.clients.knows((session.session, item.request.rid))
