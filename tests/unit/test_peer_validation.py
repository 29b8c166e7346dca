"""A peer's message that is wrong for the receiver's state is refused, and changes nothing.

Errors split by blame (ARCHITECTURE.md, style rule 4): every message kind is checked
before the receiving node changes any state, and anything wrong (counts that do not fit
the batch they answer, runs of the wrong shape, stale stages, unknown senders, messages
impossible in the current state) raises one :class:`RemoteProtocolError`.  After it the process
must be exactly as before (its full ``repr`` is the snapshot), its next ``tick`` must not
raise, and the run must go on to finish with a history that passes the checkers and
every element out exactly once.

The messages are built from the receiver's real state in the middle of adversarial runs
with churn (joins and leaves), so they are structurally valid and only semantically
wrong.  A failing example prints the AsyncConfig and the pause points that replay it.
"""

from __future__ import annotations

import copy
import inspect
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from skueue.check.checker import check
from skueue.core.batch import Batch, Batches, RunGrant
from skueue.core.errors import RemoteProtocolError
from skueue.core.membership.state import LOSSY_WHEN_DEPARTED
from skueue.core.messages.membership import (
    MEMBERSHIP_KINDS,
    Absorbed,
    AnchorHandover,
    Departing,
    HandoverPart,
    Integrate,
    IntegrateAck,
    JoinAccepted,
    JoinAcceptedAck,
    JoinCounted,
    JoinCountedAck,
    JoinRequest,
    LeaveAnswer,
    MayILeave,
    Rewire,
    SetPred,
    SetPredAck,
    StageDone,
    UpdateOver,
    Withdraw,
)
from skueue.core.messages.stages import (
    ANSWER_PUT_ACK,
    MESSAGE_KINDS,
    RUN_GET,
    RUN_PUT,
    AnswerRun,
    BatchUp,
    DhtBundle,
    DhtRun,
    Drop,
    DropAck,
    Get,
    GetReply,
    Grants,
    Put,
    PutAck,
)
from skueue.core.node.virtual_node import VirtualNode
from skueue.core.ops import DEFAULT_QUEUE, Redelivered, Structure
from skueue.core.parts.membership_state import JOINS, OVER
from skueue.core.parts.ring import Mode
from skueue.core.process import Process
from skueue.dht.keys import POSITIONS_PER_BLOCK, position_key
from skueue.overlay.labels import Kind, NodeRef, node_ref
from skueue.overlay.routing import Phase, Route
from skueue.sim.adversary import AsyncConfig, AsyncSim
from skueue.sim.cluster import ring_problems

INTRUDER = "intruder:1"
UNKNOWN_OP = 1 << 50


def stray_owner(position: int, queue: str = "default") -> tuple[NodeRef, int]:
    """An owner whose interval (one label wide) leaves out ``position``'s key: an answer
    naming it would send the receiver's next requests astray."""
    start = (position_key(queue, position) + 1) % (1 << 64)
    return NodeRef(intruder().process, Kind.MIDDLE, start), (start + 1) % (1 << 64)


def intruder(kind: Kind = Kind.LEFT) -> NodeRef:
    return node_ref(INTRUDER, kind)


def route_to(target: int) -> Route:
    return Route(target=target, bits=3, taken=0, point=0, phase=Phase.BITS)


def wrong_route(position: int) -> Route:
    """A route whose target is not the key of the position it carries."""
    return route_to((position_key("default", position) + 1) % (1 << 64))


def some_grant(count: int = 1) -> RunGrant:
    return RunGrant(1, count, 0)


