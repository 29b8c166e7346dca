"""The README's command synopses match the parsers, and stale claims are gone (issue 8,
items 18 and 23)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from skueue.cli import skueue as skueue_cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DEPLOY = (ROOT / "deploy" / "README.md").read_text()


def synopsis(command: str) -> str:
    """The README's synopsis of ``skueue COMMAND`` (in the command-line section, or the
    simulator's): its line and the indented ones after."""
    start = README.index("### The command line")
    end = README.index("### History format")
    match = re.search(
        rf"^skueue {command}\b.*(?:\n {{8,}}\S.*)*", README[start:end], re.MULTILINE
    )
    assert match, f"README has no synopsis of skueue {command}"
    return match.group(0)


def subparser(name: str) -> argparse.ArgumentParser:
    for action in skueue_cli.build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise AssertionError("skueue has no subcommands")


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    skip = argparse._HelpAction | argparse._VersionAction
    return [a for a in parser._actions if a.option_strings and not isinstance(a, skip)]


def named(parser: argparse.ArgumentParser, flag: str) -> bool:
    return any(flag in a.option_strings for a in parser._actions)


@pytest.mark.parametrize(
    "command",
    ["enqueue", "dequeue", "consume", "dlq", "stats", "join", "leave", "health", "top", "bench",
     "sim", "configure", "ls", "info"],  # fmt: skip
)
def test_synopsis_names_every_option_and_only_real_ones(command: str) -> None:
    text = synopsis(command)
    parser = subparser(command)
    for flag in re.findall(r"(?<![\w-])(--?[a-zA-Z0-9][\w-]*)", text):
        assert named(parser, flag), f"README's skueue {command} has {flag}, the parser has not"
    for action in options(parser):
        assert any(f in text for f in action.option_strings), (
            f"README's skueue {command} synopsis lacks {action.option_strings}"
        )


@pytest.mark.parametrize(
    ("text", "stale"),
    [
        (README, "will drive later"),
        (README, "never a traceback"),
        (DEPLOY, "restarting them all"),
    ],
)
def test_stale_claims_are_gone(text: str, stale: str) -> None:
    assert stale not in text
