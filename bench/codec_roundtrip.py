"""Peer codec round trips per second: encode -> msgpack bytes -> decode.

    .venv/bin/python bench/codec_roundtrip.py [--seconds 2] [--repeats 3]

The messages are real ones: everything the processes of a synchronous simulator run
send each other (both structures, 6 processes, 40 rounds), plus every message of an
adversarial run with 2 joins and 2 leaves (the membership kinds).  Each repeat times
full passes over that mix for about ``--seconds``; the median rate is reported.

It also runs against the code before the restructure (issue 9), so that before and
after come from one sitting: ``PYTHONPATH=<checkout of 9cdacf0> python
bench/codec_roundtrip.py`` imports the old modules (they are tried when the new ones
are missing).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections import Counter
from typing import Any

import msgpack

# The old tree is recognised by its hand-written codec module.  (Trying the new imports
# first would not do: an editable install resolves missing submodules of the old package
# to the new tree.)
if importlib.util.find_spec("skueue.runtime.wire") is None:  # the tree as it is
    from skueue.core.ops import Structure
    from skueue.sim import adversary, rounds
    from skueue.wire.peer import decode_message, encode_message

    TREE = "after (skueue.wire.peer, derived from the message classes)"
else:  # before the restructure
    from skueue.ops import Structure  # type: ignore[no-redef]
    from skueue.runtime.wire import (  # type: ignore[no-redef]
        decode_message,
        encode_message,
    )

    from skueue.sim import adversary, rounds

    TREE = "before (skueue.runtime.wire, written by hand)"


def harvest() -> list[Any]:
    """Every message of a small run of each simulator."""
    seen: list[Any] = []
    original = rounds._message

    def recording(send: Any) -> Any:
        message = original(send)
        seen.append(message)
        return message

    rounds._message = recording
    try:
        for structure in Structure:
            config = rounds.SyncConfig(
                processes=6,
                structure=structure,
                rounds=40,
                rate=4,
                seed=11,
                local_delivery=False,
            )
            rounds.SyncSim(config).run()
    finally:
        rounds._message = original

    pick = adversary.AsyncSim._pick_message

    def recording_pick(self: Any) -> Any:
        send = pick(self)
        seen.append(send.message)
        return send

    adversary.AsyncSim._pick_message = recording_pick  # type: ignore[method-assign]
    try:
        config = adversary.AsyncConfig(processes=4, operations=60, seed=3, joins=2, leaves=2)
        adversary.AsyncSim(config).run()
    finally:
        adversary.AsyncSim._pick_message = pick  # type: ignore[method-assign]
    return seen


def round_trip(message: Any) -> Any:
    blob = msgpack.packb(encode_message(message), use_bin_type=True)
    return decode_message(msgpack.unpackb(blob, raw=False, strict_map_key=True))


def rate(messages: list[Any], seconds: float) -> float:
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for m in messages:
            round_trip(m)
        done += len(messages)
    return done / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per repeat (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (default 3)")
    args = parser.parse_args()
    messages = harvest()
    for m in messages:  # the codec is exact, or the figure means nothing
        assert round_trip(m) == m, m
    kinds = Counter(type(m).__name__ for m in messages)
    size = sum(len(msgpack.packb(encode_message(m), use_bin_type=True)) for m in messages)
    rates = [rate(messages, args.seconds) for _ in range(args.repeats)]
    print(f"codec: {TREE}")
    print(
        f"messages: {len(messages)} of {len(kinds)} kinds "
        f"({', '.join(f'{k} {n}' for k, n in kinds.most_common())})"
    )
    print(f"bytes per message (mean): {size / len(messages):.1f}")
    print(
        "round trips/s: median {:.0f} (runs: {})".format(
            statistics.median(rates), ", ".join(f"{r:.0f}" for r in rates)
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
