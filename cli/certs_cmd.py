"""``skueue certs``: a small CA, and TLS certificates for members and clients (issue 13).

    skueue certs DIR --host ADDR[,NAME...] ... [--client NAME ...] [--admin NAME ...]

Makes ``DIR/ca.crt`` and ``DIR/ca.key`` the first time (and signs with them afterwards),
then for each ``--host`` a member's certificate ``DIR/NAME.crt`` and key ``DIR/NAME.key``
(``OU=peer``; every address and name given goes in its subjectAltName, so clients can
check it), and for each ``--client`` or ``--admin`` a client certificate (``OU=client``
or ``OU=admin``: the role a daemon with ``--tls-client-ca`` gives it; runtime/security/tls.py).
Keys are written with mode 0600; an existing file is not replaced unless ``--force``.

Keys are ECDSA P-256 (fast handshakes, small certificates).  Give each daemon
``--tls-cert DIR/HOST.crt --tls-key DIR/HOST.key --tls-ca DIR/ca.crt`` and clients
``--tls-ca DIR/ca.crt`` (``$SKUEUE_TLS_CA``); keep ``ca.key`` off the members.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from skueue.cli.args import fail, positive_int

CA_DAYS = 3650
DAYS = 825
CA_NAME = "ca"

Key = ec.EllipticCurvePrivateKey


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "certs",
        help="make a CA and TLS certificates for skueued and its clients",
        description="Make DIR/ca.crt and DIR/ca.key if missing, then a certificate and key "
        "per --host (members: OU=peer), --client (OU=client) and --admin (OU=admin).",
    )
    p.add_argument("dir", metavar="DIR", help="where the CA and the certificates live")
    p.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="ADDR[,NAME...]",
        help="a member: its IP addresses and DNS names, comma-separated; the first names "
        "the files (repeatable)",
    )
    p.add_argument("--client", action="append", default=[], metavar="NAME",
                   help="a client certificate with the client role (repeatable)")  # fmt: skip
    p.add_argument("--admin", action="append", default=[], metavar="NAME",
                   help="a client certificate with the admin role (repeatable)")  # fmt: skip
    p.add_argument("--days", type=positive_int, default=DAYS, help="validity of new certificates")
    p.add_argument("--force", action="store_true", help="replace existing certificates")
    p.set_defaults(run=run_certs)


def run_certs(args: argparse.Namespace) -> int:
    prog = "skueue certs"
    directory = Path(args.dir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        ca_key, ca_cert, made = ensure_ca(directory)
        if made:
            print(f"made a CA: {directory / 'ca.crt'} (keep {directory / 'ca.key'} safe)",
                  file=sys.stderr)  # fmt: skip
        jobs = [(h.split(",")[0], [n for n in h.split(",") if n], "peer") for h in args.host]
        jobs += [(name, [], "client") for name in args.client]
        jobs += [(name, [], "admin") for name in args.admin]
        for name, names, unit in jobs:
            if not name or "/" in name or name == CA_NAME:
                fail(prog, f"bad certificate name {name!r}")
            crt, key = directory / f"{name}.crt", directory / f"{name}.key"
            if not args.force and (crt.exists() or key.exists()):
                fail(prog, f"{crt} exists: pass --force to replace it")
            cert_key, cert = issue(ca_key, ca_cert, name, unit, names, args.days)
            write_pair(crt, key, cert, cert_key)
            print(f"wrote {crt} and {key} (OU={unit})", file=sys.stderr)
    except OSError as e:
        fail(prog, f"{e.filename}: {e.strerror}", code=1)
    except ValueError as e:
        fail(prog, str(e))
    return 0


def ensure_ca(directory: Path) -> tuple[Key, x509.Certificate, bool]:
    """The CA of ``directory``, made if it has none (True)."""
    crt, key = directory / f"{CA_NAME}.crt", directory / f"{CA_NAME}.key"
    if crt.exists() and key.exists():
        loaded = serialization.load_pem_private_key(key.read_bytes(), password=None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key}: not an EC key made by skueue certs")
        return loaded, x509.load_pem_x509_certificate(crt.read_bytes()), False
    ca_key, ca_cert = make_ca()
    write_pair(crt, key, ca_cert, ca_key)
    return ca_key, ca_cert, True


def make_ca(common_name: str = "skueue cluster CA") -> tuple[Key, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def issue(
    ca_key: Key,
    ca_cert: x509.Certificate,
    name: str,
    unit: str,
    names: list[str] | tuple[str, ...] = (),
    days: int = DAYS,
) -> tuple[Key, x509.Certificate]:
    """A certificate for ``name`` with ``OU=unit``, signed by the CA; ``names`` (IP
    addresses or DNS names) go in its subjectAltName."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, name),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
        ]
    )
    now = _now()
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if unit == "peer":  # a member accepts connections and opens them
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
    )
    if names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(n) for n in names]), critical=False
        )
    return key, builder.sign(ca_key, hashes.SHA256())


def write_pair(crt: Path, key_path: Path, cert: x509.Certificate, key: Key) -> None:
    """The certificate (readable) and its key (mode 0600, also when replaced)."""
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(pem)


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return x509.DNSName(name)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
