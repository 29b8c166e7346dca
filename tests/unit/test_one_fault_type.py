"""Bad input is one type, whoever sent it (issue 29 item 5): a peer's frame that does not
decode, a peer's message the core refuses, and a client's frame that does not parse all
raise :class:`skueue.core.errors.RemoteProtocolError`, defined at the bottom of the
stack, and none of them changed anything."""

from __future__ import annotations

import pytest

from skueue.core.errors import ProtocolError, RemoteProtocolError
from skueue.core.messages.stages import Hurry
from skueue.core.ops import Structure
from skueue.core.process import Process
from skueue.overlay.ring import build_views
from skueue.runtime.limits import Limits
from skueue.wire.client_codec import decode_reply, decode_request
from skueue.wire.peer import decode_message


def one_process(pid: str = "p0") -> Process:
    views = {n.kind: v for n, v in build_views([pid]).items() if n.process == pid}
    return Process.create(pid, views, Structure.QUEUE)


def raised(call: object, *args: object) -> BaseException:
    with pytest.raises(Exception) as caught:
        call(*args)  # type: ignore[operator]
    return caught.value


def test_a_bad_peer_frame_and_a_bad_client_frame_end_as_one_type() -> None:
    process = one_process()
    before = process.describe()
    left, middle = (process.node_ref(k) for k in sorted(process.nodes)[:2])
    errors = {
        "peer frame": raised(decode_message, ["BatchUp", "not", "fields"]),
        "peer message": raised(process.handle, left, Hurry(middle)),  # forged: "from here"
        "client request": raised(decode_request, ["insert", 1, "not a list"], Limits()),
        "client reply": raised(decode_reply, ["done", "no rid", []]),
    }
    for source, error in errors.items():
        assert type(error) is RemoteProtocolError, (source, type(error))
        assert not isinstance(error, ProtocolError), source  # their fault, not our bug
    assert process.describe() == before
