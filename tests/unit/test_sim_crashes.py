"""The simulator's crashes (skueue/sim/crashes.py): the replay check can fail, the state
comparison sees what pickle keeps, and every kind of crash really happens."""

from __future__ import annotations

import copy
import pickle
from collections import Counter

import pytest

from skueue.core.effects import Effect
from skueue.core.messages.stages import Message
from skueue.core.ops import Structure
from skueue.core.process import Process
from skueue.overlay.labels import Kind, NodeRef
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.cluster import build_cluster
from skueue.sim.crashes import DeterminismError, state_lines


def started(config: AsyncConfig, steps: int) -> AsyncSim:
    sim = AsyncSim(config)
    for _ in range(steps):
        sim.step()
    return sim


CONFIG = AsyncConfig(4, Structure.QUEUE, 40, 0.6, seed=1234, crashes=1)


def test_no_crashes_keep_no_record() -> None:
    assert AsyncSim(AsyncConfig(4, seed=1)).crashes is None


def test_a_replay_with_other_effects_names_the_process_and_the_seed() -> None:
    sim = started(CONFIG, 300)
    assert sim.crashes is not None
    log = sim.crashes.records["p1"].log
    index = next(i for i, logged in enumerate(log) if logged.effects)
    log[index].effects = log[index].effects[:-1]  # what the first run "gave"
    with pytest.raises(DeterminismError) as error:
        sim.crashes.crash(sim.processes["p1"])
    text = str(error.value)
    assert text.startswith("seed 1234: process p1: replay of logged input")
    assert f"logged input {index} after its creation" in text


def test_a_rebuilt_state_that_differs_names_the_field() -> None:
    sim = started(CONFIG, 300)
    assert sim.crashes is not None
    issued = sim.processes["p2"].next_op_id
    sim.processes["p2"].next_op_id += 5  # a change no logged input explains
    with pytest.raises(DeterminismError) as error:
        sim.crashes.crash(sim.processes["p2"])
    assert str(error.value).startswith(
        "seed 1234: process p2: the rebuilt state differs from the process that crashed: "
        f"expected ('.next_op_id', {issued + 5}), rebuilt ('.next_op_id', {issued})"
    )


def test_a_core_that_depends_on_object_identity_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An injected determinism bug: messages leave in the order of their objects'
    addresses.  The protocol copes (the network reorders them anyway), but a replay makes
    new objects, so a restart sees other effects."""
    handle = Process.handle

    def by_address(self: Process, to: NodeRef, message: Message) -> list[Effect]:
        return sorted(handle(self, to, message), key=id)

    monkeypatch.setattr(Process, "handle", by_address)
    config = AsyncConfig(
        6, Structure.STACK, 60, 0.6, seed=77, crashes=10, crash_before_sync_ratio=0.0
    )
    with pytest.raises(DeterminismError, match=r"^seed 77: process \S+: replay of logged input"):
        AsyncSim(config).run()


def test_the_state_comparison_sees_shared_objects() -> None:
    """A joining process's three nodes share one ticket: pickle keeps that, and a state in
    which one node has its own copy of the ticket is another state, though equal field by
    field (which ``==`` would accept)."""
    contact = build_cluster(["p0"], Structure.QUEUE)["p0"].node_ref(Kind.LEFT)
    joiner = Process.create_joining("j0", contact, Structure.QUEUE)
    assert state_lines(pickle.loads(pickle.dumps(joiner))) == state_lines(joiner)
    unshared = copy.deepcopy(joiner)
    member = unshared.nodes[Kind.RIGHT].member
    member.ticket = copy.copy(member.ticket)
    assert unshared == joiner
    assert state_lines(unshared) != state_lines(joiner)


def test_every_kind_of_crash_really_happens() -> None:
    """The property tests are only worth something if crashes hit processes after and
    before the sync, lose messages, ticks and requests (whose clients retry), and restart
    from snapshots and from creation with inputs to replay."""
    lost = Counter[str]()
    crashes = snapshots = from_snapshot = replayed = 0
    for seed in range(6):
        config = AsyncConfig(
            5,
            Structure.QUEUE if seed % 2 else Structure.STACK,
            40,
            0.6,
            seed,
            joins=1,
            leaves=1,
            crashes=8,
            crash_before_sync_ratio=0.5,
            snapshot_every=[0, 5][seed % 2],
        )
        sim = AsyncSim(config)
        sim.run()
        assert sim.crashes is not None and not sim.retries
        stats = sim.crashes.stats
        lost.update(stats.lost)
        crashes += stats.crashes
        snapshots += stats.snapshots
        from_snapshot += stats.from_snapshot
        replayed += stats.replayed
    assert lost["deliver"] and lost["tick"] and lost["request"], lost
    assert crashes > 0 and snapshots > 0 and from_snapshot > 0 and replayed > 0