def wrong_for(node: VirtualNode, rng: random.Random) -> Iterator[tuple[str, Any]]:
    """Messages that are wrong for ``node`` in its current state, with a label each."""
    me = node.me
    stack = node.structure is Structure.STACK
    member = node.ring.mode is Mode.MEMBER
    ph = node.member.phase
    flight = node.batching.inflight

    # -- stage 1 --------------------------------------------------------------------
    def up(batch: Batch, name: str = DEFAULT_QUEUE) -> Batches:
        return Batches((((name, stack), batch),))

    yield "BatchUp from an unknown node", BatchUp(intruder(), up(Batch.of(1)), 0)
    yield "BatchUp from itself", BatchUp(me, up(Batch.of(1)), 0)
    for kind in Kind:
        # Messages between a process's own nodes never cross the network: forged.
        yield "BatchUp from its own process", BatchUp(me.sibling(kind), Batches(), 0)
        yield "StageDone from its own process", StageDone(me.sibling(kind), 1)
    for kid in node.ring.kids:
        if kid in node.batching.child_batches:
            yield "BatchUp: second batch from a child", BatchUp(kid, up(Batch.of(1)), 10**6)
        else:
            yield "BatchUp: more operations than ranks", BatchUp(kid, up(Batch((2,), (1,))), 0)
            yield "BatchUp: counts and slots differ", BatchUp(kid, up(Batch((1, 1), (1,))), 0)
            yield "BatchUp: negative run", BatchUp(kid, up(Batch((-1,), (-1,))), 0)
            yield "BatchUp: a queue without operations", BatchUp(kid, up(Batch.of(0, 0)), 0)
            two = Batches(((("b", stack), Batch.of(1)), (("a", stack), Batch.of(1))))
            yield "BatchUp: queues out of order", BatchUp(kid, two, 0)
            if not stack:
                yield "BatchUp: queue run with more ranks", BatchUp(kid, up(Batch((1,), (2,))), 0)
            else:
                yield "BatchUp: stack batch of 5 runs", BatchUp(kid, up(Batch.of(0, 1, 1, 1, 1)), 0)
            yield "BatchUp: a withdrawn batch's number", BatchUp(kid, up(Batch.of(1)), -1)
    # -- stage 3 --------------------------------------------------------------------
    if flight is None or flight.served:
        yield "Grants without a batch in flight", Grants((), number=0)
        some = (((DEFAULT_QUEUE, stack), (some_grant(),)),)
        yield "Grants without a batch in flight (runs)", Grants(some, number=0)
    else:
        batches = [dict(b.sections) for _, b in flight.layout]
        keys = sorted({key for sections in batches for key in sections})
        runs = {key: max(len(s[key].counts) for s in batches if key in s) for key in keys}
        good = tuple((key, tuple(RunGrant(1, 0, 0) for _ in range(runs[key]))) for key in keys)
        yield "Grants for another batch number", Grants(good, number=flight.number + 7)
        yield "Grants for the batch before", Grants(good, number=flight.number - 1)
        n = flight.number
        stray = (("elsewhere", stack), (some_grant(),))
        yield "Grants for a queue not in the batch", Grants((*good, stray), number=n)
        if good:
            key, first = good[0]

            def first_is(grants: tuple[RunGrant, ...]) -> Grants:
                return Grants(((key, grants), *good[1:]), number=n)

            yield "Grants: a queue missing", Grants(good[1:], number=n)
            yield "Grants: a queue granted and refused", Grants(good, number=n, refused=((key, 1),))
            yield "Grants: a refusal of no kind", Grants(good[1:], number=n, refused=((key, 7),))
            yield "Grants: fewer runs than the batch", first_is(first[:-1])
            yield "Grants: more runs than the batch", first_is((*first, some_grant()))
            yield "Grants: negative position", first_is((RunGrant(-3, 0, 0), *first[1:]))
            yield "Grants: negative ord", first_is((RunGrant(1, 0, -5), *first[1:]))
            yield "Grants: step 2", first_is((RunGrant(1, 0, 0, step=2), *first[1:]))
            total = sum(s[key].counts[0] for s in batches if key in s)
            yield (
                "Grants: inserts left without positions",
                first_is((RunGrant(1, total + 1, 0), *first[1:])),
            )
    # -- stage 4 --------------------------------------------------------------------
    p = 1 + rng.randrange(1000)
    ticket = 1 if stack else 0
    yield "Put with a route to another key", Put(wrong_route(p), p, "x", ticket, me, 1, True)
    yield "Put at position 0", Put(None, 0, "x", ticket, me, 1, True)
    yield "Put with a negative ticket", Put(None, p, "x", -1, me, 1, True)
    if not stack:
        yield "Put with a ticket in a queue", Put(None, p, "x", 3, me, 1, True)
    yield "Get with a route to another key", Get(wrong_route(p), p, ticket, me, 1)
    yield "Get at a negative position", Get(None, -4, ticket, me, 1)
    if member:
        for queue, position, t, _ in list(node.store.items())[:1]:
            yield (
                "Put: a second element at a stored position",
                Put(None, position, "dup", t, me, 1, False, (queue, stack)),
            )
    yield "GetReply for an operation nobody waits for", GetReply(UNKNOWN_OP, p, "x")
    for op_id, a in list(node.store.awaiting.items())[:1]:
        pos = (a.position or 1) + 1
        yield "GetReply for another position", GetReply(op_id, pos, "x")
        at = a.position or 1
        yield "GetReply naming an owner of another key", GetReply(op_id, at, "x", stray_owner(at))
    for op_id, put_at in list(node.store.unacked_puts.items())[:1]:
        yield (
            "PutAck naming an owner of another key",
            PutAck(op_id, stray_owner(put_at[1], put_at[0])),
        )
    yield "PutAck for an operation never sent", PutAck(UNKNOWN_OP)
    put = Put(None, p, "x", ticket, me, 1, True)
    yield "DhtBundle repeating a Put", DhtBundle((put, put))
    for op_id in list(node.store.unacked_puts)[:1]:
        # The first answer is right: refusing the second must not apply it either.
        yield (
            "DhtBundle: a right answer, then a wrong one",
            DhtBundle((PutAck(op_id), PutAck(UNKNOWN_OP))),
        )
        yield (
            "AnswerRun: a right answer, then a wrong one",
            AnswerRun(ANSWER_PUT_ACK, None, (op_id, UNKNOWN_OP), (), ()),
        )
    queue = (DEFAULT_QUEUE, stack)
    edge = POSITIONS_PER_BLOCK  # the last position of block 0
    yield (
        "DhtRun spanning two blocks",
        DhtRun(RUN_GET, None, queue, edge, False, me, False, (1, 2), (ticket, ticket), ()),
    )
    yield (
        "DhtRun repeating an operation",
        DhtRun(RUN_GET, None, queue, 1, False, me, False, (1, 1), (ticket, ticket), ()),
    )
    yield (
        "DhtRun with a route to another key",
        DhtRun(RUN_PUT, wrong_route(1), queue, 1, False, me, True, (1, 2), (ticket, ticket),
               ("x", "y")),
    )  # fmt: skip
    # -- membership -----------------------------------------------------------------
    yield (
        "JoinRequest routed to the wrong point",
        JoinRequest(route_to((intruder().label + 1) % (1 << 64)), intruder()),
    )
    yield "JoinAccepted from its own process", JoinAccepted(me.sibling(Kind.MIDDLE), False)
    yield "JoinAcceptedAck from an unknown joiner", JoinAcceptedAck(intruder())
    yield "JoinCounted for a joiner not placed here", JoinCounted(intruder(), intruder(Kind.RIGHT))
    for j in node.ring.joiners[:1]:
        yield "JoinCounted from another process", JoinCounted(intruder(), j)
    yield "JoinCountedAck for a node of another process", JoinCountedAck(intruder())
    if flight is None or me.sibling(Kind.RIGHT) not in flight.holds:
        yield "JoinCountedAck nobody waits for", JoinCountedAck(me.sibling(Kind.RIGHT))
    yield "Withdraw from an unknown node", Withdraw(intruder(), 3)
    for kid in node.ring.kids[:1]:
        if kid not in node.ring.released:
            yield "Withdraw from a child", Withdraw(kid, 3)
    yield "StageDone from an unknown node", StageDone(intruder(), ph.stage if ph else 1)
    if ph is None:
        yield "StageDone outside a phase", StageDone(me, 1)
        yield "Rewire outside a phase", Rewire(JOINS)
        yield "IntegrateAck outside a phase", IntegrateAck(intruder(), -1)
        yield "SetPredAck outside a phase", SetPredAck(intruder())
        yield "LeaveAnswer outside a phase", LeaveAnswer(intruder(), True)
        yield "Absorbed outside a phase", Absorbed()
        yield "Departing outside a phase", Departing(intruder(), intruder(), (), ())
        if member:
            yield "UpdateOver outside a phase", UpdateOver()
            yield "SetPred outside a phase", SetPred(intruder(), intruder())
            yield (
                "AnchorHandover outside a phase",
                AnchorHandover(((DEFAULT_QUEUE, stack, (1, 0, 0)),)),
            )
    else:
        for child in ph.old_children[:1]:
            yield "StageDone for another stage", StageDone(child, ph.stage % 4 + 1)
        yield "Rewire skipping a stage", Rewire(min(ph.stage + 2, 4) if ph.stage < 3 else 2)
        yield "Rewire for the current stage", Rewire(ph.stage)
        yield "IntegrateAck from a node never integrated", IntegrateAck(intruder(), -1)
        yield "SetPredAck from an unknown node", SetPredAck(intruder())
        yield "LeaveAnswer from a node never asked", LeaveAnswer(intruder(), True)
        if ph.absorber is None:
            yield "Absorbed before handing over", Absorbed()
        yield (
            "Departing from a node that was not granted",
            Departing(intruder(), intruder(), (), ()),
        )
        yield "HandoverPart from an unknown node", HandoverPart(intruder(), 0, ())
        if member and ph.stage != OVER:
            yield "UpdateOver before the phase ended", UpdateOver()
        if node.seat.policy is not None:
            yield (
                "AnchorHandover to the anchor",
                AnchorHandover(((DEFAULT_QUEUE, stack, (1, 0, 0)),)),
            )
    yield "HandoverPart outside a handover", HandoverPart(intruder(), 1, ())
    yield "MayILeave from a node that is not the successor", MayILeave(intruder())
    if member:
        yield "Integrate to a member", Integrate(intruder(), intruder(), intruder(), ())
    else:
        yield (
            "Integrate from a node that is not responsible",
            Integrate(intruder(), intruder(), intruder(Kind.RIGHT), ()),
        )
    yield "AnchorHandover with a bad state", AnchorHandover(((DEFAULT_QUEUE, stack, (0, -5, 1)),))
    twice = ((DEFAULT_QUEUE, False, (1, 0, 0)), (DEFAULT_QUEUE, True, (0, 0, 0)))
    yield "AnchorHandover with a queue twice", AnchorHandover(twice)


