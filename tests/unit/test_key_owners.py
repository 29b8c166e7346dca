"""The DHT shortcut: which node owns which keys (skueue/core/parts/key_owners.py).

The cache is only a hint, so what matters is: it answers what it learned, it never keeps
two answers for one key, it learns nothing from answers to requests older than the last
update phase, and a cluster using it still stores every element where routing would.
"""

from __future__ import annotations

from skueue.core.dht_runs import opened
from skueue.core.effects import Send
from skueue.core.messages.stages import Get, Put
from skueue.core.ops import OpKind, Structure
from skueue.core.parts.key_owners import KEY_OWNERS_MAX, KeyOwners
from skueue.dht.keys import position_key
from skueue.overlay.labels import LABEL_SPACE, Kind, NodeRef
from skueue.overlay.routing import is_responsible
from skueue.sim.cluster import build_cluster, process_ids


def node(process: str, label: int) -> NodeRef:
    return NodeRef(process, Kind.MIDDLE, label)


def taught(owners: KeyOwners, op_id: int, owner: NodeRef, until: int) -> None:
    owners.issued.add(op_id)
    owners.answered(op_id, (owner, until))


def test_an_interval_is_answered_inside_and_not_outside() -> None:
    owners = KeyOwners()
    a = node("a", 100)
    taught(owners, 1, a, 200)
    assert owners.owner_of(100) == a
    assert owners.owner_of(199) == a
    assert owners.owner_of(200) is None
    assert owners.owner_of(99) is None


def test_the_maximum_node_wraps_around_the_cycle() -> None:
    owners = KeyOwners()
    top = node("top", LABEL_SPACE - 10)
    taught(owners, 1, top, 5)
    assert owners.owner_of(LABEL_SPACE - 1) == top
    assert owners.owner_of(0) == top
    assert owners.owner_of(4) == top
    assert owners.owner_of(5) is None


def test_newer_knowledge_replaces_what_it_overlaps() -> None:
    owners = KeyOwners()
    a, b, c = node("a", 100), node("b", 150), node("c", 300)
    taught(owners, 1, a, 200)
    taught(owners, 2, c, 400)
    taught(owners, 3, b, 320)  # b joined: it owns [150, 320) now
    assert owners.owner_of(120) is None  # a's old interval is gone, not half-true
    assert owners.owner_of(160) == b
    assert owners.owner_of(310) == b
    assert owners.owner_of(350) is None  # c's interval was overlapped too
    assert owners.starts == sorted(owners.starts)
    assert all(s < e for s, e, _ in owners.spans)


def test_answers_to_requests_sent_before_a_phase_teach_nothing() -> None:
    owners = KeyOwners()
    owners.issued.add(7)
    owners.forget()  # an update phase began: the ring may change
    owners.answered(7, (node("gone", 100), 200))
    assert owners.owner_of(150) is None
    taught(owners, 8, node("a", 100), 200)
    owners.forget()
    assert owners.owner_of(150) is None


def test_an_answer_without_an_owner_still_closes_the_request() -> None:
    owners = KeyOwners()
    owners.issued.add(3)
    owners.answered(3, None)
    assert not owners.issued


def test_the_cache_is_bounded() -> None:
    owners = KeyOwners()
    for i in range(KEY_OWNERS_MAX + 10):
        taught(owners, i, node(f"p{i}", i * 10), i * 10 + 5)
    assert len(owners.spans) <= KEY_OWNERS_MAX
    assert not owners.issued


def _run(processes: dict, ops: list[tuple[str, OpKind]]) -> tuple[list[Send], int]:
    """Submit, then tick and deliver until everything completed and no message is on its
    way (an insert completes before its Put lands); every Send returned."""
    sent: list[Send] = []
    done = 0
    queue: list[Send] = []

    def apply(effects: list) -> None:
        nonlocal done
        for e in effects:
            if isinstance(e, Send):
                queue.append(e)
                sent.append(e)
            else:
                done += 1

    for pid, kind in ops:
        p = processes[pid]
        value = f"{pid}-{len(sent)}-{done}".encode() if kind.inserts else None
        apply(p.submit(p.new_op(kind, value)))
    for _ in range(10_000):
        if done == len(ops) and not queue:
            break
        for p in processes.values():
            apply(p.tick())
        pending, queue[:] = list(queue), []
        for s in pending:
            apply(processes[s.to.process].handle(s.to, s.message))
    assert done == len(ops), f"{done} of {len(ops)} completed"
    return sent, done


def test_once_learned_requests_go_to_the_owner_in_one_hop() -> None:
    processes = build_cluster(process_ids(8), Structure.QUEUE)
    ids = list(processes)
    warm = [(pid, OpKind.ENQUEUE) for pid in ids for _ in range(40)]
    _run(processes, warm)
    steady = [(ids[0], OpKind.ENQUEUE) for _ in range(20)]
    sent, _ = _run(processes, steady)
    # (Puts for consecutive positions travel as runs: opened, each Put counts.)
    puts = [(s.to, m) for s in sent for m in opened(s.message) if isinstance(m, Put)]
    direct = [(to, m) for to, m in puts if m.route is None]
    assert direct, "no Put took the shortcut"
    for to, m in direct:
        # The shortcut's target is the node routing would have found.
        target = processes[to.process].nodes[to.kind]
        key = position_key(m.queue[0], m.position)
        assert is_responsible(target.ring.view, key)
    # Without the shortcut, a Put crosses ~log n processes on an 8-process ring.
    assert len(puts) < 1.5 * len(steady)


def test_every_element_comes_back_with_the_shortcut_in_use() -> None:
    processes = build_cluster(process_ids(6), Structure.QUEUE)
    ids = list(processes)
    inserts = [(pid, OpKind.ENQUEUE) for pid in ids for _ in range(30)]
    _run(processes, inserts)
    removes = [(pid, OpKind.DEQUEUE) for pid in reversed(ids) for _ in range(30)]
    sent, _ = _run(processes, removes)
    gets = [m for s in sent for m in opened(s.message) if isinstance(m, Get)]
    assert any(m.route is None for m in gets)
    assert sum(n.store.entries() for p in processes.values() for n in p.nodes.values()) == 0
