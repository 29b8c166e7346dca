"""Which daemons a command talks to: ``--node`` and ``$SKUEUE_NODE``, a seed list.

A seed list is ``HOST:PORT[,HOST:PORT...]``: the client takes the first member that
answers, in order.  Every command that talks to a daemon (``top`` too), ``$SKUEUE_NODE``
and ``connect()`` parse it with one parser (:func:`skueue.host.address.parse_seed_list`),
so a list means the same wherever it is given.
"""

from __future__ import annotations

import argparse
import os

from skueue.cli.args import fail
from skueue.client.api import DEFAULT_NODE
from skueue.host.address import AddressError, parse_seed_list


def seed_addresses(text: str) -> str:
    """An argparse type: a seed list, each member checked here so that a bad one is a
    usage error."""
    try:
        return ",".join(str(a) for a in parse_seed_list(text))
    except AddressError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def default_node() -> str:
    """``$SKUEUE_NODE`` (a seed list, like ``--node``) or the default; a bad one is a usage
    error."""
    node = os.environ.get("SKUEUE_NODE")
    if not node:
        return DEFAULT_NODE
    try:
        return seed_addresses(node)
    except argparse.ArgumentTypeError as e:
        fail("skueue", f"{e} (from $SKUEUE_NODE)")


def one_node(prog: str, given: str | None) -> str:
    """The one daemon a command acts on (join, leave): ``--node``, else ``$SKUEUE_NODE``
    when it names a single daemon.  A list there is refused: the first member to answer
    would be the one to leave."""
    node = given or default_node()
    if "," in node:
        fail(prog, f"$SKUEUE_NODE names several daemons ({node}); this command acts on "
             "one: give it with --node ADDR")
    return node
