"""Bad values on the command line (issue 28, item 16): every numeric option of every
command that talks to a daemon refuses a bad value with exit 2 and one line that names
the option and the limit.  Before, ``dequeue -w 99999`` and ``consume --lease 99999999``
reached the client and exited 1, ``consume --max-deliveries 5000`` and ``--timeout
1e17`` ended in tracebacks, and ``-w -1`` or ``--timeout -1`` (in a command with ``-0``)
said ``expected one argument``.

The table is by option: a value listed is bad for every command that has the option,
and :func:`test_every_numeric_option_of_a_client_command_is_in_the_table` finds the
numeric options by trying them, so a new one cannot be left out."""

from __future__ import annotations

import argparse

import pytest

from skueue.cli import skueue as skueue_cli
from tests.e2e.daemons import free_ports

NOT_CLIENT_COMMANDS = {"sim", "analyze", "experiment", "keygen", "certs"}
# Positionals a command needs before its options are looked at.
POSITIONALS = {
    "enqueue": ["x"], "create": ["jobs"], "delete": ["jobs"], "consume": ["jobs"],
    "dlq": ["jobs"], "join": ["127.0.0.1:1"],
}  # fmt: skip

POSITIVE = "must be a positive number"
WHOLE = "is not a whole number"


def seconds(limit_s: str, name: str) -> list[tuple[str, str]]:
    return [
        ("0", POSITIVE), ("-1", POSITIVE), ("-0.5", POSITIVE), ("x", "is not a number"),
        ("nan", POSITIVE), ("inf", POSITIVE), ("-inf", POSITIVE),
        (str(float(limit_s) + 1), f"is over the limit of {limit_s} s ({name})"),
        ("1e17", f"is over the limit of {limit_s} s ({name})"),
    ]  # fmt: skip


def counts(low: int, high: int | None = None, name: str = "") -> list[tuple[str, str]]:
    bad = [(str(low - 1), f"must be at least {low}"), ("-3", f"must be at least {low}"),
           ("x", WHOLE), ("1.5", WHOLE), ("", WHOLE)]  # fmt: skip
    if high is not None:
        bad.append((str(high + 1), f"is over the limit of {high} ({name})"))
    return bad


BAD_VALUES: dict[str, list[tuple[str, str]]] = {
    "--timeout": seconds("3600", "REQUEST_TIMEOUT_S_MAX"),
    "--wait": seconds("3600", "WAIT_MS_MAX"),
    "--lease": seconds("43200", "LEASE_MS_MAX"),
    "--idle": [(v, n) for v, n in seconds("1", "") if "over" not in n],  # no upper limit
    "--count": counts(1),
    "--prefetch": counts(1),
    "--priority": counts(0, 15, "PRIORITIES_MAX - 1"),
    "--priorities": counts(1, 16, "PRIORITIES_MAX"),
    "--max-deliveries": [("-3", "must be at least"), ("x", WHOLE), ("1.5", WHOLE),
                         ("1001", "is over the limit of 1000 (DELIVERY_LIMIT_MAX)")],
    "--interval": [("0.1", "must be at least 0.2 (INTERVAL_MIN_S)"),
                   ("-1", "must be at least 0.2"), ("x", "is not a number"),
                   ("inf", "not a finite number"), ("nan", "not a finite number")],
    # skueue bench, the load generator
    "--spawn": counts(1), "--clients": counts(1), "--ops": counts(0),
    "--in-flight": counts(1), "--batch": counts(1), "--value-bytes": counts(1),
    "--seed": [("x", "invalid int value"), ("1.5", "invalid int value")],
    "--replicas": [(v, "expected 1, 3 or 5") for v in ("0", "2", "4", "x", "1.5", "")],
    "--enqueue-ratio": [("-0.1", "is not in [0, 1]"), ("1.5", "is not in [0, 1]"),
                        ("x", "is not a number"), ("nan", "is not in [0, 1]")],
}  # fmt: skip


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = skueue_cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {n: p for n, p in sub.choices.items() if n not in NOT_CLIENT_COMMANDS}


def numeric(action: argparse.Action) -> bool:
    """Whether an option takes a number: its type takes "1" and refuses "x"."""
    if action.type is None or not action.option_strings:
        return False
    try:
        action.type("1")  # type: ignore[operator]
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return False
    try:
        action.type("x")  # type: ignore[operator]
    except (argparse.ArgumentTypeError, ValueError):
        return True
    return False


def long_name(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)


def cases() -> list[tuple[str, list[str], str, str, str]]:
    found = []
    for name, parser in commands().items():
        for action in parser._actions:
            if not numeric(action) or long_name(action) not in BAD_VALUES:
                continue
            for flag in action.option_strings:
                for value, needle in BAD_VALUES[long_name(action)]:
                    found.append((name, POSITIONALS.get(name, []), flag, value, needle))
    return found


def test_every_numeric_option_of_a_client_command_is_in_the_table() -> None:
    missing = [
        f"{name} {long_name(a)}"
        for name, parser in commands().items()
        for a in parser._actions
        if numeric(a) and long_name(a) not in BAD_VALUES
    ]
    assert not missing, f"numeric options with no bad values to try: {missing}"
    timed = {c[0] for c in cases() if c[2] == "--timeout"}
    assert timed >= {"enqueue", "dequeue", "peek", "create", "delete", "join", "leave",
                     "stats", "health", "top", "consume", "dlq", "bench"}  # fmt: skip


@pytest.mark.parametrize(
    ("command", "positionals", "flag", "value", "needle"),
    cases(),
    ids=[f"{c[0]} {c[2]} {c[3] or 'empty'}" for c in cases()],
)
def test_a_bad_value_is_exit_2_and_one_line_naming_the_limit(
    capsys: pytest.CaptureFixture[str],
    command: str,
    positionals: list[str],
    flag: str,
    value: str,
    needle: str,
) -> None:
    (port,) = free_ports(1)  # should a bad value get through, it finds nobody there
    node = ["--nodes" if command == "bench" else "--node", f"127.0.0.1:{port}"]
    args = [command, *positionals, *node, flag, value]
    if command == "top":
        args.append("--once")
    with pytest.raises(SystemExit) as exit_:
        skueue_cli.main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"skueue {command}: error: argument " in lines[0], lines[0]
    assert long_name_of(flag, command) in lines[0] and needle in lines[0], lines[0]


def long_name_of(flag: str, command: str) -> str:
    action = commands()[command]._option_string_actions[flag]
    return long_name(action)


def test_a_value_that_looks_like_a_negative_number_is_the_options_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``-0`` (NUL output) made argparse take every ``-1`` for an option; the option
    before it now takes it, and ``--`` still ends the options."""
    parser = commands()["dequeue"]
    with pytest.raises(SystemExit):
        parser.parse_args(["-w", "-1"])
    assert "-1 must be a positive number" in capsys.readouterr().err
    args = parser.parse_args(["-0", "-n", "2"])
    assert args.null and args.count == 2
    args, rest = parser.parse_known_args(["-n", "2", "--", "-w", "-1"])
    assert args.count == 2 and args.wait is None and rest == ["--", "-w", "-1"]
