"""A small driver for the host tests: the host's one entry point (``Host.step``) behind
calls that read like a client's (``insert``, ``remove``, ...), and what the steps made
collected as the daemon's owner would (frames per peer, replies per client).

Every call builds the input the daemon would build and steps it; what the host holds is
read through :attr:`HostDriver.clients`.  With ``log``, every logged input is kept, so a
test can step the same inputs through a fresh host, as a restart's replay does.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from typing import Any

from skueue.core.effects import Send
from skueue.core.ops import Structure
from skueue.core.process import Process
from skueue.host.address import Address
from skueue.host.directory import Directory
from skueue.host.effects import Reply, SendControl
from skueue.host.host import Host
from skueue.host.inputs import (
    ClientGone,
    EndWait,
    FromClient,
    Input,
    LeaseClock,
    PeerMessage,
    Tick,
)
from skueue.host.replies import Reply as ClientReply
from skueue.host.requests import (
    ConfigureRequest,
    CreateRequest,
    DeleteRequest,
    InsertRequest,
    LeaseRequest,
    RemoveRequest,
)
from skueue.host.retries import RetryKey, RetryWindow
from skueue.overlay.labels import Kind
from skueue.overlay.ring import build_views


def one_process_host(
    structure: Structure = Structure.QUEUE, pid: str = "p0", window: RetryWindow | None = None
) -> Host:
    views = {n.kind: v for n, v in build_views([pid]).items() if n.process == pid}
    directory = Directory(pid, Address("127.0.0.1", 1))
    return Host(Process.create(pid, views, structure), directory, retry_window=window)


def fields(reply: ClientReply) -> tuple[Any, ...]:
    """A reply as ``(kind, field, ...)``: ``("done", rid, (Inserted(...), ...))``."""
    return (reply.KIND, *(getattr(reply, f.name) for f in dataclasses.fields(reply)))


class HostDriver:
    def __init__(self, host: Host, keep_log: bool = False) -> None:
        self.host = host
        self.peers: dict[str, list[Any]] = defaultdict(list)
        self.replies: list[tuple[int, ClientReply]] = []
        self.log: list[Input] | None = [] if keep_log else None

    @property
    def clients(self) -> Any:
        return self.host.clients

    @property
    def process(self) -> Process:
        return self.host.process

    def step(self, item: Input) -> None:
        if self.log is not None and item.logged:
            self.log.append(item)
        for effect in self.host.step(item):
            if isinstance(effect, Send):
                self.peers[effect.to.process].append(effect)
            elif isinstance(effect, SendControl):
                self.peers[effect.peer].append(effect.frame)
            elif isinstance(effect, Reply):
                self.replies.append((effect.client, effect.reply))

    def take_frames(self) -> tuple[dict[str, list[Any]], list[tuple[int, ClientReply]]]:
        peers, replies = self.peers, self.replies
        self.peers, self.replies = defaultdict(list), []
        return peers, replies

    # -- a client's requests ------------------------------------------------------------

    def request(
        self, client: int, request: Any, deadline: float = math.inf, key: RetryKey | None = None,
        now: float = 0.0,
    ) -> None:
        assert key is None or key[1] == request.rid, "a retry key's rid is its request's"
        session = None if key is None else key[0]
        self.step(FromClient(client, session, request, deadline, now))

    def insert(
        self, client: int, rid: int, values: list[bytes], deadline: float = math.inf,
        key: RetryKey | None = None, queue: str | None = None, stack: bool | None = None,
        priority: int | None = None, prefer_stack: bool | None = None,
    ) -> None:
        request = InsertRequest(rid, tuple(values), queue, stack, priority, prefer_stack)
        self.request(client, request, deadline, key)

    def remove(
        self, client: int, rid: int, count: int, deadline: float = math.inf,
        key: RetryKey | None = None, queue: str | None = None, stack: bool | None = None,
        wait_until: float | None = None, lease_ms: int | None = None,
        max_deliveries: int | None = None, prefer_stack: bool | None = None,
        fetch: bool = False, look: bool = False,
    ) -> None:
        """``wait_until``: a blocking remove whose wait ends then (driver seconds, from 0)."""
        wait_ms = None if wait_until is None else round(wait_until * 1000)
        request = RemoveRequest(rid, count, queue, stack, wait_ms, lease_ms, max_deliveries,
                                prefer_stack, fetch, look)  # fmt: skip
        # The host adds the wait to the deadline (its time out starts after the wait).
        self.request(client, request, deadline - (wait_until or 0.0), key)

    def create(self, client: int, rid: int, queue: str, stack: bool | None = None,
               max_deliveries: int | None = None, priorities: int | None = None) -> None:
        self.request(client, CreateRequest(rid, queue, stack, max_deliveries, priorities))

    def configure(self, client: int, rid: int, queue: str, max_deliveries: int) -> None:
        self.request(client, ConfigureRequest(rid, queue, max_deliveries))

    def delete(self, client: int, rid: int, queue: str) -> None:
        self.request(client, DeleteRequest(rid, queue))

    def lease(self, client: int, rid: int, how: Any, leases: list[int],
              lease_ms: int | None = None, key: RetryKey | None = None) -> None:
        self.request(client, LeaseRequest(rid, how, tuple(leases), lease_ms), key=key)

    def client_gone(self, client: int) -> None:
        self.step(ClientGone(client))

    # -- the rest of the world ----------------------------------------------------------

    def tick(self) -> None:
        self.step(Tick())

    def clock(self, now_ms: int) -> None:
        self.step(LeaseClock(now_ms))

    def peer_message(self, to: Kind, message: Any, peer: str = "p9", number: int = 1) -> None:
        self.step(PeerMessage(peer, number, to, message))

    def end_wait(self, number: int) -> None:
        self.step(EndWait(number))

    def due(self, now: float, why: str = "the cause is unknown") -> list[Input]:
        """What time made due by ``now``, each stepped (as the daemon's owner does)."""
        made = self.host.due(now, why)
        for item in made:
            self.step(item)
        return made

    def settle(self, ticks_max: int = 50) -> list[tuple[int, tuple[Any, ...]]]:
        """Tick until no operation is pending (bounded); every client reply produced, as
        :func:`fields` of it.  A one-process cluster sends nothing to peers."""
        frames: list[tuple[int, tuple[Any, ...]]] = []
        for _ in range(ticks_max):
            peers, replies = self.take_frames()
            assert not any(peers.values()), f"a one-process cluster sent to peers: {peers}"
            frames += [(client, fields(reply)) for client, reply in replies]
            if not self.clients.pending_ops:
                return frames
            self.tick()
        pending = self.clients.pending_ops
        raise AssertionError(f"{pending} operations still pending after {ticks_max} ticks")
