"""The Kafka clients of the console and perf tools: confluent-kafka (librdkafka), set up from Kafka's options.

Owns: reading a Java .properties file (--producer.config, --consumer.config); merging it with `k=v`
pairs (--producer-property, --consumer-property) into a librdkafka configuration, without the
Java-only (de)serializer settings (the tools move bytes), once the cluster was reached; a Java
client's security keys in it (`sasl.jaas.config`, `ssl.truststore.*`, `ssl.keystore.*`, PEM only, as
`--command-config` takes them) given to librdkafka under its own names (`sasl.username`,
`ssl.ca.location`, ...; librdkafka's own names pass unchanged), the cluster reached with that same
security; and `librdkafka_errors`, which turns librdkafka's exceptions into one-line ToolErrors.
librdkafka's own log lines are off: the tools report failures themselves, in one line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import KafkaException

from odradek.cli.common import DEFAULT_CONNECT_TIMEOUT_S, ToolError
from odradek.client import KafkaClient, bootstrap_option
from odradek.security.client_config import CLIENT_SECURITY_KEYS, BlockingClientSecurity, client_security
from odradek.security.sasl.client import SaslClientSettings

JAVA_ONLY = frozenset({"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"})
SILENT = 0  # librdkafka's log_level: nothing
JAVA_STORES = ("ssl.truststore.", "ssl.keystore.")
# Java key -> librdkafka key, where only the name differs (PEM stores)
_RENAMED = {
    "ssl.truststore.location": "ssl.ca.location",
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    "ssl.keystore.key": "ssl.key.pem",
    "ssl.key.password": "ssl.key.password",
}


def properties_file(path: str) -> dict[str, str]:
    """A Java .properties file's `k=v` (or `k: v`) lines; '#' and '!' start comments."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ToolError(f"Error: cannot read {path}: {exc.strerror}") from None
    pairs = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            raise ToolError(f"Error: {path}: expected key=value, got {line!r}")
        pairs[line[:cut].strip()] = line[cut + 1 :].strip()
    return pairs


def pair_option(text: str) -> tuple[str, str]:
    """argparse `type=` of a repeatable `k=v` option."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


def add_client_options(
    parser: argparse.ArgumentParser, role: str, *property_options: str, property_help: str
) -> None:
    """--bootstrap-server, the tool's repeatable `k=v` options (`property_options`, into `property`),
    --ROLE-property (into ROLE_property) and --ROLE.config (into ROLE_config)."""
    parser.add_argument("--bootstrap-server", type=bootstrap_option, metavar="HOST:PORT[,HOST:PORT...]")
    parser.add_argument(
        *property_options,
        dest="property",
        action="append",
        default=[],
        type=pair_option,
        metavar="K=V",
        help=property_help,
    )
    parser.add_argument(
        f"--{role}-property",
        action="append",
        default=[],
        type=pair_option,
        metavar="K=V",
        help=f"a {role} setting",
    )
    parser.add_argument(f"--{role}.config", dest=f"{role}_config", metavar="FILE", help=f"{role} settings")


def client_config(
    tool: str,
    bootstrap: str | None,
    file: str | None,
    pairs: list[tuple[str, str]],
    defaults: Mapping[str, object],
) -> dict[str, object]:
    """`defaults`, then the file's settings, then the pairs, then --bootstrap-server when given.

    One of the bootstrap servers is reached first (odradek's client, retries announced on stderr for
    DEFAULT_CONNECT_TIMEOUT_S), so a cluster nobody can reach is one line and exit status 1 rather
    than librdkafka retrying without end."""
    config: dict[str, object] = {**defaults, "log_level": SILENT}
    if file is not None:
        config.update(properties_file(file))
    config.update(pairs)
    if bootstrap is not None:
        config["bootstrap.servers"] = bootstrap
    if "bootstrap.servers" not in config:
        raise ToolError("Error: --bootstrap-server (or bootstrap.servers in the config file) is required")
    java_security = {k: str(v) for k, v in config.items() if k in CLIENT_SECURITY_KEYS}
    java = _java_security_given(java_security)
    try:
        security = client_security(java_security) if java else None
    except ValueError as exc:
        raise ToolError(f"Error: {exc}") from None
    with KafkaClient.connect(
        str(config["bootstrap.servers"]),
        retry_for_s=DEFAULT_CONNECT_TIMEOUT_S,
        on_retry=lambda line: print(f"odradek {tool}: {line}", file=sys.stderr, flush=True),
        security=security,
    ):
        pass
    librdkafka = {k: v for k, v in config.items() if k not in JAVA_ONLY}
    if java:
        librdkafka = {k: v for k, v in librdkafka.items() if k not in CLIENT_SECURITY_KEYS}
        librdkafka.update(librdkafka_security(java_security, security))
    return librdkafka


def _java_security_given(settings: Mapping[str, str]) -> bool:
    """Whether the settings are a Java client's (a JAAS config or a Java store), not librdkafka's."""
    return any(key == "sasl.jaas.config" or key.startswith(JAVA_STORES) for key in settings)


def librdkafka_security(
    settings: Mapping[str, str], security: BlockingClientSecurity | None
) -> dict[str, str]:
    """A Java client's security settings under librdkafka's names; `security` is what
    `client_security` made of them (its SASL mechanism and JAAS options already parsed)."""
    out = {"security.protocol": settings.get("security.protocol", "PLAINTEXT").strip().upper()}
    out.update({_RENAMED[k]: v for k, v in settings.items() if k in _RENAMED})
    if "ssl.keystore.location" in settings:  # one PEM file holding the key and its certificates
        out["ssl.certificate.location"] = out["ssl.key.location"] = settings["ssl.keystore.location"]
    if "ssl.endpoint.identification.algorithm" in settings:
        algorithm = settings["ssl.endpoint.identification.algorithm"].strip().lower()
        out["ssl.endpoint.identification.algorithm"] = algorithm or "none"
    if security is not None and security.sasl is not None:
        out.update(_librdkafka_sasl(security.sasl))
    return out


def _librdkafka_sasl(sasl: SaslClientSettings) -> dict[str, str]:
    """PLAIN and SCRAM: the username and password; OAUTHBEARER: Kafka's unsecured login (the
    principal from `unsecuredLoginStringClaim_sub`) as librdkafka's unsecured JWT."""
    mechanism, options = sasl.mechanism, sasl.options
    if mechanism != "OAUTHBEARER":
        return {
            "sasl.mechanism": mechanism,
            "sasl.username": options["username"],
            "sasl.password": options["password"],
        }
    subject = options.get("unsecuredLoginStringClaim_sub")
    if not subject:
        raise ToolError("Error: sasl.jaas.config for OAUTHBEARER lacks unsecuredLoginStringClaim_sub")
    return {
        "sasl.mechanism": mechanism,
        "enable.sasl.oauthbearer.unsecure.jwt": "true",
        "sasl.oauthbearer.config": f"principal={subject}",
    }


@contextmanager
def librdkafka_errors() -> Iterator[None]:
    """librdkafka's exceptions as one-line ToolErrors."""
    try:
        yield
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        raise ToolError(f"Error: {error.str() if hasattr(error, 'str') else exc}") from None
