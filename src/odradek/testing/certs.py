"""Certificates made at test time for TLS tests: a certificate authority and the certificates it
issues (brokers, clients), as PEM files, with the `cryptography` package (a test dependency).

`CertificateAuthority(directory)` writes its certificate to `ca.pem` (a truststore). `issue(name)`
makes an EC P-256 key and a certificate for the subject CN=name (and OU/O when given), valid for
`localhost` and 127.0.0.1 (so a client's host name check passes), and writes `name.key`,
`name.crt` and `name.keystore.pem` (key and chain in one file, what `ssl.keystore.location` reads
with `ssl.keystore.type=PEM`). `expired=True` gives a certificate whose validity ended yesterday;
`key_password` encrypts the private key (`ssl.key.password`). Nothing here is secret or kept:
the files live in the test's temporary directory.

Callers: tests/security/test_tls_*.py, bench/security.py.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    """An issued certificate's files and PEM texts."""

    key_path: Path
    cert_path: Path
    keystore_path: Path  # the key then the certificate chain
    key_pem: str
    chain_pem: str
    subject: str  # RFC 2253, as the broker names the principal with ssl.principal.mapping.rules DEFAULT


class CertificateAuthority:
    """A self-signed CA writing into `directory`."""

    def __init__(self, directory: Path, name: str = "odradek test CA") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + 30 * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM).decode()
        self.cert_path = self.directory / f"{name.replace(' ', '-')}.ca.pem"
        self.cert_path.write_text(self.cert_pem)

    def issue(
        self,
        name: str,
        *,
        organizational_unit: str | None = None,
        organization: str | None = None,
        expired: bool = False,
        key_password: str | None = None,
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, name)]
        if organizational_unit:
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, organizational_unit))
        if organization:
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        now = datetime.datetime.now(datetime.UTC)
        start, end = (now - 3 * _DAY, now - _DAY) if expired else (now - _DAY, now + 30 * _DAY)
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        encryption = (
            serialization.BestAvailableEncryption(key_password.encode())
            if key_password
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        ).decode()
        chain_pem = cert.public_bytes(serialization.Encoding.PEM).decode() + self.cert_pem
        paths = tuple(self.directory / f"{name}.{suffix}" for suffix in ("key", "crt", "keystore.pem"))
        paths[0].write_text(key_pem)
        paths[1].write_text(chain_pem)
        paths[2].write_text(key_pem + chain_pem)
        return Issued(*paths, key_pem, chain_pem, cert.subject.rfc4514_string())
