"""The links between simulated daemons (skueue/sim/hosts.py): reliable, numbered, and in
the order the schedule picks.

Theory of operation
-------------------
A daemon's link layer (``runtime/link_sender.py``, ``link_receiver.py``) numbers the
frames of each ordered pair of processes, keeps each in an outbox until the far end has
handled it, resends the rest after every reconnect and skips what was handled: no frame
is lost or duplicated, also across a crash of either end.  So a frame here stays in its
link until the receiver took it in a step that was synced (:meth:`Links.take`).

Which frame goes next is the schedule's:

- ``fifo`` (the daemon's TCP links): the oldest frame of a link picked at random;
- ``any`` (the paper's model, §I-B): any frame of any link, so frames overtake each
  other, as the adversarial scheduler (``sim/adversary.py``) delivers messages.

In both, a *mood* drawn now and then skews the choice as the adversary does: uniform,
newest first (``any`` only), or starving a victim process whose frames wait.

A link session starts with the peer's hello (the receiver steps ``Hello`` before the
first frame of a session); a crash of either end ends the sessions it had, and a
receiver whose peer crashed steps ``PeerGone``.  A process that left the cluster is
forgotten by the others (``ForgetPeer``: its outbox is dropped); once it has sent what
it had, it exits, and frames still on their way to it are lost, as the daemon's are.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

Link = tuple[str, str]
"""(sender, receiver)."""
MOODS = ("uniform", "newest", "starve")


class Links:
    def __init__(self, rng: random.Random, any_order: bool) -> None:
        self.rng = rng
        self.any_order = any_order
        self.frames: dict[Link, deque[tuple[int, Any]]] = {}
        self.numbers: dict[Link, int] = {}
        self.sessions: set[Link] = set()  # links whose receiver took the sender's hello
        self.mood = "uniform"
        self.victim: str | None = None
        self.sent = 0
        self.in_flight = 0

    def send(self, src: str, dst: str, payload: Any) -> None:
        link = (src, dst)
        self.numbers[link] = number = self.numbers.get(link, 0) + 1
        self.frames.setdefault(link, deque()).append((number, payload))
        self.sent += 1
        self.in_flight += 1

    def busy(self) -> bool:
        return self.in_flight > 0

    def sending(self, pid: str) -> bool:
        """Whether ``pid`` still has frames on their way out."""
        return any(q for (src, _), q in self.frames.items() if src == pid)

    def pick(self) -> tuple[Link, int] | None:
        """The next frame to deliver: its link and its index there (None: none is in
        flight)."""
        links = [k for k, q in self.frames.items() if q]
        if not links:
            return None
        if self.mood == "starve" and self.rng.random() < 0.95:
            spared = [k for k in links if k[1] != self.victim]
            links = spared or links
        link = self.rng.choice(links)
        size = len(self.frames[link])
        if not self.any_order:
            return link, 0
        if self.mood == "newest":
            return link, size - 1 - min(size - 1, int(self.rng.expovariate(0.5)))
        return link, self.rng.randrange(size)

    def peek(self, link: Link, index: int) -> tuple[int, Any]:
        return self.frames[link][index]

    def take(self, link: Link, index: int) -> None:
        """The receiver took the frame (and synced): it is handled, never sent again."""
        del self.frames[link][index]
        self.in_flight -= 1

    def forget(self, src: str, dst: str) -> None:
        """``src`` forgot ``dst`` (it left the cluster): the outbox goes with the link."""
        self.in_flight -= len(self.frames.pop((src, dst), ()))

    def end_sessions(self, pid: str) -> list[str]:
        """``pid`` crashed: every session to or from it ends.  Returns the processes whose
        session from ``pid`` ended (they step ``PeerGone``)."""
        ended = [link for link in self.sessions if pid in link]
        self.sessions.difference_update(ended)
        return sorted(dst for src, dst in ended if src == pid)

    def change_mood(self, pids: list[str]) -> None:
        self.mood = self.rng.choice(MOODS)
        self.victim = self.rng.choice(pids) if pids else None
