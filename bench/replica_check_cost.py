"""What a leader's check of its followers costs: the digest of its state that it sends at
each of its snapshots (runtime/applied_state.py), against the state's size.

The digest walks the whole state, elements included, in the owner's step: a pause of
the process that ``replica_check_elements_max`` (runtime/limits.py) bounds.  This builds
a process of its own ring with ``--elements`` elements in an entry store (as a durable
daemon keeps them) and times one digest of it.

    .venv/bin/python bench/replica_check_cost.py [--elements 200000]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from skueue.core.ops import Structure  # noqa: E402
from skueue.host.address import Address  # noqa: E402
from skueue.host.directory import Directory  # noqa: E402
from skueue.host.host import Host  # noqa: E402
from skueue.host.inputs import FromClient, Tick  # noqa: E402
from skueue.host.requests import InsertRequest  # noqa: E402
from skueue.runtime.applied_state import state_digest  # noqa: E402
from skueue.runtime.durability.entry_store import SnapshotEntryStore  # noqa: E402
from skueue.runtime.limits import Limits  # noqa: E402
from skueue.runtime.new_host import new_host  # noqa: E402

PER_REQUEST = 100  # elements per insert request


def filled(elements: int, directory: Path) -> tuple[Host, SnapshotEntryStore]:
    """A lone process holding ``elements`` elements (rounded to whole requests)."""
    store = SnapshotEntryStore(directory, 4 << 20, 4)
    host = new_host("P", Directory("P", Address("127.0.0.1", 1)), ["P"], Structure.QUEUE,
                    Limits(), store)  # fmt: skip
    for rid in range(elements // PER_REQUEST):
        values = tuple(b"v%010d" % (rid * PER_REQUEST + k) for k in range(PER_REQUEST))
        request = InsertRequest(rid, values, None, None, None, None)
        host.step(FromClient(1, "s", request, math.inf, 0.0))
        for _ in range(3):  # the batch goes up the tree and the Puts land
            host.step(Tick())
    return host, store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        host, store = filled(args.elements, Path(directory))
        began = time.perf_counter()
        state_digest(host, {}, {})
        seconds = time.perf_counter() - began
        store.close()
    held = host.process.entries()
    print(f"{held} elements: one digest took {seconds:.3f} s, "
          f"{seconds / max(held, 1) * 1e6:.2f} µs per element")


if __name__ == "__main__":
    main()
