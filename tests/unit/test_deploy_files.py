"""The deploy files start skueued the secure way (issue 13): the systemd unit's and the
container's example command lines parse with skueued's own parser and name the cluster
key, the client tokens and TLS (mutual, with the CA), and never --plaintext."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from skueue.cli.skueue import build_parser as skueue_parser
from skueue.cli.skueued import build_parser, tls_options

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SECURE = ("--cluster-key", "--client-tokens", "--tls-cert", "--tls-key", "--tls-ca")


def unit_command() -> list[str]:
    text = (DEPLOY / "skueued.service").read_text()
    match = re.search(r"^ExecStart=(.*?)(?<!\\)$", text, re.MULTILINE | re.DOTALL)
    assert match, "no ExecStart"
    env = dict(
        line.split("=", 1)
        for line in (DEPLOY / "skueued.env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    command = match.group(1).replace("\\\n", " ")
    command = re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), "x"), command)
    return shlex.split(command)[1:]


def container_command() -> list[str]:
    text = (DEPLOY / "README.md").read_text()
    match = re.search(r"docker run .*?skueued \\\n(.*?)\n```", text, re.DOTALL)
    assert match, "no docker run example"
    return shlex.split(match.group(1).replace("\\\n", " "))


@pytest.mark.parametrize("command", [unit_command, container_command])
def test_a_deploy_command_line_is_secure_and_parses(command: object) -> None:
    argv = command()  # type: ignore[operator]
    args = build_parser().parse_args(argv)
    for option in SECURE:
        assert option in argv, f"{command.__name__} lacks {option}"  # type: ignore[attr-defined]
    assert not args.plaintext
    files = tls_options(args)
    assert files is not None and files.ca is not None


def test_the_containers_healthcheck_asks_the_metrics_address_its_example_gives() -> None:
    """Issue 15 item 7: the image has a HEALTHCHECK, and it asks the --metrics address the
    documented run command serves; the check itself is a real skueue health command."""
    text = (DEPLOY / "Containerfile").read_text()
    match = re.search(r'HEALTHCHECK .*?CMD (\[.*?\])', text, re.DOTALL)
    assert match, "no HEALTHCHECK"
    argv = json.loads(match.group(1))
    assert argv[:2] == ["skueue", "health"]
    args = skueue_parser().parse_args(argv[1:])
    assert args.metrics == "127.0.0.1:9464"
    run = container_command()
    assert run[run.index("--metrics") + 1] == args.metrics
    assert "\nUSER skueue\n" in text and "spark" not in text.split("FROM", 1)[1].lower()
