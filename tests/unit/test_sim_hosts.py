"""The hosts simulator (skueue/sim/hosts.py): its replay check can fail, the state
comparison sees what pickle keeps, every kind of crash and every client move really
happens, and two host bugs it found stay fixed."""

from __future__ import annotations

import copy
import pickle
from collections import Counter

import pytest

from skueue.core.effects import Effect
from skueue.core.messages.stages import Hurry, Message
from skueue.core.ops import Structure
from skueue.core.process import Process
from skueue.host.inputs import FromClient, PeerMessage
from skueue.host.replies import Done, ErrorReply
from skueue.host.requests import InsertRequest, LeaveRequest, RemoveRequest
from skueue.host.state_lines import DeterminismError, state_lines
from skueue.overlay.labels import Kind, NodeRef
from skueue.sim.cluster import build_cluster
from skueue.sim.hosts import HostsConfig, HostsSim
from tests.property.host_runs import check_run
from tests.property.test_churn import LOW_IDS

CONFIG = HostsConfig(4, Structure.QUEUE, operations=40, insert_ratio=0.6, seed=1234,
                     crashes=1, drain=False)  # fmt: skip


def started(config: HostsConfig, steps: int) -> HostsSim:
    sim = HostsSim(config)
    for _ in range(steps):
        sim._step()
    return sim


def test_no_crashes_keep_no_record() -> None:
    sim = HostsSim(HostsConfig(4, seed=1))
    sim.run()
    assert all(not m.log and m.snapshot is None for m in sim.members.values())


def test_a_replay_with_other_effects_names_the_member_and_the_seed() -> None:
    sim = started(CONFIG, 300)
    member = sim.members["p1"]
    index = next(i for i, (_, effects) in enumerate(member.log) if effects)
    item, effects = member.log[index]
    member.log[index] = (item, effects[:-1])  # what the first run "gave"
    with pytest.raises(DeterminismError) as error:
        sim.crash(member)
    text = str(error.value)
    assert text.startswith(f"seed 1234: p1: the replay of logged input {index} after its "
                           "first start")  # fmt: skip


def test_a_rebuilt_host_that_differs_names_the_field() -> None:
    sim = started(CONFIG, 300)
    member = sim.members["p2"]
    issued = member.host.process.next_op_id
    member.host.process.next_op_id += 5  # a change no logged input explains
    with pytest.raises(DeterminismError) as error:
        sim.crash(member)
    assert str(error.value).startswith(
        "seed 1234: p2: the rebuilt host differs from the host that crashed: expected "
        f"('.clients.process.next_op_id', {issued + 5}), rebuilt "
        f"('.clients.process.next_op_id', {issued})"
    )


