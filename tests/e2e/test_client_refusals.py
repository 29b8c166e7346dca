"""What the command line says when a daemon refuses it (issue 28, item 12), on real
daemons: a wrong ``$SKUEUE_TOKEN`` is "refused" (it once got the no-token line, "set
$SKUEUE_TOKEN", though it was set); a client certificate shown to a daemon without
``--tls-client-ca`` is said not to count; a token shown to a daemon that takes only
certificates is said to be of no use.  Each is one line, exit 1, and the daemon serves
on."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from skueue.runtime.security.peer_auth import generate_key
from tests.e2e.certs import make_certs
from tests.e2e.daemons import Cluster
from tests.e2e.test_cli import ROOT, RUN_TIMEOUT_S

StartCluster = Callable[..., Cluster]
TLS_ENV = ("SKUEUE_TOKEN", "SKUEUE_TLS_CA", "SKUEUE_TLS_CERT", "SKUEUE_TLS_KEY", "SKUEUE_NODE")


def enqueue(node: str, **env: str) -> tuple[int, str]:
    clean = {k: v for k, v in os.environ.items() if k not in TLS_ENV}
    out = subprocess.run(
        [sys.executable, "-m", "skueue.cli.skueue", "enqueue", "--node", node, "x"],
        capture_output=True, text=True, cwd=ROOT, env={**clean, **env},
        timeout=RUN_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) <= 1, out.stderr
    return out.returncode, out.stderr.strip()


def test_a_wrong_token_and_an_unchecked_certificate_are_told_apart_from_no_token(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    certs = make_certs(tmp_path / "tls")
    tokens = tmp_path / "tokens"
    good = generate_key()
    tokens.write_text(f"client {good}\n")
    # Peers' certificates checked (--tls-ca), clients' not (no --tls-client-ca): the
    # daemon asks for a certificate, and a client's signed by the CA gets through TLS.
    args = ("--client-tokens", str(tokens), "--in-memory", *certs.daemon_args())
    node = skueued_cluster(1, "queue", args).addresses[0]
    tls = {"SKUEUE_TLS_CA": str(certs.ca)}
    crt, key = certs.pair("alice")
    shown = {**tls, "SKUEUE_TLS_CERT": str(crt), "SKUEUE_TLS_KEY": str(key)}

    code, none = enqueue(node, **tls)
    assert code == 1 and "serves only clients with a token" in none, none
    assert "set $SKUEUE_TOKEN" in none

    code, wrong = enqueue(node, **tls, SKUEUE_TOKEN="y" * 32)
    assert code == 1 and "the token sent was refused" in wrong, wrong
    assert "set $SKUEUE_TOKEN" not in wrong

    code, cert = enqueue(node, **shown)
    assert code == 1, cert
    assert "does not check TLS client certificates" in cert and "does not count" in cert, cert

    assert len({none, wrong, cert}) == 3
    assert enqueue(node, **shown, SKUEUE_TOKEN=good) == (0, "")  # and it serves on


def test_a_token_shown_to_a_daemon_that_takes_only_certificates(
    skueued_cluster: StartCluster, tmp_path: Path
) -> None:
    certs = make_certs(tmp_path / "tls")
    args = ("--in-memory", *certs.daemon_args(client_ca=True))
    node = skueued_cluster(1, "queue", args).addresses[0]
    code, said = enqueue(node, SKUEUE_TLS_CA=str(certs.ca), SKUEUE_TOKEN="z" * 32)
    assert code == 1 and "takes no tokens" in said and "--tls-client-ca" in said, said
