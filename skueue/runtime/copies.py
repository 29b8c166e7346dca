"""A lost member's process, as a copy of its group keeps it (docs/replication.md §5.7;
the restore itself is runtime/restore.py).

A member started with ``--restore-from-copies`` in place of one lost with its disk asks
every other member for its copy of the process (a connection of the peers' handshake
marked ``{"copy": true}``, then ``["copy-wanted"]``).  A member that keeps a copy (a
follower slot of that group, runtime/follower_slot.py) answers with it as one document,
in parts (``["copy-part", offset, total, bytes]``, each at most half a frame):

    {"nonce": the process's incarnation as this member knows it (None: never met),
     "term": its replica's term, "voters": [...],
     "members": [[id, address], ...],       every member, as this member knows them
     "applied": n, "applied_term": t,       the state's position in the log
     "state": bytes,                        the state there (snapshot_transfer.py); b"" at 0
     "appends": [append, ...]}              the log after it, as replication messages

or ``{"nonce": ..., "none": why}``.  Nothing here is pickled: the state is the typed
snapshot codec's document, and the log's entries go through the replication codec, each
field checked on arrival.  A member refuses while the process still answers it (its
link is up): restoring a process that is alive would make two of it; and while its copy
is being rebuilt (found empty at its own restart, not caught up since: the amnesia
guard), for it may lack entries it acknowledged, which then no copy may hold.
"""

from __future__ import annotations

from typing import Any

import attrs
import msgpack

from skueue.replication.codec import ReplicationCodecError, decode_message, encode_message
from skueue.replication.config import Config
from skueue.replication.messages import AppendEntries, Entry
from skueue.runtime.durability.snapshots import snapshot_of
from skueue.runtime.follower_slot import FollowerSlot
from skueue.runtime.inbox import CopyWanted
from skueue.runtime.replicas import DaemonReplicas
from skueue.runtime.snapshot_transfer import encode_transfer
from skueue.runtime.state import DaemonContext, log

# Entries per replication message in a copy (the codec takes at most 65,536 in one).
ENTRIES_PER_APPEND = 4096


class CopyError(ValueError):
    """A copy that is not one (the sender's fault)."""


@attrs.frozen
class Copy:
    """A member's copy of a process: its state at ``applied`` and the log after it."""

    holder: str
    nonce: str | None
    term: int
    config: Config
    applied: int
    applied_term: int
    state: bytes
    entries: tuple[Entry, ...]
    members: tuple[tuple[str, str], ...]  # every member's id and address

    @property
    def last(self) -> tuple[int, int]:
        """The copy's last entry, as Raft compares logs (§5.4.1): (term, index)."""
        if self.entries:
            return self.entries[-1].term, self.applied + len(self.entries)
        return self.applied_term, self.applied


@attrs.frozen
class NoCopy:
    holder: str
    nonce: str | None
    why: str


def answer_copy(ctx: DaemonContext, replicas: DaemonReplicas | None, wanted: CopyWanted) -> None:
    """The owner answers ``wanted`` (between two steps: the copy is as of the last one)."""
    peer, links, directory = wanted.peer, ctx.links, ctx.directory
    assert links is not None and directory is not None
    nonce = links.incarnations.get(peer)
    known = directory.addresses.get(peer)
    if known is not None and known != wanted.address:
        why = (f"{peer} is at {known} in this cluster, not {wanted.address}: its "
               "replacement must listen there")  # fmt: skip
        wanted.data = _packed({"nonce": nonce, "none": why})
    else:
        up = peer in ctx.peer_sessions or peer in ctx.channel_sessions
        slot = None if replicas is None else replicas.slots.get(peer)
        members = [(p, str(a)) for p, a in sorted(directory.addresses.items())]
        wanted.data = copy_document(slot, nonce, down=not up, members=members)
    log.info("a member restoring its process asked for this member's copy", peer=peer,
             bytes=len(wanted.data))  # fmt: skip
    wanted.done.set()


