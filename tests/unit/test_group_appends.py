"""A replicated process's leader (runtime/group.py) sends its appends once its log has
written them, before its sync: a kill -9 of the leader then cannot leave a follower
holding entries the leader's own log lacks, whose votes it could never win while the
followers do not stand (docs/replication.md §11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skueue.replication.config import Config
from skueue.replication.messages import (
    AppendEntries,
    AppendReply,
    Message,
    RequestVote,
    VoteReply,
)
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy
from skueue.runtime.group import ProcessGroup


def test_the_leaders_appends_leave_once_its_log_is_written(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, Meta("P", "n", "queue", ()), SyncPolicy())
    synced: list[int] = []
    log._fdatasync = lambda: synced.append(log.end)  # type: ignore[method-assign]
    sent: list[tuple[str, Message, Any]] = []

    def send(to: str, message: Message) -> None:
        # What the log holds on its file when the message leaves, and whether it synced.
        sent.append((to, message, (log.buffered, log.end, len(synced))))

    group = ProcessGroup("P", log, Config.of(["P", "b", "c"]), send)
    group.campaign()
    group.end_step(0.0)
    for kind in (True, False):  # the pre-vote, then the vote
        term = max(m.term for _, m, _ in sent if isinstance(m, RequestVote))
        group.receive("b", VoteReply(term, granted=True, pre_vote=kind))
        group.end_step(0.0)
    assert group.leading
    for follower in ("b", "c"):  # they hold its took_over entry: pipelined from here
        group.receive(follower, AppendReply(group.node.term, group.node.last_index,
                                            reject=False))  # fmt: skip
    group.end_step(0.0)
    sent.clear()
    synced.clear()
    group.stage(["tick"])
    group.end_step(0.0)
    appends = [(m, at) for _, m, at in sent if isinstance(m, AppendEntries) and m.entries]
    assert appends, sent
    for _message, (buffered, end, syncs) in appends:
        assert buffered == 0 and end > 0, "an append left before its entries were written"
        assert syncs == 0, "the leader's appends wait for its write, not for its sync"
    assert synced, "the step still syncs"
