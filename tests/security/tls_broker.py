"""Helpers of the TLS tests: a certificate authority with a broker certificate, the broker configs
of an SSL listener, the client configs of each client library, and a broker process whose log is at
DEBUG (the line naming a TLS client's principal)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from odradek.testing.broker import BrokerProcess
from odradek.testing.certs import CertificateAuthority, Issued


@dataclass
class Pki:
    ca: CertificateAuthority
    broker: Issued

    def ssl_settings(self, client_auth: str = "required") -> dict[str, object]:
        """The ssl.* keys of a broker serving its certificate and trusting the CA."""
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.broker.keystore_path,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca.cert_path,
            "ssl.client.auth": client_auth,
        }


def make_pki(directory: Path) -> Pki:
    ca = CertificateAuthority(directory)
    return Pki(ca, ca.issue("broker"))


class DebugBrokerProcess(BrokerProcess):
    """A broker process logging at DEBUG."""

    def command(self) -> list[str]:
        return [*super().command(), "--log-level", "DEBUG"]


def confluent_config(bootstrap: str, ca: Path, client: Issued | None = None) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca),
    }
    if client is not None:
        config["ssl.certificate.location"] = str(client.cert_path)
        config["ssl.key.location"] = str(client.key_path)
    return config


def client_context(ca: Path, client: Issued | None = None) -> ssl.SSLContext:
    """An SSLContext for kafka-python and aiokafka: trusting `ca`, presenting `client` if given."""
    context = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        context.load_cert_chain(str(client.cert_path), str(client.key_path))
    return context
