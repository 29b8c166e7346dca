"""The messages replicas of one group send each other (Raft §5, thesis §3–§9), and the
entries of a group's log.

Every message carries its sender's term (Raft §5.1): a replica refuses anything of an
older term, answering with its own, and follows a newer one.  Messages may be lost,
duplicated and reordered on the way (the daemon channel is not numbered); the rules of
``node.py`` make every one of them safe to take twice or late (Raft §5.5).  The codec
(``codec.py``) is derived from these classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from skueue.replication.config import Config

EntryKind = Literal["data", "took_over", "config"]
ENTRY_KINDS: tuple[EntryKind, ...] = ("data", "took_over", "config")


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a group's log.

    - ``data``: a proposal of the leader's driver (in a daemon, one record of its input
      log), opaque here;
    - ``took_over``: the first entry of every leader's term (Raft §8's no-op): committing
      it commits what the leader inherited (Raft §5.4.2), and the driver steps its host's
      ``TookOver`` with it;
    - ``config``: the group's next configuration (``config``), in force once appended.
    """

    term: int
    kind: EntryKind
    data: bytes = b""
    config: Config | None = None

    def __post_init__(self) -> None:
        # Here rather than in the codec, so that no entry anywhere (a proposal, a log
        # read back, a message) can be a config entry without its configuration.
        if (self.kind == "config") != (self.config is not None):
            raise ValueError("a config entry carries a configuration, and no other kind does")

    def size(self) -> int:
        """Bytes it weighs toward an append's limit (its data; a few for the rest)."""
        return len(self.data) + 16


@dataclass(frozen=True, slots=True)
class AppendEntries:
    """The leader's entries after ``(prev_index, prev_term)``, and its commit index; with
    no entries, a heartbeat (Raft §5.3)."""

    kind: ClassVar[str] = "append"
    term: int
    prev_index: int
    prev_term: int
    entries: tuple[Entry, ...]
    commit: int


@dataclass(frozen=True, slots=True)
class AppendReply:
    """A follower's answer to an append, sent once what it took is durable.

    On success ``match_index`` is the last index its log now shares with the leader's.
    On a refusal (``reject``) ``match_index`` is the hint: the leader tries again from
    ``min(hint, its next index − 1)`` (Raft §5.3's optimization).  ``counts`` is false
    while the replica may have forgotten entries it acked (docs/replication.md I6).
    """

    kind: ClassVar[str] = "append_reply"
    term: int
    match_index: int
    reject: bool
    counts: bool = True


@dataclass(frozen=True, slots=True)
class RequestVote:
    """A candidate asks for a vote (Raft §5.2); ``pre_vote``: would you vote for me at
    ``term``, without anyone's term moving (thesis §9.6); ``transfer``: the leader asked
    for this election (thesis §3.10), so a recent leader does not make voters ignore it."""

    kind: ClassVar[str] = "vote"
    term: int
    last_index: int
    last_term: int
    pre_vote: bool = False
    transfer: bool = False


@dataclass(frozen=True, slots=True)
class VoteReply:
    kind: ClassVar[str] = "vote_reply"
    term: int
    granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The leader's state machine up to ``index`` (Raft §7), for a replica whose next
    entry the leader no longer keeps.  ``data`` is the driver's, opaque here."""

    kind: ClassVar[str] = "snapshot"
    term: int
    index: int
    last_term: int
    config: Config
    data: bytes


@dataclass(frozen=True, slots=True)
class TimeoutNow:
    """The leader hands over: campaign now (thesis §3.10)."""

    kind: ClassVar[str] = "timeout_now"
    term: int


Message = AppendEntries | AppendReply | RequestVote | VoteReply | Snapshot | TimeoutNow
MESSAGE_KINDS: tuple[type, ...] = (
    AppendEntries, AppendReply, RequestVote, VoteReply, Snapshot, TimeoutNow,
)
