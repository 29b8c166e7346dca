"""Runs (skueue/core/dht_runs.py): the requests of one step for consecutive positions of
one block travel as one DhtRun, the answers of one owner as one AnswerRun; a receiver
takes them as their single messages, and refuses a malformed one whole, unchanged
(skueue/core/node/checks.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from skueue.core.dht_bundles import bundle_dht
from skueue.core.dht_runs import collapse, opened, singles
from skueue.core.effects import Send
from skueue.core.errors import RemoteProtocolError
from skueue.core.messages.stages import (
    ANSWER_DROP_ACK,
    ANSWER_GET_REPLY,
    ANSWER_PUT_ACK,
    RUN_GET,
    RUN_ITEMS_MAX,
    RUN_PUT,
    AnswerRun,
    DhtBundle,
    DhtRun,
    Drop,
    Get,
    GetReply,
    Put,
    PutAck,
)
from skueue.core.ops import Structure
from skueue.core.process import Process
from skueue.dht.keys import POSITION_MAX, POSITIONS_PER_BLOCK, block_of, position_key
from skueue.overlay.labels import Kind, node_ref
from skueue.sim.cluster import build_cluster, process_ids
from skueue.wire.peer import decode_message, encode_message

A = node_ref("127.0.0.1:1", Kind.LEFT)
ME = node_ref("127.0.0.1:3", Kind.LEFT)
OWNER = (A, 5)
B = POSITIONS_PER_BLOCK
Q = ("default", False)


def put(position: int, op_id: int | None = None, requester: Any = ME) -> Put:
    return Put(None, position, f"e{position}", 0, requester, op_id or position, True)


def get(position: int, op_id: int | None = None, keep: bool = False) -> Get:
    return Get(None, position, 0, ME, op_id or position, keep=keep)


# -- keys -------------------------------------------------------------------------------


def test_a_block_of_positions_shares_one_key_and_blocks_differ() -> None:
    assert block_of(1) == block_of(B) == 0 and block_of(B + 1) == 1
    assert len({position_key("default", p) for p in range(1, B + 1)}) == 1
    keys = {position_key("default", 1 + b * B) for b in range(1000)}
    assert len(keys) == 1000  # blocks still scatter
    assert position_key("a", 1) != position_key("b", 1)


# -- building runs ----------------------------------------------------------------------


def test_consecutive_puts_of_one_block_go_as_one_run_and_open_to_the_same_puts() -> None:
    puts = [put(p) for p in range(3, 3 + 10)]
    (run,) = collapse(list(puts))
    assert isinstance(run, DhtRun) and run.kind == RUN_PUT and not run.descending
    assert singles(run) == puts
    assert decode_message(encode_message(run)) == run  # the wire derives its codec


def test_a_run_ends_at_a_block_a_gap_another_requester_kind_or_direction() -> None:
    messages = [
        put(B - 1), put(B),  # block 0
        put(B + 1), put(B + 2),  # block 1: another run
        put(B + 4),  # a gap: alone
        put(B + 5, requester=A),  # another requester: alone
        get(B + 6), get(B + 7, keep=True),  # a Get and a Look: not one run
        get(9), get(8), get(7),  # a stack's Pops, highest first: one run, descending
    ]  # fmt: skip
    out = collapse(messages)
    shapes = [
        (type(m).__name__, len(m.op_ids) if isinstance(m, DhtRun) else 1) for m in out
    ]
    assert shapes == [
        ("DhtRun", 2), ("DhtRun", 2), ("Put", 1), ("Put", 1), ("Get", 1), ("Get", 1),
        ("DhtRun", 3),
    ]  # fmt: skip
    assert isinstance(out[-1], DhtRun) and out[-1].descending
    assert [x for m in out for x in singles(m)] == messages  # nothing lost or reordered


def test_a_run_stays_under_its_item_limit() -> None:
    out = collapse([put(p) for p in range(1, B + 1)])
    assert [len(m.op_ids) for m in out if isinstance(m, DhtRun)] == [B]
    assert RUN_ITEMS_MAX == B


def test_answers_of_one_owner_go_as_one_run() -> None:
    answers = [PutAck(1, OWNER), PutAck(2, OWNER), GetReply(3, 7, "x", OWNER),
               GetReply(4, 8, "y", OWNER), PutAck(5, (ME, 9)), PutAck(6, OWNER)]  # fmt: skip
    out = collapse(list(answers))
    assert [type(m).__name__ for m in out] == ["AnswerRun", "AnswerRun", "PutAck", "PutAck"]
    assert [x for m in out for x in singles(m)] == answers


def test_a_bundle_of_a_block_is_one_run_and_of_two_blocks_is_a_bundle_of_runs() -> None:
    one = bundle_dht([Send(A, put(p)) for p in range(1, 11)], 1 << 20)
    assert len(one) == 1 and isinstance(one[0], Send) and isinstance(one[0].message, DhtRun)
    two = bundle_dht([Send(A, put(p)) for p in range(B - 4, B + 6)], 1 << 20)
    assert len(two) == 1 and isinstance(two[0], Send)
    bundle = two[0].message
    assert isinstance(bundle, DhtBundle)
    assert [len(m.op_ids) for m in bundle.messages if isinstance(m, DhtRun)] == [5, 5]


# -- refusals: each malformed run is refused whole, and the receiver is unchanged -------


@pytest.fixture(scope="module")
def cluster() -> dict[str, Process]:
    return build_cluster(process_ids(3), Structure.QUEUE)


def run(**change: Any) -> DhtRun:
    fields: dict[str, Any] = dict(
        kind=RUN_GET, route=None, queue=Q, first=1, descending=False, requester=ME,
        ack=False, op_ids=(1, 2), tickets=(0, 0), elements=(),
    )  # fmt: skip
    fields.update(change)
    return DhtRun(**fields)


def answers(**change: Any) -> AnswerRun:
    fields: dict[str, Any] = dict(
        kind=ANSWER_GET_REPLY, owner=None, op_ids=(1, 2), positions=(1, 2), elements=("a", "b")
    )
    fields.update(change)
    return AnswerRun(**fields)


MALFORMED = [
    ("a run of one request", run(op_ids=(1,), tickets=(0,)), "a run of 1"),
    ("a run longer than a block", run(op_ids=tuple(range(B + 1)), tickets=(0,) * (B + 1)),
     "a run of"),
    ("no such run kind", run(kind=9), "no run kind"),
    ("tickets for another number of requests", run(tickets=(0,)), "1 tickets for 2"),
    ("elements in a run of Gets", run(elements=("x", "y")), "2 elements for 2"),
    ("a run of Puts missing elements", run(kind=RUN_PUT, elements=("x",)), "1 elements"),
    ("acknowledgements asked for Gets", run(ack=True), "acknowledgements"),
    ("positions below 1", run(descending=True), "out of range"),
    ("positions past the largest", run(first=POSITION_MAX), "out of range"),
    ("positions spanning two blocks", run(first=B), "more than one block"),
    ("a run repeating an operation", run(op_ids=(1, 1)), "twice"),
    ("an answer run of one", answers(op_ids=(1,), positions=(1,), elements=("a",)),
     "a run of 1"),
    ("no such answer kind", answers(kind=7), "no answer kind"),
    ("positions in PutAcks", answers(kind=ANSWER_PUT_ACK, elements=()), "2 positions"),
    ("DropAcks without positions", answers(kind=ANSWER_DROP_ACK, positions=(), elements=()),
     "0 positions"),
    ("GetReplies missing an element", answers(elements=("a",)), "1 elements"),
    ("answers nobody awaits", answers(), "nobody awaits"),
]  # fmt: skip


@pytest.mark.parametrize(("label", "message", "why"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_run_is_refused_and_changes_nothing(
    cluster: dict[str, Process], label: str, message: Any, why: str
) -> None:
    process = cluster["p0"]
    to = process.node_ref(Kind.MIDDLE)
    before = repr(process)
    with pytest.raises(RemoteProtocolError, match=why):
        process.handle(to, message)
    assert repr(process) == before, f"{label}: refused but changed"
    with pytest.raises(RemoteProtocolError):  # inside a bundle as well
        process.handle(to, DhtBundle((message, put(3 * B))))
    assert repr(process) == before, f"{label}: refused in a bundle but changed"


def test_a_well_formed_run_is_taken_as_its_requests(cluster: dict[str, Process]) -> None:
    """The same Puts, sent as a run or one by one, leave the same state and effects."""
    as_run, one_by_one = copy.deepcopy(cluster["p1"]), copy.deepcopy(cluster["p1"])
    to = as_run.node_ref(Kind.LEFT)
    puts = [Put(None, p, f"v{p}", 0, to, p, True) for p in range(1, 6)]
    (message,) = collapse(list(puts))
    effects = as_run.handle(to, message)
    expected = [e for p in puts for e in one_by_one.handle(to, p)]
    assert repr(as_run) == repr(one_by_one)
    assert opened_sends(effects) == opened_sends(expected)
    assert any(isinstance(e, Send) and isinstance(e.message, DhtRun) for e in effects) or all(
        not isinstance(e, Send) for e in effects
    )


def opened_sends(effects: list[Any]) -> list[object]:
    return [x for e in effects if isinstance(e, Send) for x in opened(e.message)]


def test_drops_make_runs_too() -> None:
    drops = [Drop(None, p, 0, ME, 7) for p in range(1, 4)]
    (message,) = collapse(list(drops))
    assert isinstance(message, DhtRun) and singles(message) == drops
