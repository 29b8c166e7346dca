"""Coming back from a crash: replay the input log through the same code (the log itself is
described in :mod:`skueue.runtime.input_log`).

Each record goes where the owner sent the input the first time: ticks, requests and peer
messages to the host (so the process, and the retry window, come back as they were),
hellos and gossip to the member directory.  Control frames the daemon sent of its own
accord are sent again as logged.  Replies to clients are dropped (the clients are gone;
those that retry get the first attempt's outcome from the retry window); every frame for a
peer goes into its link's outbox again, numbered as the first time, and the peers skip
the ones they already took.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skueue.core.errors import PeerError
from skueue.host.address import parse_address
from skueue.host.directory import vouches
from skueue.overlay.labels import Kind
from skueue.runtime.entry_store import named_records
from skueue.runtime.errors import DaemonError
from skueue.runtime.input_log import open_snapshot
from skueue.runtime.link_receiver import Inbound
from skueue.runtime.link_sender import LinkSender
from skueue.runtime.owner import OwnerLoop
from skueue.runtime.snapshots import RESTORED, install_outbox, restore
from skueue.runtime.state import log
from skueue.wire.peer import decode_message

# Control frames that ask or answer and change nothing: not replayed.
QUESTIONS = ("stats-query", "stats-answer", "remove-check", "remove-answer")


class Replay(OwnerLoop):
    def _restore(self, path: Path) -> None:
        """Take the state of the last snapshot (the records after it are replayed next)."""
        assert self.host is not None and self.directory is not None and self.links is not None
        try:
            with open_snapshot(path) as f:
                snapshot = restore(f, self.entry_store)
        except Exception as e:  # noqa: BLE001 - whatever unpickling a bad file raises
            raise DaemonError(f"the data directory's snapshot cannot be read: {e}") from None
        met = dict(self.directory.addresses)
        vars(self.directory).update(vars(snapshot.directory))
        for peer, address in met.items():
            if peer not in self.directory.departed:
                self.directory.learn(peer, address)
        self.host = snapshot.host
        for peer, handled in snapshot.handled.items():
            inbound = self.inbound.setdefault(peer, Inbound())
            inbound.accepted = inbound.handled = inbound.acked = handled
        for peer, (blobs, next_number, base) in snapshot.outboxes.items():
            link = self.links.senders.get(peer)
            if link is None:  # its writer starts once its address is known
                link = self.links.senders[peer] = LinkSender()
                self.links.unaddressed.add(peer)
            install_outbox(link, blobs, next_number, base)
        log.info("restored the snapshot", process=self.process_id, bytes=path.stat().st_size)

    def _forget_lost_appends(self) -> None:
        """Before the replay: the entry store keeps only what the restored state names
        (runtime/entry_store.py); the replay makes the rest again."""
        assert self.host is not None
        if self.entry_store is not None:
            gone = self.entry_store.keep_only(named_records(self.host.process))
            if gone:
                log.info("entry store: records the replay makes again were removed",
                         process=self.process_id, records=gone)

    def _replay(self, records: Iterable[Any]) -> None:
        assert self.host is not None and self.directory is not None and self.links is not None
        host, directory = self.host, self.directory
        handled: dict[str, int] = {}
        self.replaying = True
        count = 0
        try:
            for count, record in enumerate(records, 1):  # noqa: B007 - the count is logged
                match record:
                    case ["t"]:
                        host.tick()
                    # (A record without the fields that came later has their defaults.)
                    case ["i", session, rid, values, queue, stack, priority, *more]:
                        key = None if session is None else (session, rid)
                        prefer = more[0] if more else None
                        host.insert(RESTORED, rid, values, key=key, queue=queue, stack=stack,
                                    priority=priority, prefer_stack=prefer)  # fmt: skip
                        host.client_gone(RESTORED)
                    case ["r", session, rid, count, queue, stack, wait_ms, lease_ms, limit, *flags]:
                        key = None if session is None else (session, rid)
                        # A wait ends where the log says (a "w" record), not by a clock.
                        until = None if wait_ms is None else math.inf
                        prefer, fetch, look = flags if len(flags) == 3 else (None, False, False)
                        host.remove(RESTORED, rid, count, key=key, queue=queue, stack=stack,
                                    wait_until=until, lease_ms=lease_ms, max_deliveries=limit,
                                    prefer_stack=prefer, fetch=fetch, look=look)  # fmt: skip
                        host.client_gone(RESTORED)
                    case ["K", session, rid, queue, limit]:
                        key = None if session is None else (session, rid)
                        host.configure(RESTORED, rid, queue, limit, key=key)
                        host.client_gone(RESTORED)
                    case ["C", session, rid, queue, stack, limit, levels]:
                        key = None if session is None else (session, rid)
                        host.create(RESTORED, rid, queue, stack, limit or 0, levels, key=key)
                        host.client_gone(RESTORED)
                    case ["d", session, rid, queue]:
                        key = None if session is None else (session, rid)
                        host.delete(RESTORED, rid, queue, key=key)
                        host.client_gone(RESTORED)
                    case ["v", session, rid, queue]:
                        key = None if session is None else (session, rid)
                        host.peek(RESTORED, rid, queue, key=key)
                        host.client_gone(RESTORED)
                    case ["k", now_ms]:
                        host.clock(now_ms)
                    case ["L", how, ids, lease_ms]:
                        host.end_leases(how, ids, lease_ms)
                    case ["w", number]:
                        host.end_wait(number)
                    case ["T", session, rid]:  # its client was told it timed out
                        host.timeout_told((session, rid))
                    case ["R", member]:  # skueue remove-member, asked of this daemon
                        self._forget_member(member)
                    case ["p", peer, number, kind, encoded]:
                        handled[peer] = number
                        message = decode_message(encoded)
                        if self._removed_join(message):
                            continue
                        try:
                            host.peer_message(Kind(kind), message)
                        except PeerError:
                            pass  # refused the first time too (its link was dropped)
                        else:
                            if not directory.is_member(peer) and vouches(message):
                                directory.confirm(peer)
                    case ["c", peer, number, frame]:
                        handled[peer] = number
                        if frame[0] not in QUESTIONS:
                            self._control(peer, frame)
                    case ["h", peer, address]:
                        directory.on_hello(peer, parse_address(address))
                    case ["o", peer, frame]:
                        host.peer_frames[peer].append(frame)
                    case ["l"]:  # a leave it had started when it stopped
                        host.apply(host.process.leave())
                    case ["J", seed, address]:  # `skueue join` made this lone daemon join
                        if address is not None:
                            directory.learn(seed, parse_address(address))
                        host.process = self._joining_process(seed)
                        host.apply(self.pending_join_effects)
                        self.pending_join_effects = []
                    case _:
                        raise DaemonError(f"input log: a record this version cannot replay: "
                                          f"{record!r:.80}")
        finally:
            self.replaying = False
        # The waits of the last life's blocking removes end now: their clients are gone.
        # Logged, like every end of a wait, so that a later replay ends them here too.
        for number in sorted(host.waits):
            self._log(["w", number])
            host.end_wait(number)
        # So do the last life's leases: their connections are gone.  (The replay granted
        # some to its stand-in client, which is gone too: those are among them.)
        host.orphan_leases = []
        self._end_leases("restart", sorted(host.process.leases.table.leases))
        for peer, number in handled.items():
            inbound = self.inbound.setdefault(peer, Inbound())
            inbound.accepted = inbound.handled = inbound.acked = number
        peer_frames, _replies = host.take_frames()
        for peer, frames in peer_frames.items():
            self.links.send(peer, frames)
        log.info(
            "replayed the input log",
            process=self.process_id,
            records=count,
            frames_to_resend=self.links.unacknowledged(),
        )

