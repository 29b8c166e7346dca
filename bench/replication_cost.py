"""What replicating one owner step costs in CPU and bytes, the replicas alone (no I/O).

    .venv/bin/python bench/replication_cost.py [--steps 20000] [--voters 3]
        [--records 2] [--record-bytes 120]

A group of ``--voters`` ``ReplicaNode``s (skueue/replication/) in one process: the
leader proposes ``--steps`` owner steps of ``--records`` records of ``--record-bytes``
each (a one-at-a-time operation logs about two records of that size), every message
goes through the codec and msgpack both ways, every write is reported durable at once.
It prints per step: the CPU of the replicas' ``step`` calls (all voters together), the
CPU of encoding and decoding the messages, the messages and their bytes.  That is the
consensus module's share of docs/replication.md §4's cost, to set against about 42 µs
per message end that the daemons pay in I/O and scheduling (docs/performance.md).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import deque
from pathlib import Path

import msgpack

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from skueue.replication.codec import decode_message, encode_message  # noqa: E402
from skueue.replication.config import Config  # noqa: E402
from skueue.replication.effects import AppendLocal, Commit, ReplicaEffect, Send  # noqa: E402
from skueue.replication.inputs import Applied, Persisted, Propose, Received, Tick  # noqa: E402
from skueue.replication.node import ReplicaNode  # noqa: E402
from skueue.replication.settings import DurableState, ReplicaSettings  # noqa: E402


def run(steps: int, voters: int, records: int, record_bytes: int) -> dict[str, float]:
    hosts = [f"h{i}" for i in range(voters)]
    config = Config.of(hosts)
    nodes = {h: ReplicaNode(h, DurableState(config), ReplicaSettings(), random.Random(i))
             for i, h in enumerate(hosts)}
    totals = {"node_s": 0.0, "codec_s": 0.0, "messages": 0, "bytes": 0}
    clock = time.process_time

    def step(host: str, event: object) -> list[ReplicaEffect]:
        start = clock()
        out = nodes[host].step(event)  # type: ignore[arg-type]
        totals["node_s"] += clock() - start
        return out

    def pump(host: str, effects: list[ReplicaEffect]) -> None:
        queue = deque((host, e) for e in effects)
        while queue:
            at, effect = queue.popleft()
            if isinstance(effect, Send):
                start = clock()
                wire = msgpack.packb(encode_message(effect.message), use_bin_type=True)
                message = decode_message(msgpack.unpackb(wire, raw=False))
                totals["codec_s"] += clock() - start
                totals["messages"] += 1
                totals["bytes"] += len(wire)
                queue.extend((effect.to, e) for e in step(effect.to, Received(at, message)))
            elif isinstance(effect, AppendLocal):
                last = effect.entries[-1]
                persisted = Persisted(effect.index + len(effect.entries) - 1, last.term)
                queue.extend((at, e) for e in step(at, persisted))
            elif isinstance(effect, Commit):
                step(at, Applied(effect.index))

    leader = hosts[0]
    while nodes[leader].role != "leader":
        pump(leader, step(leader, Tick()))
    for key in totals:
        totals[key] = 0
    payload = tuple(bytes(record_bytes) for _ in range(records))
    wall = time.perf_counter()
    for _ in range(steps):
        pump(leader, step(leader, Propose(payload)))
    wall = time.perf_counter() - wall
    assert nodes[leader].commit >= steps, "every step committed"
    return {
        "node_us": totals["node_s"] / steps * 1e6,
        "codec_us": totals["codec_s"] / steps * 1e6,
        "messages": totals["messages"] / steps,
        "bytes": totals["bytes"] / steps,
        "wall_us": wall / steps * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--voters", type=int, default=3)
    parser.add_argument("--records", type=int, default=2)
    parser.add_argument("--record-bytes", type=int, default=120)
    args = parser.parse_args()
    if args.steps < 1 or args.voters < 1 or args.records < 1 or args.record_bytes < 0:
        parser.error("--steps, --voters and --records must be >= 1, --record-bytes >= 0")
    try:
        r = run(args.steps, args.voters, args.records, args.record_bytes)
    except KeyboardInterrupt:
        sys.exit(130)
    print(f"{args.voters} voters, {args.steps} steps of {args.records} records of "
          f"{args.record_bytes} bytes, per step:")
    print(f"  replicas' step CPU, all voters: {r['node_us']:7.1f} µs")
    print(f"  codec + msgpack, both ends:     {r['codec_us']:7.1f} µs")
    print(f"  messages:                       {r['messages']:7.2f}")
    print(f"  bytes on the wire:              {r['bytes']:7.0f}")
    print(f"  wall time of the whole loop:    {r['wall_us']:7.1f} µs")


if __name__ == "__main__":
    main()