def assert_refused(process: Process, label: str, to: NodeRef, message: Any) -> None:
    # A deep picture (every part of every node, through the dataclass reprs) and the
    # one-line summary a log shows.
    before = repr(process)
    summary = process.describe()
    departed = process.nodes[to.kind].ring.mode is Mode.DEPARTED
    if departed and isinstance(message, LOSSY_WHEN_DEPARTED):
        # Harmless when the receiver is gone: dropped by design, and nothing changes.
        assert process.handle(to, message) == []
    else:
        with pytest.raises(RemoteProtocolError):
            process.handle(to, message)
    assert repr(process) == before, f"{label}: state changed by a refused message"
    assert process.describe() == summary, f"{label}: summary changed by a refused message"


def check_sim(sim: AsyncSim, replay: str) -> None:
    result = sim.run()
    for model in ("sc", "linearizable"):
        verdict = check(result.records, model=model, method="certificate")
        assert verdict.ok, f"{verdict.describe()}\n{replay}"
    inserted = Counter(r.value for r in result.records if r.op in ("enqueue", "push"))
    removed = Counter(r.value for r in result.records if r.op in ("dequeue", "pop") and r.value)
    assert removed == inserted, replay
    problems = ring_problems(sim.order)
    assert not problems, "\n".join([*problems[:10], replay])


