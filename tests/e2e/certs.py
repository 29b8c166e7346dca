"""TLS files for tests: a CA, members' and clients' certificates (``skueue certs``'s own
functions), and the daemon options and client contexts that use them."""

from __future__ import annotations

import ssl
from pathlib import Path

import attrs

from skueue.cli.certs_cmd import ensure_ca, issue, write_pair
from skueue.client.tls import client_context
from tests.e2e.daemons import HOST


@attrs.frozen
class Certs:
    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    def pair(self, name: str) -> tuple[Path, Path]:
        return self.dir / f"{name}.crt", self.dir / f"{name}.key"

    def daemon_args(self, name: str = "member", client_ca: bool = False) -> tuple[str, ...]:
        """Mutual TLS on peer links (and client certificates, with ``client_ca``)."""
        crt, key = self.pair(name)
        args = ("--tls-cert", str(crt), "--tls-key", str(key), "--tls-ca", str(self.ca))
        return (*args, "--tls-client-ca", str(self.ca)) if client_ca else args

    def client(self, name: str | None = None) -> ssl.SSLContext:
        """A client's context trusting the CA, with ``name``'s certificate if given."""
        if name is None:
            return client_context(str(self.ca))
        crt, key = self.pair(name)
        return client_context(str(self.ca), str(crt), str(key))


def make_certs(directory: Path) -> Certs:
    """A CA in ``directory`` and certificates signed by it: ``member`` (OU=peer, for
    127.0.0.1), ``alice`` (OU=client), ``ops`` (OU=admin), ``localhost-only`` (OU=peer,
    naming only localhost)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert, _ = ensure_ca(directory)
    for name, unit, names in (
        ("member", "peer", [HOST]),
        ("alice", "client", []),
        ("ops", "admin", []),
        ("localhost-only", "peer", ["localhost"]),
    ):
        key, cert = issue(ca_key, ca_cert, name, unit, names)
        write_pair(*Certs(directory).pair(name), cert, key)
    return Certs(directory)
