"""A request's timeout, at both ends of its range (issue 28, item 16): under half a
millisecond it went on the wire as 0 ms, which the daemon refuses ("request_timeout_ms
must be a positive integer"); past what msgpack can carry it ended in an OverflowError.
The hello rounds up to 1 ms, and ``connect()`` refuses more than
``REQUEST_TIMEOUT_S_MAX`` before it dials."""

from __future__ import annotations

import pytest

import skueue.client.api
from skueue.client.api import REQUEST_TIMEOUT_S_MAX
from skueue.runtime.limits import Limits
from skueue.wire.client_hello import PROTOCOL_VERSION, ClientHello, parse_client_hello


def test_a_timeout_under_a_millisecond_is_one_millisecond_on_the_wire() -> None:
    frame = ClientHello(PROTOCOL_VERSION, request_timeout_s=0.0001).frame()
    assert frame[2]["request_timeout_ms"] == 1
    assert parse_client_hello(frame).request_timeout_s == 0.001


def test_the_clients_limit_is_the_daemons_default() -> None:
    assert Limits().request_timeout_s_max == REQUEST_TIMEOUT_S_MAX


@pytest.mark.trio
@pytest.mark.parametrize("timeout_s", [REQUEST_TIMEOUT_S_MAX + 1, 1e17, float("inf"), 0, -1])
async def test_connect_refuses_a_timeout_out_of_range_before_it_dials(timeout_s: float) -> None:
    with pytest.raises(ValueError, match="REQUEST_TIMEOUT_S_MAX"):
        async with skueue.client.api.connect("127.0.0.1:1", request_timeout_s=timeout_s):
            pass