def fuzz_run(config: AsyncConfig, pauses: list[int], seen: Counter[str] | None = None) -> None:
    replay = f"replay with: fuzz_run({config!r}, {pauses!r})"
    if currently_in_test_context():
        note(replay)
    sim = AsyncSim(config)
    rng = random.Random(config.seed)
    step = 0
    for pause in sorted(pauses):
        while step < pause and not sim.finished():
            sim.step()
            step += 1
        live = [p for p in sim.order]
        process = rng.choice(live)
        for node in process.nodes.values():
            for label, message in wrong_for(node, rng):
                try:
                    assert_refused(process, label, node.me, message)
                except AssertionError as e:
                    raise AssertionError(f"{label}: {message!r}\n{e}\n{replay}") from None
                if seen is not None:
                    seen[label] += 1
        sim._apply(process, process.tick())
    check_sim(sim, replay)


CONFIGS = [
    AsyncConfig(6, Structure.QUEUE, 60, 0.6, seed=3, joins=2, leaves=2),
    AsyncConfig(6, Structure.STACK, 60, 0.6, seed=8, joins=2, leaves=2),
    AsyncConfig(5, Structure.QUEUE, 50, 0.6, seed=21, joins=3, leaves=1),
    AsyncConfig(7, Structure.QUEUE, 50, 0.5, seed=5, leaves=3, leave_anchor=True),
]