def test_a_lost_logged_input_is_caught() -> None:
    """A record that misses a message it took (a log write that was not synced, taken
    for one that was) gives another host."""
    sim = started(CONFIG, 300)
    member = sim.members["p3"]
    # (Not a Hurry: a repeated pacing hint changes nothing, so losing one is harmless.)
    messages = [
        i
        for i, (item, _) in enumerate(member.log)
        if isinstance(item, PeerMessage) and not isinstance(item.message, Hurry)
    ]
    del member.log[messages[len(messages) // 2]]
    with pytest.raises(DeterminismError, match=r"^seed 1234: p3: "):
        sim.crash(member)


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
    config = HostsConfig(6, Structure.STACK, operations=60, insert_ratio=0.6, seed=77,
                         crashes=10, before_sync_ratio=0.0)  # fmt: skip
    with pytest.raises(DeterminismError, match=r"^seed 77: \S+: the replay of logged input"):
        HostsSim(config).run()


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


def test_every_kind_of_crash_and_client_move_really_happens() -> None:
    """The property tests are only worth something if crashes hit members after and
    before the sync, lose frames, ticks and requests, restart from snapshots and from the
    first start with inputs to replay, hit joiners and leavers; and if clients time out,
    send requests again, lose their connections, move off leaving members, and leases
    expire, go back, come back again and reach the dead letters."""
    lost = Counter[str]()
    stats = Counter[str]()
    events = Counter[str]()
    for seed in range(6, 12):
        config = HostsConfig(
            5, Structure.QUEUE if seed % 2 else Structure.STACK, clients=3, operations=60,
            insert_ratio=0.6, seed=seed, delivery=("fifo", "any")[seed % 2], crashes=8,
            before_sync_ratio=0.5, snapshot_every=[0, 5][seed % 2], timeout_steps=30,
            blocking_ratio=0.3, lease_ratio=0.5, max_deliveries=2, joins=2, leaves=2,
        )  # fmt: skip
        sim = HostsSim(config)
        result = sim.run()
        check_run(result, f"seed {seed}")
        lost.update(result.stats.lost)
        stats.update({k: v for k, v in vars(result.stats).items() if isinstance(v, int)})
        stats.update(result.counts)
        stats["dead"] += len(result.dead)
        stats["left"] += sum(p.departed for p in result.processes)
        stats["joined"] += sum(pid.startswith("j") for pid in sim.members)
        events.update(e.event for e in result.lease_events)
        events["expired ack"] += sum(e.event == "ack" and e.ok is False
                                     for e in result.lease_events)  # fmt: skip
        events["redelivered"] += sum((e.deliveries or 0) > 1 for e in result.lease_events)
    assert lost["PeerMessage"] and lost["Tick"] and lost["FromClient"], lost
    for what in ("crashes", "snapshots", "from_snapshot", "replayed", "retried", "timeouts",
                 "moved", "drops", "dead", "left", "joined"):  # fmt: skip
        assert stats[what] > 0, (what, stats)
    for what in ("lease", "ack", "nack", "close", "expired ack", "redelivered"):
        assert events[what] > 0, (what, events)


def test_named_queues_really_see_deletes_refusals_and_levels() -> None:
    """The property tests of named queues are only worth something if deletes remove
    elements, switch structures (refusing the old one's operations), and a priority
    queue takes elements at every level, shows its head and changes its limit."""
    seen = Counter[str]()
    for seed in range(3):
        config = HostsConfig(4, operations=10, seed=seed, crashes=2, pq_levels=4,
                             pq_operations=80, d_operations=80)  # fmt: skip
        result = HostsSim(config).run()
        seen["removed by deletes"] += sum(d.removed for d in result.deletes)
        seen["other structure"] += sum("is a" in why for _, why in result.refusals)
        seen["stacks"] += sum(r.op == "push" for r in result.records if r.queue == "d")
        seen["peeks that saw one"] += sum(r.op == "peek" and bool(r.value)
                                          for r in result.records)  # fmt: skip
        seen["configures"] += len(result.configured)
        levels = {r.priority or 0 for r in result.records if r.queue == "pq" and r.inserts}
        assert levels == {0, 1, 2, 3}, levels
    assert all(seen[what] for what in ("removed by deletes", "other structure", "stacks",
                                       "peeks that saw one", "configures")), seen  # fmt: skip


# -- host bugs the simulator found ---------------------------------------------------------


def leaving_member(sim: HostsSim) -> str:
    """Ask a member that is not the stayer to leave (its admin waits for the answer)."""
    pid = next(p for p in sim.members if p != sim.stayer)
    sim.enter(sim.members[pid], FromClient(900, None, LeaveRequest(1), float("inf"), 0.0))
    assert sim.members[pid].host.process.leaving
    return pid


def replies_to(sim: HostsSim, conn: int, item: FromClient, pid: str) -> list[object]:
    """Step ``item`` on ``pid``; the replies that step gave ``conn``."""
    member = sim.members[pid]
    got: list[object] = []
    answered = sim.clients.answered

    def spy(to: int, reply: object) -> None:
        if to == conn:
            got.append(reply)
        answered(to, reply)

    sim.clients.answered = spy  # type: ignore[method-assign]
    try:
        sim.enter(member, item)
    finally:
        sim.clients.answered = answered  # type: ignore[method-assign]
    return got


def test_a_request_sent_again_to_a_leaving_member_gets_its_first_outcome() -> None:
    """An insert that a member took before it began to leave, sent again (its client
    timed out, or its connection broke): the member must serve it from what it knows,
    not refuse it as new work; refused, the client sends it to another member, where it
    is inserted a second time (found by the hosts simulator, seed 1725604709)."""
    sim = HostsSim(HostsConfig(3, operations=0, clients=1, seed=5, drain=False))
    pid = next(p for p in sim.members if p != sim.stayer)
    request = InsertRequest(1, (b"x",))
    first = FromClient(901, "s", request, float("inf"), 0.0)
    replies_to(sim, 901, first, pid)  # running: its batch has not gone up yet
    leaving_member(sim)
    again = replies_to(sim, 902, FromClient(902, "s", request, float("inf"), 0.0), pid)
    assert not any(isinstance(r, ErrorReply) for r in again), again


def test_a_blocking_remove_on_a_member_that_begins_to_leave_ends_its_wait() -> None:
    """A blocking remove waiting on an empty queue tries again after each empty
    attempt; once its member is leaving it may submit nothing new, or the core refuses
    (a ProtocolError: the daemon stops).  Its wait ends with the leave (found by the
    hosts simulator, seed 2427008867)."""
    sim = HostsSim(HostsConfig(3, operations=0, clients=1, seed=5, drain=False))
    pid = next(p for p in sim.members if p != sim.stayer)
    member = sim.members[pid]
    wait = FromClient(903, "s", RemoveRequest(1, 1, wait_ms=10_000), float("inf"), 0.0)
    sim.enter(member, wait)
    while not member.host.clients.waits or member.host.process.next_op_id < 2:
        sim._step()  # until its first attempt came back empty and it tries again
    leaving_member(sim)
    answers: list[object] = []
    answered = sim.clients.answered
    sim.clients.answered = lambda to, reply: (  # type: ignore[method-assign]
        answers.append(reply) if to == 903 else answered(to, reply)
    )
    for _ in range(5000):
        sim._step()
        if answers and member.host.left:
            break
    assert member.host.left, "its leave went through"
    (reply,) = answers
    assert isinstance(reply, Done) and reply.results[0].value is None, reply  # its wait ended


def test_a_leave_asked_again_after_the_member_left_is_answered() -> None:
    """An admin that asks a member to leave again once it has left (its first answer
    was lost, or it asks after the member restarted from its log) gets Done at once:
    the member has left.  It used to wait for an answer that only the departure gives,
    which had already happened, until the request timed out."""
    sim = HostsSim(HostsConfig(3, operations=0, clients=1, seed=5, drain=False))
    pid = leaving_member(sim)
    for _ in range(20_000):
        if sim.members[pid].host.left:
            break
        sim._step()
    assert sim.members[pid].host.left, "the leave went through"
    again = FromClient(902, None, LeaveRequest(2), float("inf"), 0.0)
    (reply,) = replies_to(sim, 902, again, pid)
    assert isinstance(reply, Done) and reply.rid == 2, reply


def test_the_anchor_really_moves_through_joins_and_leaves() -> None:
    """A joiner with a low id lands left of the anchor and takes its counters over; with
    ``leave_anchor`` the anchor's member leaves, and the counters move again."""
    config = HostsConfig(5, operations=30, seed=4, crashes=3, joins=1, join_ids=LOW_IDS[:1])
    result = HostsSim(config).run()
    anchors = [p.process_id for p in result.processes
               if not p.departed and p.nodes[Kind.LEFT].seat.policy is not None]  # fmt: skip
    assert anchors == [LOW_IDS[0]]
    config = HostsConfig(5, operations=30, seed=4, crashes=3, leaves=2, leave_anchor=True)
    sim = HostsSim(config)
    first = next(p for p in sim.members.values() if p.host.process.nodes[Kind.LEFT].seat.policy)
    result = sim.run()
    assert first.host.process.departed, "the anchor's member left"
    check_run(result, "leave_anchor")
