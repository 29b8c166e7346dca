"""``skueued --config FILE`` and ``--print-config`` (issue 15, item 3).

The keys come from the parser, so an option added later is a key with no other code;
the command line wins over the file; a bad file is one line naming the key, exit 2.
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import pytest

from skueue.cli import config_file, skueued, skueued_options


@pytest.fixture(autouse=True)
def no_log_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() sets structlog up on the stderr of the moment, which is capsys's here: later
    tests would log into a closed file."""
    monkeypatch.setattr(skueued, "configure", lambda *args, **kwargs: None)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    # Never without --print-config: a check that let a file through must not start a daemon.
    assert "--print-config" in argv
    try:
        code = skueued.main(argv)
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run([*argv, "--print-config"], capsys)
    assert code == 0, err
    return out


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "skueued.toml"
    path.write_text(text)
    return path


def test_the_printed_configuration_reads_back_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = printed(
        ["--listen", "127.0.0.1:7400", "--peers", "127.0.0.1:7401,127.0.0.1:7402",
         "--data-dir", str(tmp_path / 'data "quoted" \\ dir'), "--id", "node-ä",
         "--fsync", "interval=50", "--value-bytes-max", "4096", "--log-level", "debug",
         "--structure", "stack", "--snapshot-bytes", "8192", "--stand-in-ports", "7410-7419"],
        capsys,
    )  # fmt: skip
    table = tomllib.loads(first)
    assert table["peers"] == "127.0.0.1:7401,127.0.0.1:7402"
    assert table["id"] == "node-ä" and table["value-bytes-max"] == 4096
    assert table["stand-in-ports"] == "7410-7419"
    assert table["data-dir"].endswith('data "quoted" \\ dir')
    assert table["in-memory"] is False and "advertise" not in table
    again = printed(["--config", str(write(tmp_path, first))], capsys)
    assert again == first


def test_the_command_line_wins_over_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, 'listen = "127.0.0.1:7400"\nlog-level = "debug"\nin-memory = true\n')
    table = tomllib.loads(printed(["--config", str(path), "--log-level", "warning"], capsys))
    assert table["listen"] == "127.0.0.1:7400"  # the file's: required, yet not on the line
    assert table["log-level"] == "warning"
    assert table["in-memory"] is True


def test_failover_and_replicas_unset_are_decided_at_start_and_a_file_sets_either_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tomllib.loads(printed(["--listen", "127.0.0.1:7400"], capsys))
    assert "replicas" not in table and "failover" not in table  # runtime/replica_count.py
    for value in (True, False):
        path = write(tmp_path, f"listen = \"127.0.0.1:7400\"\nfailover = {str(value).lower()}\n")
        assert tomllib.loads(printed(["--config", str(path)], capsys))["failover"] is value
    table = tomllib.loads(printed(["--config", str(path), "--failover"], capsys))
    assert table["failover"] is True  # the command line wins, either way
    path = write(tmp_path, 'listen = "127.0.0.1:7400"\nfailover = 1\n')
    code, _, err = run(["--config", str(path), "--print-config"], capsys)
    assert (code, err.endswith("failover: expected true or false, not 1\n")) == (2, True), err


