"""The deploy files start skueued the secure way (issue 13): the systemd unit's and the
container's example command lines parse with skueued's own parser and name the cluster
key, the client tokens and TLS (mutual, with the CA), and never --plaintext."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skueue.cli.skueue import build_parser as skueue_parser
from skueue.cli.skueued import tls_options
from skueue.cli.skueued_options import build_parser

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


def unit_settings() -> dict[str, list[str]]:
    """The unit's KEY=value lines, continuation lines joined, by key (a key may repeat)."""
    text = (DEPLOY / "skueued.service").read_text().replace("\\\n", " ")
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            settings.setdefault(key, []).append(value)
    return settings


def env_example() -> dict[str, str]:
    lines = (DEPLOY / "skueued.env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_the_unit_leaves_on_stop_only_when_asked() -> None:
    """Issue 15 item 7: ExecStop runs ``skueue leave`` with a timeout, opt-in
    (SKUEUE_LEAVE_ON_STOP, default no: systemd runs ExecStop on restart too, and a member
    that left cannot come back), and TimeoutStopSec leaves the leave its time."""
    settings = unit_settings()
    (stop,) = settings["ExecStop"]
    assert stop == "/opt/skueue/deploy/skueued-stop"
    script = DEPLOY / "skueued-stop"
    assert script.stat().st_mode & 0o111, "the ExecStop script must be executable"
    assert "leave --node" in script.read_text()
    defaults = dict(
        pair.split("=", 1) for value in settings["Environment"] for pair in value.split()
    )
    assert defaults["SKUEUE_LEAVE_ON_STOP"] == "no" == env_example()["SKUEUE_LEAVE_ON_STOP"]
    leave_s = int(defaults["SKUEUE_LEAVE_TIMEOUT_S"])
    assert leave_s == int(env_example()["SKUEUE_LEAVE_TIMEOUT_S"])
    assert int(settings["TimeoutStopSec"][0]) >= leave_s + 10
    assert settings["StateDirectory"] == ["skueue"]
    assert "--data-dir /var/lib/skueue" in settings["ExecStart"][0]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    """``systemd-analyze verify`` finds nothing to say about the unit, with its
    /opt/skueue paths pointed at this checkout (it checks that the commands exist)."""
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "skueued").exists(), "the project is not installed in this venv"
    text = (DEPLOY / "skueued.service").read_text()
    text = text.replace("/opt/skueue/.venv/bin", str(bin_dir))
    text = text.replace("/opt/skueue/deploy", str(DEPLOY))
    (tmp_path / "skueued.service").write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", "./skueued.service"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done
