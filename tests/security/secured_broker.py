"""A SASL_SSL broker for the SASL_SSL tests and those of odradek's own client (the tools, the web
console, the Spark source and sink): PLAIN and SCRAM users (tests/security/sasl_brokers.py), a
certificate from a CA made at test time, no client certificate asked for. `confluent` and
`kafka_python` give a client library's settings for a user, `command_config` writes a Kafka client's
properties file, `spark_options` gives the same settings as Spark's `kafka.*` options."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

from odradek.testing.broker import free_port
from tests.security.sasl_brokers import (
    ADMIN,
    ADMIN_PASSWORD,
    PLAIN_MODULE,
    SCRAM_MODULE,
    confluent_config,
    jaas,
    kafka_python_config,
    sasl_overrides,
)
from tests.security.tls_broker import DebugBrokerProcess, Pki, client_context, make_pki


class Broker:
    def __init__(self, process: DebugBrokerProcess, pki: Pki, root: Path) -> None:
        self.process, self.pki, self.root = process, pki, root
        self.bootstrap = process.bootstrap

    def command_config(
        self, mechanism: str, user: str, password: str, truststore: Path | None = None
    ) -> Path:
        module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
        path = self.root / f"{uuid.uuid4().hex[:8]}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\n"
            f"ssl.truststore.type=PEM\nssl.truststore.location={truststore or self.pki.ca.cert_path}\n"
            f"sasl.mechanism={mechanism}\n"
            f"sasl.jaas.config={jaas(module, username=user, password=password)}\n"
        )
        return path

    def confluent(self, mechanism: str, user: str, password: str) -> dict[str, object]:
        """confluent-kafka's settings for `user` over SASL_SSL."""
        config = confluent_config(self.bootstrap, mechanism, user, password)
        return {**config, "security.protocol": "SASL_SSL", "ssl.ca.location": str(self.pki.ca.cert_path)}

    def kafka_python(self, mechanism: str, user: str, password: str) -> dict[str, object]:
        """kafka-python's (and aiokafka's) keyword arguments for `user` over SASL_SSL."""
        config = kafka_python_config(mechanism, user, password)
        return {
            **config,
            "security_protocol": "SASL_SSL",
            "ssl_context": client_context(self.pki.ca.cert_path),
        }

    def admin_config(self) -> Path:
        return self.command_config("PLAIN", ADMIN, ADMIN_PASSWORD)

    def spark_options(self, mechanism: str, user: str, password: str) -> dict[str, str]:
        """The settings of `command_config` as Spark's kafka.* options."""
        lines = self.command_config(mechanism, user, password).read_text().splitlines()
        return {f"kafka.{key}": value for key, _, value in (line.partition("=") for line in lines)}


@contextlib.contextmanager
def sasl_ssl_broker(root: Path, **extra: object) -> Iterator[Broker]:
    """The broker (its only listener SASL_SSL, the brokers' own connections PLAIN as admin), with
    the `extra` overrides."""
    pki = make_pki(root)
    port = free_port()
    overrides = sasl_overrides(
        "sasl_ssl",
        **{
            "listeners": f"SASL_SSL://127.0.0.1:{port}",
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            **pki.ssl_settings(client_auth="none"),
            **extra,
        },
    )
    process = DebugBrokerProcess(
        root / "data", port=port, overrides=overrides, output_path=root / "broker.out"
    )
    with process:
        yield Broker(process, pki, root)
