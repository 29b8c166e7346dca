"""A member's copy of a lost member's process (runtime/copies.py) and the restore from it
(runtime/restore.py): the copy goes whole into a data directory that restores the state
the copy had; copies that are no copies, or not enough of them, are refused in words."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import msgpack
import pytest
import trio

from skueue.host.address import Address
from skueue.replication.codec import encode_message
from skueue.replication.config import Config
from skueue.replication.messages import AppendEntries, Entry, Message
from skueue.runtime import restore as restore_module
from skueue.runtime.applied_state import state_digest
from skueue.runtime.copies import Copy, CopyError, NoCopy, copy_document, parse_copy
from skueue.runtime.durability.entry_store import ENTRIES_DIRECTORY, SnapshotEntryStore
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy
from skueue.runtime.durability.snapshot_file import open_snapshot
from skueue.runtime.durability.snapshots import restore
from skueue.runtime.errors import DaemonError
from skueue.runtime.restore import ask_every_peer, choose_copy, copy_frames, write_copy
from skueue.wire.framing import FrameDecoder
from tests.unit.test_follower_slot import CONFIG, LIMITS, MEMBERS, append, open_slot

RESTORED_META = Meta("P", "nonce-P", "queue", (), replicas=3)
MET = [("P", "127.0.0.1:1"), ("b", "127.0.0.1:2"), ("c", "127.0.0.1:3")]


def test_a_copy_goes_whole_into_the_restored_data_directory(tmp_path: Path) -> None:
    sent: list[tuple[str, Message]] = []
    slot = open_slot(tmp_path / "b", sent)
    append(slot, 0, 30, commit=20)
    slot.end_step(0.0)  # synced, then applied through the commit
    state = slot.state
    assert state is not None and state.applied == 20
    data = copy_document(slot, "nonce-P", down=True, members=MET)
    # It travels in parts of at most half a frame, and comes back whole.
    decoder = FrameDecoder(LIMITS.frame_bytes_max)
    frames = [f for blob in copy_frames(data, 1000) for f in decoder.feed(blob)]
    assert len(frames) > 1 and b"".join(f[3] for f in frames) == data
    copy = parse_copy("b", data)
    assert isinstance(copy, Copy), copy
    assert (copy.nonce, copy.applied, len(copy.entries), copy.last) == ("nonce-P", 20, 10, (1, 30))
    assert copy.members == tuple(MET)
    directory = tmp_path / "restored"
    ctx: Any = SimpleNamespace(limits=LIMITS, config=SimpleNamespace(fsync=SyncPolicy()))
    write_copy(directory, RESTORED_META, copy, ctx)

    log = InputLog.open(directory, Meta("P", "another nonce", "queue", ()), SyncPolicy())
    store = SnapshotEntryStore(directory / ENTRIES_DIRECTORY, LIMITS.entry_page_bytes,
                               LIMITS.entry_pages_mapped_max)  # fmt: skip
    try:
        assert log.meta.nonce == "nonce-P" and log.meta.members == tuple(MEMBERS), log.meta
        assert tuple(log.meta.addresses) == tuple(MET[1:]), log.meta  # the others
        assert log.index.base == (20, 1, CONFIG) and log.index.last_index == 30
        assert log.read_entries(21, 30, 1 << 30) == list(copy.entries)
        assert log.index.hard_state == (1, None)
        assert log.snapshot_file is not None
        with open_snapshot(log.snapshot_file) as f:
            restored = restore(f, store)
        numbered = {peer: next_number - 1
                    for peer, (_, next_number, _) in restored.outboxes.items()}  # fmt: skip
        assert state_digest(restored.host, restored.handled, numbered) == state.digest()
    finally:
        log.close()
        store.close()
        slot.close()


def test_a_member_answers_without_a_copy_and_says_why(tmp_path: Path) -> None:
    slot = open_slot(tmp_path / "b", [])
    append(slot, 0, 6, commit=6)
    slot.end_step(0.0)
    try:
        for answer, why in [
            (copy_document(None, "n", down=True, members=MET), "keeps no copy"),
            (copy_document(slot, "n", down=False, members=MET), "the process is up"),
        ]:
            parsed = parse_copy("b", answer)
            assert isinstance(parsed, NoCopy) and why in parsed.why, parsed
        slot.node.may_have_forgotten = True  # emptied at a restart, not caught up since
        parsed = parse_copy("b", copy_document(slot, "n", down=True, members=MET))
        assert isinstance(parsed, NoCopy) and "being rebuilt" in parsed.why, parsed
        slot.node.may_have_forgotten = False
        slot.state = None  # dropped (damaged, or a snapshot that came without one)
        parsed = parse_copy("b", copy_document(slot, "n", down=True, members=MET))
        assert isinstance(parsed, NoCopy) and "no state" in parsed.why, parsed
    finally:
        slot.close()


def packed(**fields: Any) -> bytes:
    doc = {"nonce": "n", "term": 2, "voters": ["P", "b", "c"], "applied": 0,
           "applied_term": 0, "state": b"", "appends": []}  # fmt: skip
    doc.update(fields)
    doc.setdefault("members", [["b", "127.0.0.1:2"]])
    return msgpack.packb({k: v for k, v in doc.items() if v is not ...}, use_bin_type=True)


def append_of(prev: int, *terms: int) -> list[Any]:
    entries = tuple(Entry(t, "data", b"x" * 20) for t in terms)
    return encode_message(AppendEntries(2, prev, 0, entries, 0))


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"\xc1", "not msgpack"),
        (msgpack.packb([1, 2]), "not a map"),
        (packed(term=-1), "must be counts"),
        (packed(applied=...), "must be counts"),
        (packed(voters=[]), "voters must be"),
        (packed(applied=5, applied_term=1, state=b""), "a state must come"),
        (packed(state=b"x"), "a state must come"),
        (packed(appends=[append_of(1, 1)]), "do not follow"),
        (packed(appends=[["append", "nonsense"]]), "the copy of b"),
        (packed(appends=[append_of(0, 2, 1)]), "terms go back"),
        (packed(appends=[append_of(0, 3)]), "terms go back"),  # past the holder's term
        (packed(nonce=5), "nonce must be"),
        (msgpack.packb({"none": 5}), "none must say why"),
        (packed(members=[["c", "127.0.0.1:3"]]), "its holder among them"),
        (packed(members=[["b"]]), "members must be"),
    ],
)
def test_what_is_no_copy_is_refused(data: bytes, error: str) -> None:
    with pytest.raises(CopyError, match=error):
        parse_copy("b", data)


def with_voters(copy: Copy, voters: list[str]) -> Copy:
    return attrs.evolve(copy, config=Config.of(voters))


def a_copy(holder: str, last_term: int, count: int, nonce: str | None = "n") -> Copy:
    entries = tuple(Entry(last_term, "data", b"x") for _ in range(count))
    return Copy(holder, nonce, last_term, Config.of(["P", "b", "c"]), 0, 0, b"", entries,
                tuple(MET))  # fmt: skip


def test_the_copy_with_the_most_complete_log_is_chosen() -> None:
    # Raft's comparison (§5.4.1): the later last term first, then the longer log.
    chosen = choose_copy("P", {"b": a_copy("b", 2, 3), "c": a_copy("c", 1, 9)}, [])
    assert chosen.holder == "b"
    chosen = choose_copy("P", {"b": a_copy("b", 2, 3), "c": a_copy("c", 2, 4)}, [])
    assert chosen.holder == "c"
    # A member of no group of P's answers too, or cannot be reached: neither counts.
    chosen = choose_copy("P", {"b": a_copy("b", 1, 1), "c": a_copy("c", 1, 2),
                               "d": NoCopy("d", "n", "it keeps no copy")},
                         ["the member at 127.0.0.1:5 did not answer"])  # fmt: skip
    assert chosen.holder == "c"


@pytest.mark.parametrize(
    ("answers", "error"),
    [
        ({"b": a_copy("b", 1, 1)}, "c keep copies of it and did not answer .cannot reach"),
        ({"c": NoCopy("c", "n", "the process is up")}, "no member sent a copy of it .c: the"),
        ({"b": a_copy("b", 1, 1), "c": with_voters(a_copy("c", 1, 1), voters=["P", "c", "d"])},
         "name different voters"),
        ({"b": a_copy("b", 1, 1), "c": NoCopy("c", "n", "the process is up")},
         "c: the process is up"),
        ({"b": a_copy("b", 1, 1), "c": a_copy("c", 1, 1, nonce="m")}, "different incarnations"),
    ],
)
def test_a_restore_needs_every_other_voters_copy(answers: dict[str, Any], error: str) -> None:
    # Every committed entry is on a majority: without one voter's copy, it may be lost.
    with pytest.raises(DaemonError, match=error):
        choose_copy("P", answers, ["cannot reach peer 127.0.0.1:3 within 30 s"])


@pytest.mark.trio
async def test_a_member_that_cannot_be_asked_is_named_in_one_line() -> None:
    """Not raised as an exception group of the tasks that asked (the daemon prints a
    DaemonError as one line, anything else as a traceback): said, for choose_copy to
    tell whether that member was needed."""

    class Links:
        process_id = "P"
        limits = LIMITS

        async def open_copy(self, address: Address) -> Any:
            if address.port == 2:
                raise DaemonError(f"cannot reach peer {address} within 30 s: refused")
            raise OSError("connection reset")

    peers = (Address("127.0.0.1", 2), Address("127.0.0.1", 3))
    answers, failures = await ask_every_peer(Links(), peers, 1 << 20)  # type: ignore[arg-type]
    assert answers == [] and sorted(failures) == [
        "cannot reach peer 127.0.0.1:2 within 30 s: refused",
        "the member at 127.0.0.1:3 did not answer (connection reset)",
    ], failures


@pytest.mark.trio
async def test_asking_stops_once_every_voter_of_the_group_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A member outside the group that does not answer (down: its connection attempts
    go on for ``connect_timeout_s``) does not hold the restore up."""

    async def fetch(links: Any, address: Address, bytes_max: int) -> Any:
        if address.port == 4:
            await trio.sleep_forever()  # outside the group, and down
        return a_copy("b" if address.port == 2 else "c", 1, 1)

    monkeypatch.setattr(restore_module, "fetch_copy", fetch)
    links: Any = SimpleNamespace(process_id="P")
    peers = tuple(Address("127.0.0.1", port) for port in (4, 2, 3))
    with trio.fail_after(10):  # a bound, not a measure: without the stop, it never ends
        answers, failures = await ask_every_peer(links, peers, 1 << 20)
    assert sorted(a.holder for a in answers) == ["b", "c"] and failures == []
    assert choose_copy("P", {a.holder: a for a in answers}, failures).holder in ("b", "c")