def test_every_kind_of_wrong_message_is_refused_and_changes_nothing() -> None:
    seen: Counter[str] = Counter()
    for config in CONFIGS:
        fuzz_run(config, list(range(0, 6000, 79)), seen)
    kinds = {label.split(" ")[0].rstrip(":") for label in seen}
    wanted = {
        "BatchUp", "Grants", "Put", "Get", "GetReply", "PutAck", "JoinRequest", "JoinAccepted",
        "JoinAcceptedAck", "JoinCounted", "JoinCountedAck", "Withdraw", "StageDone", "Rewire",
        "Integrate", "IntegrateAck", "SetPred", "SetPredAck", "MayILeave", "LeaveAnswer",
        "Departing", "HandoverPart", "Absorbed", "AnchorHandover", "UpdateOver", "DhtBundle",
        "DhtRun", "AnswerRun",
    }  # fmt: skip
    assert wanted <= kinds, sorted(wanted - kinds)
    # The state-dependent cases happened too, not only the easy ones.
    for label in (
        "Grants for another batch number",
        "Grants: fewer runs than the batch",
        "BatchUp: second batch from a child",
        "StageDone for another stage",
        "Rewire skipping a stage",
        "Departing from a node that was not granted",
        "GetReply naming an owner of another key",
        "PutAck naming an owner of another key",
        "DhtBundle: a right answer, then a wrong one",
        "AnswerRun: a right answer, then a wrong one",
    ):
        assert seen[label] > 0, label


@given(
    processes=st.integers(1, 10),
    structure=st.sampled_from(list(Structure)),
    joins=st.integers(0, 3),
    leaves=st.integers(0, 3),
    operations=st.integers(0, 40),
    seed=st.integers(0, 2**32 - 1),
    pauses=st.lists(st.integers(0, 4000), min_size=1, max_size=4),
)
def test_wrong_messages_at_random_moments_change_nothing(
    processes: int,
    structure: Structure,
    joins: int,
    leaves: int,
    operations: int,
    seed: int,
    pauses: list[int],
) -> None:
    config = AsyncConfig(processes, structure, operations, 0.6, seed, joins=joins, leaves=leaves)
    fuzz_run(config, pauses)


def test_the_forged_empty_grants_of_issue_8_are_refused() -> None:
    """The frames that crashed four daemons: ``Grants`` with no runs, to every node of a
    busy cluster, while batches with operations are in flight."""
    config = AsyncConfig(4, Structure.QUEUE, 80, 0.7, seed=1)
    sim = AsyncSim(config)
    refused = 0
    for _ in range(60):
        for _ in range(25):
            sim.step()
        for process in sim.order:
            for node in process.nodes.values():
                flight = node.batching.inflight
                if flight is None or flight.served or not any(b.sections for _, b in flight.layout):
                    continue
                assert_refused(process, "empty Grants", node.me, Grants((), number=flight.number))
                refused += 1
            sim._apply(process, process.tick())
    assert refused > 10
    check_sim(sim, f"{config!r}")


# -- random fields: refused with nothing changed, or taken; never another error ------------


