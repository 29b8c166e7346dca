"""The key and token files (runtime/security/peer_auth.py, runtime/security/client_auth.py):
comments and blank lines are skipped, and each mistake is one error naming the option and
the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from skueue.runtime.errors import DaemonError
from skueue.runtime.security.client_auth import ClientTokens
from skueue.runtime.security.peer_auth import KEYS_MAX, ClusterKeys, generate_key


def test_a_key_file_takes_comments_and_up_to_keys_max_keys(tmp_path: Path) -> None:
    path = tmp_path / "k"
    new, old = generate_key(), generate_key()
    path.write_text(f"# rotating\n\n{new}\n  {old}  \n")
    assert ClusterKeys.load(path).keys == (bytes.fromhex(new), bytes.fromhex(old))
    path.write_text("\n".join(generate_key() for _ in range(KEYS_MAX + 1)))
    with pytest.raises(DaemonError, match=f"expected 1 to {KEYS_MAX} keys, not {KEYS_MAX + 1}"):
        ClusterKeys.load(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# only a comment\n", "expected 1 to 4 keys, not 0"),
        ("abc\n", "line 1: expected 64 hex digits"),
        (f"# x\n{'zz' * 32}\n", "line 2: expected 64 hex digits"),
        ("é" * 64, "line 1: expected 64 hex digits"),
    ],
)
def test_a_bad_key_file_is_one_error_with_its_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "k"
    path.write_text(text)
    with pytest.raises(DaemonError, match=message) as raised:
        ClusterKeys.load(path)
    assert str(raised.value).startswith(f"--cluster-key {path}")


def test_an_unreadable_file_names_its_option(tmp_path: Path) -> None:
    with pytest.raises(DaemonError, match="--client-tokens .*missing: cannot read it"):
        ClientTokens.load(tmp_path / "missing")
    (tmp_path / "bin").write_bytes(b"\xff\xfe")
    with pytest.raises(DaemonError, match="--cluster-key .*bin: cannot read it"):
        ClusterKeys.load(tmp_path / "bin")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("reader " + "x" * 20, "line 1: expected ROLE TOKEN"),
        ("client short", "line 1: expected ROLE TOKEN"),
        ("admin", "line 1: expected ROLE TOKEN"),
    ],
)
def test_a_bad_token_line_is_one_error(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "t"
    path.write_text(line + "\n")
    with pytest.raises(DaemonError, match=message):
        ClientTokens.load(path)


def test_tokens_keep_their_roles(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_text(f"# team\nclient {'c' * 16}\nadmin {'a' * 16}\n")
    tokens = ClientTokens.load(path)
    assert (tokens.role_of("c" * 16), tokens.role_of("a" * 16), tokens.role_of("b" * 16)) == (
        "client",
        "admin",
        None,
    )
