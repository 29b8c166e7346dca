"""The typed snapshot codec against pickle on a large host: encode and decode times, bytes.

    .venv/bin/python bench/snapshot_codec.py [--elements 200000] [--element-bytes 64]
                                             [--repeats 3]

One process (a cluster of one, so every element is in its own DHT tables) takes
``--elements`` inserts through its host, ``--batch`` per client request, as a daemon's
owner would step them, as a queue and as a stack (whose entries carry tickets: a dict per
position), each with its tables

- in ``memory``: the tables hold the elements (a daemon without ``--data-dir``);
- or with an ``entry store``: the tables hold record ids (a queue's in IntMaps) and the
  elements are in an entry store left out of the snapshot (a durable daemon's:
  ``runtime/durability/entry_store.py`` gives pickle the store as a persistent id, the
  codec as ``persistent``).

Each figure is the median of ``--repeats`` runs; every decoded host is checked equal to
the original (``state_lines``) before anything is timed.  The daemon's disk snapshots
stay pickles (issue 31 stage 3: the lead decides from these figures).
"""

from __future__ import annotations

import argparse
import io
import math
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from skueue.core.effects import Send
from skueue.core.ops import Structure
from skueue.core.process import Process
from skueue.dht.storage.memory import MemoryEntryStore
from skueue.host.address import Address
from skueue.host.directory import Directory
from skueue.host.effects import Reply
from skueue.host.host import Host
from skueue.host.inputs import FromClient, Input, PeerMessage, Tick
from skueue.host.requests import InsertRequest
from skueue.host.state_lines import state_lines
from skueue.overlay.ring import build_views
from skueue.wire.snapshot_codec import decode_state, encode_state

TICKS_PER_REQUEST_MAX = 1000  # a request of a cluster of one is done in a few ticks
STORE = "entry-store"
HOSTS = [  # name, an entry store (any value: a new one), structure
    ("queue, memory", None, Structure.QUEUE),
    ("queue, entry store", True, Structure.QUEUE),
    ("stack, memory", None, Structure.STACK),
    ("stack, entry store", True, Structure.STACK),
]


def filled_host(
    elements: int, element_bytes: int, batch: int, store: Any, structure: Structure
) -> Host:
    """A cluster of one holding ``elements`` inserted elements (in ``store`` if given)."""
    pid = "p0"
    views = {n.kind: v for n, v in build_views([pid]).items() if n.process == pid}
    host = Host(Process.create(pid, views, structure), Directory(pid, Address("::1", 1)))
    if store is not None:
        for node in host.process.nodes.values():
            node.store.attach(store)
    sends: list[Send] = []
    replies = 0
    frames = 0

    def step(item: Input) -> None:
        nonlocal replies
        for effect in host.step(item):
            if isinstance(effect, Send):
                sends.append(effect)  # to itself: the driver delivers it back
            elif isinstance(effect, Reply):
                replies += 1

    pad = b"x" * max(0, element_bytes - 8)
    for rid, first in enumerate(range(0, elements, batch), start=1):
        values = tuple(
            pad + i.to_bytes(8, "big") for i in range(first, min(elements, first + batch))
        )
        step(FromClient(1, None, InsertRequest(rid, values), math.inf, 0.0))
        for _ in range(TICKS_PER_REQUEST_MAX):
            if replies == rid:
                break
            step(Tick())
            while sends:
                send = sends.pop(0)
                frames += 1
                step(PeerMessage(pid, frames, send.to.kind, send.message))
        else:
            raise RuntimeError(f"request {rid} was not answered in {TICKS_PER_REQUEST_MAX} ticks")
    return host


def held(host: Host) -> int:
    return sum(len(t) for n in host.process.nodes.values() for t in n.store.tables.values())


def pickle_dump(host: Host, store: Any) -> bytes:
    """As ``entry_store.dump`` pickles a daemon's state, the store left out."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    if store is not None:
        pickler.persistent_id = lambda obj: STORE if obj is store else None  # type: ignore[method-assign]
    pickler.dump(host)
    return out.getvalue()


def pickle_load(data: bytes, store: Any) -> Any:
    unpickler = pickle.Unpickler(io.BytesIO(data))
    unpickler.persistent_load = lambda pid: store  # type: ignore[method-assign]
    return unpickler.load()  # noqa: S301 - our own bytes, just made


def median_s(call: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(name: str, host: Host, store: Any, repeats: int) -> dict[str, Any]:
    persistent_out = {} if store is None else {store: STORE}
    persistent_in = {} if store is None else {STORE: store}
    ours = encode_state(host, persistent=persistent_out)
    theirs = pickle_dump(host, store)
    expected = state_lines(host)
    assert state_lines(decode_state(ours, persistent=persistent_in)) == expected, name
    assert state_lines(pickle_load(theirs, store)) == expected, name
    return {
        "host": name,
        "elements": held(host),
        "codec_bytes": len(ours),
        "pickle_bytes": len(theirs),
        "codec_encode_s": median_s(lambda: encode_state(host, persistent=persistent_out), repeats),
        "pickle_encode_s": median_s(lambda: pickle_dump(host, store), repeats),
        "codec_decode_s": median_s(lambda: decode_state(ours, persistent=persistent_in), repeats),
        "pickle_decode_s": median_s(lambda: pickle_load(theirs, store), repeats),
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| host | elements | codec MB | pickle MB | bytes ratio | codec encode ms | "
        "pickle encode ms | encode ratio | codec decode ms | pickle decode ms | decode ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['host']} | {r['elements']:,} | {r['codec_bytes'] / 1e6:.2f} | "
            f"{r['pickle_bytes'] / 1e6:.2f} | {r['codec_bytes'] / r['pickle_bytes']:.2f} | "
            f"{r['codec_encode_s'] * 1e3:.0f} | {r['pickle_encode_s'] * 1e3:.0f} | "
            f"{r['codec_encode_s'] / r['pickle_encode_s']:.1f} | "
            f"{r['codec_decode_s'] * 1e3:.0f} | {r['pickle_decode_s'] * 1e3:.0f} | "
            f"{r['codec_decode_s'] / r['pickle_decode_s']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--elements", type=int, default=200_000, help="default 200000")
    parser.add_argument("--element-bytes", type=int, default=64, help="default 64")
    parser.add_argument("--batch", type=int, default=1000, help="values per request (1000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per figure (3)")
    args = parser.parse_args(argv)
    rows = []
    for name, store, structure in HOSTS:
        store = None if store is None else MemoryEntryStore[Any]()
        host = filled_host(args.elements, args.element_bytes, args.batch, store, structure)
        rows.append(measure(name, host, store, args.repeats))
    command = " ".join(["bench/snapshot_codec.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"command: .venv/bin/python {command}")
    print(f"elements of {args.element_bytes} bytes; median of {args.repeats} runs; "
          "ratio: codec / pickle")  # fmt: skip
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
