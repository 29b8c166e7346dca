"""``skueue remove-member``: make the cluster forget members that will never come back.

    skueue remove-member MEMBER [MEMBER...] [--node ADDR] [--timeout S] [--json]

MEMBER is a process id or the address a member listens at.  An admin command (an admin
token where the daemon wants tokens).  The daemon refuses, with the reason, a member
that still answers, or one that holds part of the ring (the members wait for it: start
it again from its data directory); see runtime/member_removal.py.  Exit 0 once the
members are forgotten (or were gone already), 1 when refused, 2 for a bad argument.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from skueue.cli.args import fail
from skueue.cli.client_cmds import add_node_option, add_timeout_option, with_client
from skueue.client.api import DEFAULT_REQUEST_TIMEOUT_S, Client
from skueue.host.requests import MEMBER_NAME_CHARS_MAX, REMOVE_MEMBERS_MAX

PROG = "skueue remove-member"


def member_name(text: str) -> str:
    if not 0 < len(text) <= MEMBER_NAME_CHARS_MAX:
        raise argparse.ArgumentTypeError(
            f"a member is a process id or an address of 1 to {MEMBER_NAME_CHARS_MAX} characters"
        )
    return text


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "remove-member",
        help="make the cluster forget members that will never come back (admin)",
        description="Make the cluster forget members that will never come back: each a "
        "process id or the address it listened at.  Refused for a member that still "
        "answers (it leaves with skueue leave) and for one that holds part of the ring "
        "(restart it from its data directory: without replication the cluster cannot go "
        "on without it).",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    p.add_argument(
        "members",
        nargs="+",
        type=member_name,
        metavar="MEMBER",
        help=f"process id or address (at most {REMOVE_MEMBERS_MAX})",
    )
    p.add_argument("--json", action="store_true", help="print what was removed as JSON")
    p.set_defaults(run=run_remove_member)


def run_remove_member(args: argparse.Namespace) -> int:
    if len(args.members) > REMOVE_MEMBERS_MAX:
        fail(PROG, f"name at most {REMOVE_MEMBERS_MAX} members at once (REMOVE_MEMBERS_MAX)")

    async def body(q: Client) -> dict[str, Any]:
        return await q.remove_member(*args.members)

    result = with_client(PROG, args, body, admin=True)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for removed in result.get("removed", []):
        print(f"removed {removed['member']} (at {removed['address']}): it held "
              f"{removed['held']}")  # fmt: skip
    for gone in result.get("gone_already", []):
        print(f"{gone} was gone already")
    return 0