def copy_document(
    slot: FollowerSlot | None,
    nonce: str | None,
    down: bool,
    members: list[tuple[str, str]],
) -> bytes:
    """This member's answer for the process of ``slot`` (None: it keeps no copy of it);
    ``down``: whether the process's link is down here; ``members``: every member's id
    and address, as this member knows them."""
    if slot is None:
        return _packed({"nonce": nonce, "none": "it keeps no copy of this process"})
    if not down:
        return _packed({"nonce": nonce, "none": "the process is up: its link to this "
                        "member is open"})  # fmt: skip
    if slot.node.may_have_forgotten:
        # Emptied, and not caught up since: entries it once acked may be missing, and
        # the other copies may lack them too (I6).
        return _packed({"nonce": nonce, "none": "its copy is being rebuilt (it lost what it "
                        "held) and may lack entries it acknowledged"})  # fmt: skip
    state = slot.state
    if state is None:
        return _packed({"nonce": nonce, "none": "its copy has no state (it was damaged, "
                        "or came without one)"})  # fmt: skip
    node, input_log = slot.node, slot.input_log
    applied = state.applied
    applied_term = node.term_at(applied)
    if applied_term is None:  # never so: a state is as of its log's snapshot or after
        return _packed({"nonce": nonce, "none": "its state is behind its log's start"})
    data = b""
    if applied > 0:
        snapshot = snapshot_of(state.host, state.handled, state.outboxes)
        data = encode_transfer(snapshot, slot.store)
    input_log.write()  # what this step took is on the file (read back below), not yet synced
    entries = input_log.read_entries(applied + 1, node.last_index, 1 << 62) if (
        node.last_index > applied) else []  # fmt: skip
    appends = []
    for at in range(0, len(entries), ENTRIES_PER_APPEND):
        part = tuple(entries[at : at + ENTRIES_PER_APPEND])
        appends.append(encode_message(AppendEntries(node.term, applied + at, 0, part, 0)))
    config = node.log.config_at(applied)
    return _packed({
        "nonce": nonce, "term": node.term, "voters": list(config.voters),
        "members": [list(m) for m in members],
        "applied": applied, "applied_term": applied_term, "state": data, "appends": appends,
    })  # fmt: skip


def _packed(document: dict[str, Any]) -> bytes:
    return msgpack.packb(document, use_bin_type=True)


def parse_copy(holder: str, data: bytes) -> Copy | NoCopy:
    """The answer of ``holder``, every field checked; :class:`CopyError` otherwise."""
    try:
        doc = msgpack.unpackb(data, raw=False)
    except Exception as e:  # noqa: BLE001 - any malformed msgpack
        raise CopyError(f"the copy of {holder} is not msgpack: {e}") from None
    if not isinstance(doc, dict):
        raise CopyError(f"the copy of {holder} is not a map")
    nonce = doc.get("nonce")
    if nonce is not None and type(nonce) is not str:
        raise CopyError(f"the copy of {holder}: nonce must be a string")
    if "none" in doc:
        if type(doc["none"]) is not str:
            raise CopyError(f"the copy of {holder}: none must say why")
        return NoCopy(holder, nonce, doc["none"])
    counts = [doc.get(name) for name in ("term", "applied", "applied_term")]
    voters, state, appends = doc.get("voters"), doc.get("state"), doc.get("appends")
    if not all(type(n) is int and n >= 0 for n in counts):
        raise CopyError(f"the copy of {holder}: term, applied and applied_term must be counts")
    term, applied, applied_term = (int(n) for n in counts)  # type: ignore[arg-type]
    if not (isinstance(voters, list) and voters and all(type(v) is str for v in voters)):
        raise CopyError(f"the copy of {holder}: voters must be a list of process ids")
    if type(state) is not bytes or (applied > 0) != bool(state):
        raise CopyError(f"the copy of {holder}: a state must come with a position past 0")
    if not isinstance(appends, list):
        raise CopyError(f"the copy of {holder}: appends must be a list")
    members = doc.get("members")
    if not (isinstance(members, list) and all(
        isinstance(m, list) and len(m) == 2 and all(type(x) is str for x in m) for m in members
    ) and holder in {m[0] for m in members}):  # fmt: skip
        raise CopyError(f"the copy of {holder}: members must be [[id, address], ...], "
                        "its holder among them")  # fmt: skip
    entries: list[Entry] = []
    for value in appends:
        try:
            message = decode_message(value)
        except ReplicationCodecError as e:
            raise CopyError(f"the copy of {holder}: {e}") from None
        if not isinstance(message, AppendEntries) or message.prev_index != applied + len(entries):
            raise CopyError(f"the copy of {holder}: its log's entries do not follow each other")
        entries.extend(message.entries)
    terms = [applied_term, *(e.term for e in entries)]
    if any(a > b for a, b in zip(terms, terms[1:], strict=False)) or terms[-1] > term:
        raise CopyError(f"the copy of {holder}: its log's terms go back")
    return Copy(holder, nonce, term, Config.of(voters), applied, applied_term, state,
                tuple(entries), tuple((m[0], m[1]) for m in members))  # fmt: skip