def test_a_list_option_takes_an_array(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, 'listen = "127.0.0.1:1"\npeers = ["127.0.0.1:2", "127.0.0.1:3"]\n')
    table = tomllib.loads(printed(["--config", str(path)], capsys))
    assert table["peers"] == "127.0.0.1:2,127.0.0.1:3"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('log_level = "debug"', "unknown key 'log_level' (keys are spelled with '-': 'log-level')"),
        ('lisen = "127.0.0.1:1"', "unknown key 'lisen' (did you mean 'listen'?)"),
        ('log-level = "verbose"', "log-level: 'verbose' is not one of debug, info, warning, error"),
        ('listen = "nonsense"', "listen: bad address 'nonsense'"),
        ('fsync = "sometimes"', "fsync: expected always, batch, interval=MS or never"),
        ("in-memory = 1", "in-memory: expected true or false, not 1"),
        ("value-bytes-max = 0", "value-bytes-max: 0 is not between 1 and"),
        ("value-bytes-max = true", "value-bytes-max: expected a string or a number, not true"),
        ("snapshot-bytes = 100", "snapshot-bytes: must be at least 4096, not 100"),
        ('peers = ["127.0.0.1:2", 3]', "peers: expected an array of strings"),
        ("[tls]\ncert = 'x'", "unknown key 'tls'"),
        ("listen = ", "not valid TOML: Invalid value"),
        ("config = 'other.toml'", "unknown key 'config'"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key(
    text: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, f'listen = "127.0.0.1:1"\n{text}\n' if "listen" not in text else text)
    code, out, err = run(["--config", str(path), "--print-config"], capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"skueued: error: {path}: {expected}"), err


def test_a_file_over_the_size_limit_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_file, "CONFIG_FILE_BYTES_MAX", 64)
    path = write(tmp_path, 'listen = "127.0.0.1:1"\n' + "# padding\n" * 10)
    code, _, err = run(["--config", str(path), "--print-config"], capsys)
    assert (code, err) == (2, f"skueued: error: {path}: larger than 64 bytes\n")
    assert config_file.CONFIG_FILE_BYTES_MAX == 64 and path.stat().st_size > 64


def test_the_default_size_limit_is_one_mib(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, 'listen = "127.0.0.1:1"\n')
    with path.open("a") as f:
        f.write("#" * (1024 * 1024 - path.stat().st_size - 1) + "\n")
    assert path.stat().st_size == config_file.CONFIG_FILE_BYTES_MAX == 1024 * 1024
    assert tomllib.loads(printed(["--config", str(path)], capsys))["listen"] == "127.0.0.1:1"
    with path.open("a") as f:
        f.write("\n")
    code, _, err = run(["--config", str(path), "--print-config"], capsys)
    assert (code, err) == (2, f"skueued: error: {path}: larger than 1048576 bytes\n")


def test_a_missing_or_binary_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["--config", str(tmp_path / "none.toml"), "--print-config"], capsys)
    assert (code, err) == (2, f"skueued: error: cannot read {tmp_path / 'none.toml'}: "
                              "No such file or directory\n")  # fmt: skip
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    code, _, err = run(["--config", str(binary), "--print-config"], capsys)
    assert (code, err) == (2, f"skueued: error: {binary}: not UTF-8 text\n")


def test_every_option_is_a_key_including_ones_added_later(tmp_path: Path) -> None:
    parser = skueued_options.build_parser()
    keys = config_file.file_options(parser)
    long = {s[2:] for a in parser._actions for s in a.option_strings if s.startswith("--")}
    # --failover/--no-failover is one key: failover = true or false.
    both_ways = (k for k, a in keys.items() if isinstance(a, argparse.BooleanOptionalAction))
    negations = {f"no-{k}" for k in both_ways}
    assert negations == {"no-failover"}
    assert set(keys) == long - {"help", "version", "config", "print-config"} - negations
    assert keys["id"].dest == "process_id"
    assert {"tls-cert", "tls-ca", "plaintext", "metrics"} <= set(keys)  # added after the file
    # An option added to the parser later is a key at once.
    parser.add_argument("--future-file", metavar="FILE")
    parser.add_argument("--future-flag", action="store_true")
    path = write(tmp_path, 'listen = "127.0.0.1:1"\nfuture-file = "c.pem"\nfuture-flag = true\n')
    args = config_file.parse_args(parser, ["--config", str(path)], "skueued")
    assert (args.future_file, args.future_flag, args.listen) == ("c.pem", True, "127.0.0.1:1")
    rendered = tomllib.loads(config_file.render(parser, args))
    assert rendered["future-file"] == "c.pem" and rendered["future-flag"] is True
