"""What waits while a replicated process's group does not lead (runtime/deferred_inputs.py):
a client request that waited its timeout is answered, retryably, unless its first attempt
was taken (then something may have been done for it); everything else waits on, in order."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from skueue.host.replies import UNAVAILABLE
from skueue.host.requests import InsertRequest
from skueue.runtime.deferred_inputs import NOT_LEADING, DeferredInputs
from skueue.runtime.inbox import LinkClosed
from skueue.runtime.network.client_reader import ClientInput


def request(client: int, rid: int) -> ClientInput:
    return ClientInput(client, InsertRequest(rid, (b"x",), None, None, None, None))


def test_requests_that_waited_their_timeout_are_answered_and_the_rest_waits() -> None:
    taken = {("s", 7), ("s", 8)}  # one finished, one running: the host knows both
    host: Any = SimpleNamespace(clients=SimpleNamespace(knows=taken.__contains__))
    sessions: Any = SimpleNamespace(clients={
        1: SimpleNamespace(session=None), 2: SimpleNamespace(session="s"),
    })  # fmt: skip
    deferred = DeferredInputs()
    closed = LinkClosed("peer", 1)
    deferred.add([request(1, 1), closed, request(2, 7), request(2, 8), request(2, 9)], 0.0)
    deferred.add([request(1, 2)], 5.0)
    owner: Any = SimpleNamespace(host=host, ctx=SimpleNamespace(sessions=sessions),
                                 request_timeout_s=lambda client: 5.0)  # fmt: skip
    assert deferred.expired(4.0, owner) == []
    answers = deferred.expired(5.0, owner)
    assert [(client, r.rid, r.code) for client, r in answers] == [
        (1, 1, UNAVAILABLE), (2, 9, UNAVAILABLE),  # first attempts: nothing was done
    ]  # fmt: skip
    assert answers[0][1].message == NOT_LEADING
    # Waiting on, in order: the peer's news, the retries the host took, the newer request.
    assert deferred.take() == [closed, request(2, 7), request(2, 8), request(1, 2)]
    assert not deferred
