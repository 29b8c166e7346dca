"""Start in place of a member lost with its disk, from its group's copies
(``skueued --restore-from-copies``; README, When a member dies).

With ``--replicas K`` every process's log is also kept, and applied, by the ``K − 1``
members after it in ring order (runtime/follower_slot.py).  A member whose disk is gone
is started again at its address with the same ``--peers``, an empty ``--data-dir`` and
``--restore-from-copies``: before anything else, it asks each other member for its copy
of the process (runtime/copies.py), chooses one, and writes it as its data directory:

- **every other voter of the group must answer** (members outside it need not: a
  copy names the group's voters and the members).  An entry was committed once a
  majority held it; the lost member was at most one of them, so of the K − 1 others,
  every committed entry is on at least ⌊K/2⌋ of them; only all of them together are
  sure to hold it;
- **the copy with the most complete log wins** (Raft's comparison, §5.4.1: last term,
  then last index).  It holds every committed entry; entries past the commit (stepped
  by the lost member, never released: I2) are kept, as a new leader of the group keeps
  them, and committed by the restored member's first entry;
- the restored directory holds that copy's state as its snapshot and its log after it,
  the process's incarnation (nonce) that the cluster knows, so that the peers take it
  back as the same member, and the members as the copies name them.  A marker
  file (``RESTORING``) is there while it is written: a restore cut short is refused at
  the next start without the option, and done again with it.

Then the daemon starts as after a restart: it replays the copy, stands for election in
its group (the copies' holders vote for it: its log is at least as complete as theirs),
and the peers' links resume from the frames the copy recorded as handled and sent.
Safe because no other replica of the group ever leads (failover is not built yet: a
copy changes only while its leader is up, and a member whose link to the process is open
refuses to answer).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import structlog
import trio

from skueue.core.errors import RemoteProtocolError
from skueue.host.address import Address
from skueue.host.placement import voters_of
from skueue.replication.config import Config
from skueue.runtime.copies import Copy, CopyError, NoCopy, parse_copy
from skueue.runtime.durability.data_lock import LOCK_FILE
from skueue.runtime.durability.entry_store import ENTRIES_DIRECTORY, SnapshotEntryStore
from skueue.runtime.durability.input_log import InputLog, Meta
from skueue.runtime.durability.snapshot_file import fsync_directory
from skueue.runtime.durability.snapshots import capture_snapshot
from skueue.runtime.errors import DaemonError
from skueue.runtime.network.connections import frames
from skueue.runtime.network.peers import PeerLinks
from skueue.runtime.snapshot_transfer import TransferError, decode_transfer
from skueue.runtime.state import DaemonContext
from skueue.wire.framing import FrameDecoder, pack

log = structlog.get_logger("skueued")

Answer = Copy | NoCopy
RESTORING = "restoring"  # in a data directory while a restore writes it


async def restore_from_copies(ctx: DaemonContext, directory: Path) -> None:
    """Write ``directory`` (locked, and empty but for its lock, or a restore cut short)
    from the best copy of this member's process that the other members keep;
    :class:`DaemonError` saying why it cannot be done."""
    marker = directory / RESTORING
    there = {p.name for p in directory.iterdir()} - {LOCK_FILE}
    if there and not marker.exists():
        raise DaemonError(
            f"--restore-from-copies writes a new data directory, and {directory} is not "
            "empty: start without the option to use it, or empty it to restore"
        )
    config, links = ctx.config, ctx.links
    assert links is not None
    answers, failures = await ask_every_peer(links, config.peers,
                                             ctx.limits.snapshot_transfer_bytes_max)  # fmt: skip
    own = ctx.process_id
    copy = choose_copy(own, {a.holder: a for a in answers}, failures)
    members = [member for member, _ in copy.members]
    if own not in members or Config.of(voters_of(own, members, config.replicas)) != copy.config:
        raise DaemonError(f"cannot restore {own}: its copies name the voters "
                          f"{list(copy.config.voters)}, not those of --replicas "
                          f"{config.replicas} among {members}")  # fmt: skip
    log.info("restoring from the copy of a member", process=own, holder=copy.holder,
             applied=copy.applied, entries=len(copy.entries), last=copy.last)  # fmt: skip
    for name in there:  # a restore cut short
        path = directory / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    marker.touch()
    fsync_directory(directory)
    if copy.nonce is None:
        log.warning("no member knew this process's incarnation; its peers may refuse "
                    "the restored member", process=own)  # fmt: skip
    nonce = copy.nonce or links.nonce
    meta = Meta(own, nonce, config.structure.value, (), replicas=config.replicas)
    write_copy(directory, meta, copy, ctx)
    marker.unlink()
    fsync_directory(directory)
    log.info("restored from the copy; starting as after a restart", process=own,
             data_dir=str(directory))  # fmt: skip


async def ask_every_peer(
    links: PeerLinks, peers: tuple[Address, ...], bytes_max: int
) -> tuple[list[Answer], list[str]]:
    """The peers' answers, and why those that gave none did not (choose_copy says
    whether they were needed): asked all at once, until every voter of the group that
    the first copy names has answered (a member outside the group that is down would
    otherwise hold the restore up for ``connect_timeout_s``)."""
    answers: list[Answer] = []
    failures: list[str] = []

    def voters_answered() -> bool:
        sent = [a for a in answers if isinstance(a, Copy)]
        holders = {a.holder for a in answers}
        return bool(sent) and all(v in holders for v in sent[0].config.voters
                                  if v != links.process_id)  # fmt: skip

    async def ask(address: Address) -> None:
        try:
            answer = await fetch_copy(links, address, bytes_max)
        except DaemonError as e:  # said in one line, not as an exception group
            failures.append(str(e))
            return
        if answer is not None:
            answers.append(answer)
            if voters_answered():
                nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        for address in peers:
            nursery.start_soon(ask, address)
    return answers, failures


async def fetch_copy(links: PeerLinks, address: Address, bytes_max: int) -> Answer | None:
    """The copy the member at ``address`` keeps of this process (None: the address is
    this daemon's own)."""
    limits = links.limits
    try:
        stream, greeting = await links.open_copy(address)
    except (OSError, RemoteProtocolError) as e:
        raise DaemonError(f"the member at {address} did not answer ({e})") from None
    holder = greeting.process
    if holder == links.process_id:
        await trio.aclose_forcefully(stream)
        return None
    try:
        await stream.send_all(pack(["copy-wanted"]))
        incoming = frames(stream, FrameDecoder(limits.frame_bytes_max)).__aiter__()
        parts: list[bytes] = []
        got, total = 0, None
        while got != total:
            with trio.fail_after(limits.frame_read_timeout_s):
                frame = await incoming.__anext__()
            total = _part(frame, got, bytes_max, holder)
            parts.append(frame[3])
            got += len(frame[3])
    except trio.TooSlowError:
        raise DaemonError(f"{holder} sent nothing of its copy for "
                          f"{limits.frame_read_timeout_s:g} s") from None  # fmt: skip
    except (StopAsyncIteration, trio.BrokenResourceError, OSError) as e:
        raise DaemonError(f"{holder} broke off sending its copy "
                          f"({type(e).__name__})") from None  # fmt: skip
    except RemoteProtocolError as e:
        raise DaemonError(f"{holder} sent a bad copy: {e}") from None
    finally:
        await trio.aclose_forcefully(stream)
    try:
        return parse_copy(holder, b"".join(parts))
    except CopyError as e:
        raise DaemonError(str(e)) from None


def _part(frame: object, got: int, bytes_max: int, holder: str) -> int:
    """The total size that a part ``["copy-part", offset, total, bytes]`` announces."""
    if not (isinstance(frame, list) and len(frame) == 4 and frame[0] == "copy-part"
            and type(frame[1]) is int and type(frame[2]) is int
            and type(frame[3]) is bytes):  # fmt: skip
        raise RemoteProtocolError(f'expected ["copy-part", offset, total, bytes]: {frame!r:.80}')
    offset, total, data = frame[1], frame[2], frame[3]
    if offset != got or not 0 < total <= bytes_max or got + len(data) > total or not data:
        raise RemoteProtocolError(f"a copy part at {offset} of {total} bytes does not follow "
                                  f"{got} (at most {bytes_max})")  # fmt: skip
    return total


def choose_copy(own: str, answers: dict[str, Answer], failures: list[str]) -> Copy:
    """The copy to restore ``own`` from: the most complete log among the other voters'
    (the voters, as the copies name them, must all have answered; ``failures``: why
    some members did not); :class:`DaemonError` where none will do."""
    nonces = {a.nonce for a in answers.values() if a.nonce is not None}
    if len(nonces) > 1:
        raise DaemonError(f"cannot restore {own}: the members know it under different "
                          f"incarnations ({sorted(nonces)})")  # fmt: skip
    sent = [a for a in answers.values() if isinstance(a, Copy)]
    if not sent:
        reasons = [f"{a.holder}: {a.why}" for a in answers.values() if isinstance(a, NoCopy)]
        said = "; ".join(reasons + failures) or "no other member is named in --peers"
        raise DaemonError(f"cannot restore {own}: no member sent a copy of it ({said})")
    if any((c.config, c.members) != (sent[0].config, sent[0].members) for c in sent):
        raise DaemonError(f"cannot restore {own}: the members' copies name different "
                          "voters or members")  # fmt: skip
    others = [v for v in sent[0].config.voters if v != own]
    copies = [answers[v] for v in others if v in answers]
    if len(copies) < len(others):
        missing = sorted(set(others) - set(answers))
        raise DaemonError(f"cannot restore {own}: {', '.join(missing)} keep copies of it "
                          f"and did not answer ({'; '.join(failures)})")  # fmt: skip
    kept = [c for c in copies if isinstance(c, Copy)]
    refused = [c for c in copies if isinstance(c, NoCopy)]
    if refused:
        # Each voter holds part of what was committed: without one, something may be lost.
        why = "; ".join(f"{c.holder}: {c.why}" for c in refused)
        raise DaemonError(f"cannot restore {own} from its group's copies ({why})")
    best = max(kept, key=lambda c: c.last)
    return best


def write_copy(directory: Path, meta: Meta, copy: Copy, ctx: DaemonContext) -> None:
    """Write ``copy`` as a daemon's data directory: its state as the log's snapshot, the
    log after it, the term its group reached, and the members it names."""
    limits = ctx.limits
    input_log = InputLog.open(directory, meta, ctx.config.fsync)
    store = SnapshotEntryStore(directory / ENTRIES_DIRECTORY, limits.entry_page_bytes,
                               limits.entry_pages_mapped_max)  # fmt: skip
    try:
        met = [(member, address) for member, address in copy.members
               if member != meta.process_id]  # fmt: skip
        input_log.record_members([member for member, _ in copy.members], met)
        if copy.applied > 0:
            try:
                state = decode_transfer(copy.state, store)
            except TransferError as e:
                raise DaemonError(f"cannot restore: the copy of {copy.holder} holds no "
                                  f"state: {e}") from None  # fmt: skip
            store.before_snapshot()
            input_log.snapshot(lambda f: capture_snapshot(f, state, store), copy.applied,
                               copy.applied_term, copy.config)  # fmt: skip
            store.after_snapshot()
        if copy.entries:
            input_log.write_entries(copy.applied + 1, list(copy.entries))
        input_log.save_hard_state(copy.term, None)
        input_log.sync(0.0)
    finally:
        input_log.close()
        store.close()


def copy_frames(data: bytes, part_bytes: int) -> list[bytes]:
    """``data`` as the frames of a copy, each at most ``part_bytes`` of it."""
    return [pack(["copy-part", at, len(data), data[at : at + part_bytes]])
            for at in range(0, len(data), part_bytes)]  # fmt: skip