def random_field(hint: str, pids: list[str], rng: random.Random) -> Any:
    """A value of the declared type, drawn without regard for the receiver's state."""

    def num() -> int:
        return rng.choice([0, 1, 2, 3, -1, 7, 100, rng.randrange(1 << 20)])

    def node() -> NodeRef:
        return node_ref(rng.choice(pids), rng.choice(list(Kind)))

    if "DhtMessage" in hint:  # a bundle: two or more random DHT messages
        kinds = [Put, Get, GetReply, PutAck, Drop, DropAck, DhtRun, AnswerRun]
        return tuple(random_of(rng.choice(kinds), pids, rng) for _ in range(rng.randrange(2, 5)))
    if "NodeRef" in hint:
        return tuple(node() for _ in range(rng.randrange(3))) if "tuple" in hint else node()
    if "Route" in hint:
        return None if rng.random() < 0.6 else route_to(rng.randrange(1 << 64))

    def name() -> str:
        return rng.choice([DEFAULT_QUEUE, "jobs", "", "no spaces"])

    if "CreateKey" in hint:  # Grants.created

        def key() -> tuple[str, bool, int]:
            return (name(), rng.random() < 0.5, num())

        return tuple(
            (key(), rng.randrange(4), rng.random() < 0.5, num()) for _ in range(rng.randrange(3))
        )
    if "QueueName, DeliveryLimit" in hint:  # AnchorHandover.limits
        return tuple((name(), num()) for _ in range(rng.randrange(3)))
    if "QueueRef, RunGrant, bool]" in hint:  # Grants.deleted

        def removes() -> RunGrant:
            return RunGrant(num(), num(), num(), num(), rng.choice((1, -1)))

        return tuple(
            ((name(), rng.random() < 0.5), removes(), rng.random() < 0.8)
            for _ in range(rng.randrange(3))
        )
    if "RunGrant" in hint:
        return tuple(
            ((name(), rng.random() < 0.5), tuple(RunGrant(num(), num(), num())
                                                 for _ in range(rng.randrange(4))))
            for _ in range(rng.randrange(3))
        )  # fmt: skip
    if "Batch" in hint:
        batch = Batch.of(*(num() for _ in range(rng.randrange(4))))
        deletes = tuple((name(), num()) for _ in range(rng.randrange(2)))
        return Batches((((name(), rng.random() < 0.5), batch),), num(), num(), num(), 0, deletes)
    if "QueueCounters" in hint:
        return tuple(
            (name(), rng.random() < 0.5, tuple(num() for _ in range(rng.choice([3, 4]))))
            for _ in range(rng.randrange(3))
        )
    if "Entr" in hint:  # Entry, Entries
        return tuple((name(), num(), num(), "e") for _ in range(rng.randrange(3)))
    if "QueueRef, Annotated" in hint:  # Grants.refused
        return tuple(((name(), rng.random() < 0.5), rng.choice([0, 1, 2, 3])) for _ in range(2))
    if "QueueRef" in hint:
        return (name(), rng.random() < 0.5)
    if "bool" in hint:
        return rng.random() < 0.5
    if "tuple[int" in hint:  # before "Item": a run's op ids say Items(...)
        return tuple(num() for _ in range(rng.randrange(1, 5)))
    if "tuple[Position" in hint:  # an answer run's positions
        return tuple(num() for _ in range(rng.randrange(4)))
    if "tuple[Item" in hint:  # a run's elements
        return tuple(random_field("Item", pids, rng) for _ in range(rng.randrange(4)))
    if "Element" in hint or "Item" in hint:
        return rng.choice(["x", Redelivered("x", rng.randrange(1, 4), "nack")])
    if "tuple[int" in hint:
        return tuple(num() for _ in range(3))
    return num()


def random_message(pids: list[str], rng: random.Random) -> Any:
    return random_of(rng.choice([*MESSAGE_KINDS.values(), *MEMBERSHIP_KINDS.values()]), pids, rng)


def random_of(cls: Any, pids: list[str], rng: random.Random) -> Any:
    params = inspect.signature(cls).parameters.values()
    return cls(**{p.name: random_field(str(p.annotation), pids, rng) for p in params})


@pytest.mark.parametrize("seed", range(8))
def test_messages_with_random_fields_are_refused_cleanly_or_taken(seed: int) -> None:
    """Any message a peer can put on the wire, with fields drawn at random: either the
    receiver refuses it with :class:`RemoteProtocolError` and nothing changed, or it takes it.
    Nothing else (no ValueError, KeyError, IndexError, AssertionError, ProtocolError)."""
    rng = random.Random(seed)
    config = AsyncConfig(5, rng.choice(list(Structure)), 40, 0.6, seed, joins=2, leaves=1)
    sim = AsyncSim(config)
    pids = [*sim.processes, INTRUDER]
    tried = 0
    for step in range(3000):
        if sim.finished():
            break
        sim.step()
        if step % 40:
            continue
        # A copy takes the message, so the run itself goes on undisturbed.
        process = copy.deepcopy(rng.choice(sim.order))
        message = random_message(pids, rng)
        to = process.node_ref(rng.choice(list(Kind)))
        before = repr(process)
        try:
            process.handle(to, message)
        except RemoteProtocolError:
            assert repr(process) == before, f"seed {seed}: refused but changed: {message!r}"
        tried += 1
    assert tried > 10
