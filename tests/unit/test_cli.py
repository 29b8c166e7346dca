"""The command-line parsers (issue 8, item 18): every option has help text, and ``--help``
shows each option's default."""

from __future__ import annotations

import argparse

import pytest

from skueue.cli import skueue as skueue_cli
from skueue.cli import skueued as skueued_cli
from skueue.cli.args import shows

OWN_COMMANDS = ["enqueue", "dequeue", "stats", "join", "leave", "bench", "sim"]


def subparser(name: str) -> argparse.ArgumentParser:
    parser = skueue_cli.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise AssertionError("skueue has no subcommands")


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction | argparse._VersionAction)
    ]


PARSERS = [(name, lambda n=name: subparser(n)) for name in OWN_COMMANDS] + [
    ("skueued", skueued_cli.build_parser)
]


@pytest.mark.parametrize(("name", "make"), PARSERS, ids=[n for n, _ in PARSERS])
def test_every_option_has_help_and_shows_its_default(name: str, make: object) -> None:
    parser = make()  # type: ignore[operator]
    text = " ".join(parser.format_help().split())
    for action in options(parser):
        assert action.help, f"{name} {action.option_strings[0]} has no help text"
        if shows(action.default):
            shown = f"(default: {action.default})"
            assert shown in text or "default" in action.help, (
                f"{name} {action.option_strings[0]} does not show its default"
            )


@pytest.mark.parametrize(
    ("name", "option", "default"),
    [
        ("bench", "--clients", "4"),
        ("bench", "--ops", "2000"),
        ("bench", "--value-bytes", "100"),
        ("bench", "--seed", "0"),
        ("bench", "--timeout", "15.0"),
        ("dequeue", "--count", "1"),  # -n N, --count N
        ("enqueue", "--timeout", "15.0"),
        ("leave", "--timeout", "60.0"),
    ],
)
def test_issue_options_show_their_defaults(name: str, option: str, default: str) -> None:
    text = " ".join(subparser(name).format_help().split()).split("options:", 1)[1]
    after = text.split(f"{option} ", 1)[1].split(" --", 1)[0]
    assert f"(default: {default})" in after, after


@pytest.mark.parametrize(
    ("option", "default"),
    [("--structure", "queue"), ("--log-format", "console"), ("--log-level", "info")],
)
def test_skueued_options_show_their_defaults(option: str, default: str) -> None:
    text = " ".join(skueued_cli.build_parser().format_help().split()).split("options:", 1)[1]
    after = text.split(f"{option} ", 1)[1].split(" --", 1)[0]
    assert f"(default: {default})" in after, after
