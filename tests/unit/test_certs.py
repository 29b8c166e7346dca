"""``skueue certs`` and the daemon's TLS files (issue 13): a CA made once and reused,
members' and clients' certificates with their roles and addresses, private keys mode
0600, nothing replaced without --force; bad TLS files are one line at start."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from skueue.cli.skueue import main
from skueue.runtime.errors import DaemonError
from skueue.runtime.security.tls import DaemonTls, TlsFiles


def unit_of(path: Path) -> str:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    return str(cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value)


def test_certs_makes_a_ca_once_and_certificates_with_roles(tmp_path: Path) -> None:
    d = tmp_path / "tls"
    assert main(["certs", str(d), "--host", "10.0.0.1,node1", "--client", "alice",
                 "--admin", "ops"]) == 0  # fmt: skip
    for name in ("ca", "10.0.0.1", "alice", "ops"):
        assert (d / f"{name}.key").stat().st_mode & 0o777 == 0o600
    assert [unit_of(d / f"{n}.crt") for n in ("10.0.0.1", "alice", "ops")] == [
        "peer", "client", "admin"
    ]  # fmt: skip
    cert = x509.load_pem_x509_certificate((d / "10.0.0.1.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(n.value) for n in names] == ["10.0.0.1", "node1"]
    ca = (d / "ca.crt").read_bytes()
    with pytest.raises(SystemExit) as refused:
        main(["certs", str(d), "--client", "alice"])
    assert refused.value.code == 2
    assert main(["certs", str(d), "--client", "alice", "--force", "--host", "10.0.0.2"]) == 0
    assert (d / "ca.crt").read_bytes() == ca  # the same CA signs the newcomers
    tls = DaemonTls.load(TlsFiles(d / "10.0.0.2.crt", d / "10.0.0.2.key", d / "ca.crt"))
    assert tls.peer_issuers is not None and tls.server.verify_mode == ssl.CERT_OPTIONAL


def test_bad_tls_files_are_one_line(tmp_path: Path) -> None:
    main(["certs", str(tmp_path), "--host", "127.0.0.1"])
    crt, key, ca = tmp_path / "127.0.0.1.crt", tmp_path / "127.0.0.1.key", tmp_path / "ca.crt"
    (tmp_path / "junk").write_text("not a certificate\n")
    for files, says in (
        (TlsFiles(tmp_path / "missing.crt", key), "--tls-cert"),
        (TlsFiles(crt, tmp_path / "ca.key"), "KEY_VALUES_MISMATCH"),
        (TlsFiles(crt, key, tmp_path / "junk"), "--tls-ca"),
    ):
        with pytest.raises(DaemonError, match=says) as e:
            DaemonTls.load(files)
        assert "\n" not in str(e.value)
    assert DaemonTls.load(TlsFiles(crt, key, ca, ca)).client_issuers is not None
