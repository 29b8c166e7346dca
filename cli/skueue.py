"""``skueue``: the command-line tool."""

from __future__ import annotations

import sys

from skueue.cli import (
    analyze_cmd,
    bench_cmd,
    certs_cmd,
    client_cmds,
    experiment_cmd,
    health_cmd,
    keygen_cmd,
    lease_cmds,
    member_cmds,
    queue_cmds,
    sim_cmd,
    top_cmd,
)
from skueue.cli.args import EXIT_INTERRUPTED, Parser, add_version


def build_parser() -> Parser:
    parser = Parser(prog="skueue", description="Skueue: a peer-to-peer distributed queue.")
    add_version(parser, "skueue")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    client_cmds.add_parsers(sub)
    member_cmds.add_parser(sub)
    queue_cmds.add_parsers(sub)
    health_cmd.add_parser(sub)
    top_cmd.add_parser(sub)
    lease_cmds.add_parsers(sub)
    keygen_cmd.add_parser(sub)
    certs_cmd.add_parser(sub)
    sim_cmd.add_parser(sub)
    bench_cmd.add_parser(sub)
    analyze_cmd.add_parser(sub)
    experiment_cmd.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        code: int = args.run(args)
    except KeyboardInterrupt:
        # Ctrl-C outside a request (reading stdin, starting up): quiet, like inside one.
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `skueue dequeue -n 100 | head`): not an error of ours.
        sys.stderr.close()
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
