"""A process's state as the data of a replication ``Snapshot`` message (docs/replication.md
§7): what a leader sends a follower whose next entry it no longer keeps, so that the
follower's copy has the state its log goes on from (runtime/follower_slot.py).

A daemon's snapshot on its own disk is pickled (runtime/durability/snapshots.py), and
nothing read from the network is ever unpickled: what travels is a document of the typed
snapshot codec (skueue/wire/snapshot_codec.py), ``[host, elements, handled, outboxes]``:

- ``host``: the leader's host as of its last snapshot, its entry store left out (the
  receiver's own goes in its place);
- ``elements``: every element of its tables, as ``(node kind, queue, position, ticket,
  element)``.  Record ids are each daemon's own, so the receiver stores them anew
  (:meth:`skueue.dht.table.Table.refill`);
- ``handled``: the last frame handled of each peer's link; ``outboxes``: per peer, the
  next frame number, the blobs dropped so far, and the blobs not acknowledged.

A state larger than ``snapshot_chunk_bytes`` goes in parts first, each a channel frame
``["snapshot-part", P, term, index, offset, total, bytes]``, and then the ``Snapshot``
message with no data: the follower assembles the parts (:class:`Assembly`) and steps the
message with them only once they are whole and in order; otherwise it drops the message
and the leader sends the snapshot again after its timeout.  A state larger than
``snapshot_transfer_bytes_max`` is not sent: the follower keeps the log from the
snapshot on, without a state.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import attrs
import structlog

from skueue.core.errors import RemoteProtocolError
from skueue.core.ops import Redelivered
from skueue.host.host import Host
from skueue.replication.config import HostId
from skueue.replication.messages import Message, Snapshot
from skueue.runtime.durability.entry_store import SnapshotEntryStore, load_apart
from skueue.runtime.durability.input_log import InputLog
from skueue.runtime.durability.snapshot_file import open_snapshot, read_snapshot
from skueue.runtime.durability.snapshots import DaemonSnapshot
from skueue.runtime.limits import Limits
from skueue.runtime.network.link_sender import Blob
from skueue.wire.snapshot_codec import SnapshotCodecError, decode_state, encode_state

log = structlog.get_logger("skueued")

STORE_NAME = "entry-store"  # what the document holds in place of the entry store


class TransferError(ValueError):
    """A snapshot's data that is not a process's state (the sender's fault)."""


def encode_transfer(snapshot: DaemonSnapshot, store: object | None) -> bytes:
    """``snapshot`` as a transfer's data; ``store``: where its tables keep their
    elements (left out of the document)."""
    host = snapshot.host
    elements = [
        (int(kind), queue, position, ticket, element)
        for kind, node in host.process.nodes.items()
        for queue, table in node.store.tables.items()
        for position, ticket, element in table.items()
    ]
    outboxes = {
        peer: (next_number, base, [(b.first, b.last, b.data) for b in blobs])
        for peer, (blobs, next_number, base) in snapshot.outboxes.items()
    }
    persistent = {} if store is None else {store: STORE_NAME}
    return encode_state([host, elements, dict(snapshot.handled), outboxes], persistent)


def decode_transfer(data: bytes, store: SnapshotEntryStore) -> DaemonSnapshot:
    """The state in ``data``, its elements appended to ``store``; anything else raises
    :class:`TransferError` (and may have appended some: the caller removes them)."""
    try:
        root = decode_state(data, {STORE_NAME: store})
    except SnapshotCodecError as e:
        raise TransferError(str(e)) from None
    if not (isinstance(root, list) and len(root) == 4 and isinstance(root[0], Host)):
        raise TransferError("expected [host, elements, handled, outboxes]")
    host, elements, handled, outboxes = root
    if not (isinstance(handled, dict) and all(
        isinstance(p, str) and type(n) is int for p, n in handled.items()
    )):  # fmt: skip
        raise TransferError("handled: expected {peer: frame number}")
    _refill(host, elements)
    return DaemonSnapshot(host, handled, _outboxes(outboxes))


def _refill(host: Host, elements: Any) -> None:
    if not isinstance(elements, list):
        raise TransferError("elements: expected a list")
    by_table: dict[tuple[int, str], list[tuple[int, int, Any]]] = defaultdict(list)
    for element in elements:
        if not (isinstance(element, tuple) and len(element) == 5
                and type(element[0]) is int and isinstance(element[1], str)
                and type(element[2]) is int and type(element[3]) is int
                and isinstance(element[4], bytes | str | Redelivered)):  # fmt: skip
            raise TransferError(f"elements: {element!r:.80} is not (kind, queue, position, "
                                "ticket, element)")  # fmt: skip
        by_table[element[0], element[1]].append(element[2:])
    for kind, node in host.process.nodes.items():
        for queue, table in node.store.tables.items():
            table.refill(by_table.pop((int(kind), queue), []))
    if by_table:
        raise TransferError(f"elements of tables the host does not have: {sorted(by_table)[:3]}")


def _outboxes(outboxes: Any) -> dict[str, tuple[list[Blob], int, int]]:
    out = {}
    if not isinstance(outboxes, dict):
        raise TransferError("outboxes: expected {peer: (next, base, blobs)}")
    for peer, value in outboxes.items():
        if not (isinstance(peer, str) and isinstance(value, tuple) and len(value) == 3
                and type(value[0]) is int and type(value[1]) is int
                and isinstance(value[2], list)):  # fmt: skip
            raise TransferError(f"outbox of {peer!r:.40}: expected (next, base, blobs)")
        blobs = []
        for blob in value[2]:
            if not (isinstance(blob, tuple) and len(blob) == 3 and type(blob[0]) is int
                    and type(blob[1]) is int and isinstance(blob[2], bytes)):  # fmt: skip
                raise TransferError(f"outbox of {peer}: a blob is not (first, last, data)")
            blobs.append(Blob(*blob))
        out[peer] = (blobs, value[0], value[1])
    return out


class SnapshotElements:
    """The elements as the last snapshot names them, read from the live store without
    changing it: a record a dequeue took since is still there (removes wait for the
    next snapshot), and a redelivered one's count and reason are the snapshot's."""

    def __init__(self, store: SnapshotEntryStore, extras: dict[int, tuple[int, str]]) -> None:
        self.store = store
        self.extras = extras

    def read(self, record: int) -> Any:
        value = self.store.inner.read(record)
        extra = self.extras.get(record)
        return value if extra is None else Redelivered(value, *extra)


def transfer_of_last_snapshot(
    input_log: InputLog, store: SnapshotEntryStore | None, bytes_max: int
) -> bytes:
    """The state of the daemon's last snapshot, for a follower that fell behind it;
    ``b""`` where there is none to send (none taken, or larger than ``bytes_max``)."""
    _, path = read_snapshot(input_log.directory)
    if path is None or store is None:
        return b""
    view = SnapshotElements(store, {})
    with open_snapshot(path) as f:
        snapshot, view.extras = load_apart(f, view)
    assert isinstance(snapshot, DaemonSnapshot), "the daemon's own snapshot"
    data = encode_transfer(snapshot, view)
    if len(data) > bytes_max:
        log.warning("a follower fell behind the last snapshot, whose state is larger than "
                    "snapshot_transfer_bytes_max; it gets the log from there without a "
                    "state", bytes=len(data), bytes_max=bytes_max)  # fmt: skip
        return b""
    return data


class SnapshotShipper:
    """How a leader sends its last snapshot to a follower behind it (module docstring):
    ``send_frame`` puts a frame on the member's daemon channel, ``send_message`` a
    replication message."""

    def __init__(
        self,
        process: str,
        input_log: InputLog,
        store: SnapshotEntryStore | None,
        limits: Limits,
        send_frame: Callable[[HostId, list[Any]], None],
    ) -> None:
        self.process = process
        self.input_log = input_log
        self.store = store
        self.limits = limits
        self.send_frame = send_frame

    def ship(
        self, to: HostId, snapshot: Snapshot, send_message: Callable[[HostId, Message], None]
    ) -> None:
        """Send ``snapshot`` (its position; the data is read here) to ``to``."""
        limits = self.limits
        data = transfer_of_last_snapshot(self.input_log, self.store,
                                         limits.snapshot_transfer_bytes_max)  # fmt: skip
        chunk = min(limits.snapshot_chunk_bytes, limits.frame_bytes_max // 2)  # room to spare
        if len(data) > chunk:
            for offset in range(0, len(data), chunk):
                self.send_frame(to, ["snapshot-part", self.process, snapshot.term,
                                     snapshot.index, offset, len(data),
                                     data[offset:offset + chunk]])  # fmt: skip
            data = b""
        send_message(to, dataclasses.replace(snapshot, data=data))


@attrs.define
class Assembly:
    """The parts of one snapshot a follower took so far (module docstring)."""

    term: int
    index: int
    total: int
    data: bytearray = attrs.field(factory=bytearray)

    @property
    def whole(self) -> bool:
        return len(self.data) == self.total


def take_part(
    assembly: Assembly | None, frame: list[Any], bytes_max: int
) -> Assembly | None:
    """The assembly after the part ``frame`` (``["snapshot-part", P, term, index, offset,
    total, bytes]``): a part at offset 0 starts one; one that does not follow on the
    last (a part lost with a connection) ends it, and the snapshot comes again.  A
    malformed part is the sender's fault (:class:`RemoteProtocolError`)."""
    term, index, offset, total, chunk = frame[2:]
    if not (type(term) is int and type(index) is int and type(offset) is int
            and type(total) is int and isinstance(chunk, bytes)
            and 0 <= offset <= total - len(chunk)):  # fmt: skip
        raise RemoteProtocolError(f"snapshot-part: bad fields {frame[2:6]!r:.80}")
    if total > bytes_max:
        raise RemoteProtocolError(f"snapshot-part: {total} bytes, over "
                                  f"snapshot_transfer_bytes_max ({bytes_max})")  # fmt: skip
    if offset == 0:
        assembly = Assembly(term, index, total)
    if assembly is None or (assembly.term, assembly.index, assembly.total) != (
            term, index, total) or offset != len(assembly.data):  # fmt: skip
        return None
    assembly.data += chunk
    return assembly
