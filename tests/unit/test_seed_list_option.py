"""One seed-list parser (issue 28, item 1): every ``skueue`` command that takes ``--node``
parses it as ``HOST:PORT[,HOST:PORT...]``, as ``$SKUEUE_NODE`` and ``connect()`` do."""

from __future__ import annotations

import argparse

import pytest

from skueue.cli import skueue as skueue_cli
from skueue.cli.args import address
from skueue.cli.nodes import seed_addresses
from skueue.client.api import seed_list
from skueue.client.errors import BadAddress
from skueue.host.address import Address, AddressError, parse_seed_list


def node_options() -> dict[str, argparse.Action]:
    parser = skueue_cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = {}
    for name, command in sub.choices.items():
        for action in command._actions:
            if "--node" in action.option_strings:
                found[name] = action
    return found


ONE_DAEMON = {"join", "leave"}
"""Commands that act on the daemon named, not on whichever member answers."""


def test_every_node_option_is_a_seed_list_but_where_one_daemon_acts() -> None:
    options = node_options()
    assert {"enqueue", "dequeue", "peek", "stats", "health", "top", "consume"} <= set(options)
    assert set(options) >= ONE_DAEMON
    for name, action in options.items():
        if name in ONE_DAEMON:
            assert action.type is address and "," not in (action.metavar or ""), name
            continue
        assert action.type is seed_addresses, name
        assert "," in (action.metavar or ""), name  # the help shows that a list is taken


def test_a_seed_list_splits_at_commas_then_at_each_members_last_colon() -> None:
    assert parse_seed_list(" 127.0.0.1:1, [::1]:2,localhost:3,127.0.0.1:1") == [
        Address("127.0.0.1", 1), Address("::1", 2), Address("localhost", 3),
    ]  # fmt: skip
    assert seed_addresses("127.0.0.1:1,[::1]:2") == "127.0.0.1:1,[::1]:2"
    assert seed_list("127.0.0.1:1,[::1]:2") == ["127.0.0.1:1", "[::1]:2"]


@pytest.mark.parametrize("text", ["", ",", "127.0.0.1:1,nonsense", "127.0.0.1:1,host:99999"])
def test_a_bad_seed_list_is_refused_by_each_reader(text: str) -> None:
    with pytest.raises(AddressError):
        parse_seed_list(text)
    with pytest.raises(argparse.ArgumentTypeError):
        seed_addresses(text)
    with pytest.raises(BadAddress):
        seed_list(text)
