"""Running the hosts simulator (skueue/sim/hosts.py) in a property test, and the checks
every run must pass.

A failing example prints the call that replays it (``HostsSim(HostsConfig(...)).run()``:
the config holds the seed), as a hypothesis note and in every assertion's message; what
the simulator raises itself (``SimStuck``, ``DeterminismError``, a host's wrong answer)
names the seed too.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.check.checker import check
from skueue.check.history import Record
from skueue.check.leases import check_leases
from skueue.core.ops import Structure, plain
from skueue.sim.cluster import ring_problems
from skueue.sim.hosts import HostsConfig, HostsResult, HostsSim
from skueue.sim.recorder import as_text
from tests.property.test_churn import LOW_IDS

EXACT_LIMIT = 14  # records; the exact search is exponential in the worst case

ratios = st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(0.0, 1.0))
before_sync = st.one_of(st.sampled_from([0.0, 0.3, 1.0]), st.floats(0.0, 1.0))
# 0: never (every restart replays from the first start); 1: after every input.
snapshot_every = st.sampled_from([0, 1, 5, 40])
timeouts = st.sampled_from([0, 15, 60, 400])
deliveries = st.sampled_from(["fifo", "any"])


def run_hosts(config: HostsConfig) -> tuple[HostsResult, str]:
    replay = f"replay with: HostsSim({config!r}).run()"
    if currently_in_test_context():
        note(replay)
    return HostsSim(config).run(), replay


def stored(result: HostsResult, queue: str) -> Counter[str | None]:
    """The elements of ``queue`` the members hold at the end, with multiplicity."""
    return Counter(
        as_text(plain(element))
        for p in result.processes
        if not p.departed
        for n in p.nodes.values()
        for name, _, _, element in n.store.items()
        if name == queue
    )


def first_removals(records: list[Record]) -> list[Record]:
    """The default queue's records with every element's later removals left out (a
    returned element is a new insertion that no client sees)."""
    seen: set[str] = set()
    out = []
    for r in sorted(records, key=lambda r: (r.ord if r.ord is not None else -1, r.response)):
        if r.queue is not None:
            continue  # the dead letters: their inserts are returns, which nobody records
        if not r.inserts and r.value is not None:
            if r.value in seen:
                continue
            seen.add(r.value)
        out.append(r)
    return out


def check_run(result: HostsResult, replay: str) -> None:
    """What every run on the default queue alone must give: unique values; without
    leases, a linearizable (and sequentially consistent) history whose drain returns
    every element exactly once; with leases, the lease checker's promises and the queue's
    order between redeliveries; after churn, the ring and tree exactly right."""
    config = result.config
    assert len(set(result.inserted)) == len(result.inserted), replay
    records = result.records
    if config.lease_ratio:
        verdict = check_leases(result.lease_events, result.inserted, left=result.drained,
                               dead=result.dead, taken=result.taken)  # fmt: skip
        assert verdict.ok, "\n".join([*verdict.problems[:10], replay])
        if not config.max_deliveries:
            assert not result.dead, replay
        history = check(first_removals(records), method="certificate")
        assert history.ok, f"{history.describe()}\n{replay}"
    else:
        inserted = Counter(result.inserted)
        removed = Counter(result.taken + result.drained)
        assert removed == inserted, (
            f"lost {sorted((inserted - removed).elements())[:5]}, "
            f"extra {sorted((removed - inserted).elements())[:5]}\n{replay}"
        )
        for model in ("sc", "linearizable"):
            verdict = check(records, model=model, method="certificate")
            assert verdict.ok, f"{verdict.describe()}\n{replay}"
            if len(records) <= EXACT_LIMIT:
                exact = check(records, model=model, method="exact")
                assert exact.ok, f"{exact.describe()}\n{replay}"
    problems = ring_problems(result.processes)
    assert not problems, "\n".join([*problems[:10], replay])


@st.composite
def host_configs(
    draw: st.DrawFn,
    structure: Structure | None = None,
    churn: bool = True,
    leases: bool = False,
    crashes: tuple[int, int] = (0, 5),
    processes: int = 6,
) -> HostsConfig:
    """A cluster, a workload, churn, crashes (at least and at most), snapshots,
    deadlines and a seed."""
    return HostsConfig(
        processes=draw(st.integers(1, processes)),
        structure=draw(st.sampled_from(list(Structure))) if structure is None else structure,
        clients=draw(st.integers(1, 4)),
        operations=draw(st.integers(0, 50)),
        insert_ratio=draw(st.floats(0.2, 0.9) if leases else ratios),
        seed=draw(st.integers(0, 2**32 - 1)),
        delivery=draw(deliveries),
        crashes=draw(st.integers(*crashes)),
        before_sync_ratio=draw(before_sync),
        snapshot_every=draw(snapshot_every),
        timeout_steps=draw(timeouts),
        blocking_ratio=draw(st.sampled_from([0.0, 0.3])),
        lease_ratio=draw(st.floats(0.2, 1.0)) if leases else 0.0,
        max_deliveries=draw(st.sampled_from([0, 1, 3])) if leases else 0,
        joins=draw(st.integers(0, 3)) if churn else 0,
        leaves=draw(st.integers(0, 3)) if churn else 0,
        # Joiners left of the anchor (it hands its counters over), leavers that hold it.
        join_ids=draw(st.sampled_from([(), LOW_IDS])) if churn else (),
        leave_anchor=draw(st.booleans()) if churn else False,
    )
