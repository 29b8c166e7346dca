"""Runs: the DHT requests of one step for consecutive positions of one block, and the
answers of one owner, each as one message (issue 30; the argument is docs/dht_blocks.md).

Theory of operation
-------------------
A block's positions share a key (:mod:`skueue.dht.keys`), so a node's Puts (or Gets,
Looks, Drops) for a run of consecutive positions go to one owner by one route.  Sent one
by one, each repeats the queue, the route, the requester and its kind; :func:`collapse`
turns a sequence of messages bound for one node into the same sequence with every stretch
of such requests replaced by one :class:`~skueue.core.messages.stages.DhtRun`, and every
stretch of answers of one kind from one owner by one
:class:`~skueue.core.messages.stages.AnswerRun`.  Only *adjacent* messages merge, so the
receiver, which handles a run as its single messages in order, receives exactly what it
would have received, in the same order.
"""

from __future__ import annotations

from skueue.core.messages.stages import (
    ANSWER_DROP_ACK,
    ANSWER_GET_REPLY,
    ANSWER_PUT_ACK,
    RUN_DROP,
    RUN_GET,
    RUN_ITEMS_MAX,
    RUN_LOOK,
    RUN_PUT,
    AnswerRun,
    DhtBundle,
    DhtMessage,
    DhtRun,
    Drop,
    DropAck,
    Get,
    GetReply,
    Put,
    PutAck,
)
from skueue.dht.keys import block_of

Request = Put | Get | Drop
Answer = PutAck | GetReply | DropAck


def request_kind(m: Request) -> int:
    if isinstance(m, Put):
        return RUN_PUT
    if isinstance(m, Drop):
        return RUN_DROP
    return RUN_LOOK if m.keep else RUN_GET


def answer_kind(m: Answer) -> int:
    if isinstance(m, PutAck):
        return ANSWER_PUT_ACK
    return ANSWER_DROP_ACK if isinstance(m, DropAck) else ANSWER_GET_REPLY


def _extends(run: list[Request], m: Request) -> bool:
    """Whether ``m`` continues the requests ``run``: same kind, queue, requester, route
    (and acknowledgement), the next position in the run's direction, the same block."""
    head = run[0]
    if (
        len(run) >= RUN_ITEMS_MAX
        or request_kind(m) != request_kind(head)
        or m.queue != head.queue
        or m.requester != head.requester
        or m.route != head.route
        or (isinstance(m, Put) and isinstance(head, Put) and m.ack != head.ack)
        or block_of(m.position) != block_of(head.position)
    ):
        return False
    step = m.position - run[-1].position
    if len(run) == 1:
        return step in (1, -1)
    return step == run[1].position - head.position


def _answers_extend(run: list[Answer], m: Answer) -> bool:
    head = run[0]
    same = answer_kind(m) == answer_kind(head) and m.owner == head.owner
    return same and len(run) < RUN_ITEMS_MAX


def request_run(run: list[Request]) -> DhtRun:
    head = run[0]
    return DhtRun(
        request_kind(head),
        head.route,
        head.queue,
        head.position,
        run[1].position < head.position,
        head.requester,
        head.ack if isinstance(head, Put) else False,
        tuple(m.op_id for m in run),
        tuple(m.ticket for m in run),
        tuple(m.element for m in run if isinstance(m, Put)),
    )


def answer_run(run: list[Answer]) -> AnswerRun:
    head = run[0]
    return AnswerRun(
        answer_kind(head),
        head.owner,
        tuple(m.op_id for m in run),
        tuple(m.position for m in run if not isinstance(m, PutAck)),
        tuple(m.element for m in run if isinstance(m, GetReply)),
    )


def collapse(messages: list[DhtMessage]) -> list[DhtMessage]:
    """``messages`` (for one node, in order) with each stretch of requests that form a
    run, and each stretch of answers from one owner, as one message."""
    out: list[DhtMessage] = []
    requests: list[Request] = []
    answers: list[Answer] = []

    def close() -> None:
        if len(requests) > 1:
            out.append(request_run(requests))
        else:
            out.extend(requests)
        if len(answers) > 1:
            out.append(answer_run(answers))
        else:
            out.extend(answers)
        requests.clear()
        answers.clear()

    for m in messages:
        if isinstance(m, Put | Get | Drop):
            if not (requests and _extends(requests, m)):
                close()
            requests.append(m)
        elif isinstance(m, PutAck | GetReply | DropAck):
            if not (answers and _answers_extend(answers, m)):
                close()
            answers.append(m)
        else:  # a run already
            close()
            out.append(m)
    close()
    return out



Single = Put | Get | Drop | PutAck | GetReply | DropAck


def singles(message: DhtBundle | DhtMessage) -> list[Single]:
    """The single DHT messages a bundle or run carries, in order (a single: itself)."""
    if isinstance(message, DhtBundle):
        return [x for m in message.messages for x in singles(m)]
    if isinstance(message, DhtRun):
        return list(message.requests())
    if isinstance(message, AnswerRun):
        return list(message.answers())
    return [message]


def opened(message: object) -> list[object]:
    """Any message, with bundles and runs opened (for drivers and tests that look for a
    kind: a Put may travel inside either)."""
    if isinstance(message, DhtBundle | DhtRun | AnswerRun):
        return list(singles(message))
    return [message]
