"""odradek's own client against a SASL_SSL broker, as a user runs the tools: `--command-config FILE`
with a Kafka client's security.protocol, ssl.* and sasl.* keys (PLAIN and SCRAM over TLS), a wrong
password and an untrusted broker certificate refused in one line, leader-election's
`--admin.config` and the console tools' `--producer.config` / `--consumer.config` (Kafka's names
for the same file), the web console's
`--command-config`, and a broker's own console on a SASL_SSL-only broker (certificates and
credentials made at test time)."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing.broker import free_port
from odradek.testing.certs import CertificateAuthority
from tests.cli.tooling import ENTRY_POINT, run_odradek
from tests.exit_report import exit_report
from tests.security.sasl_brokers import ADMIN, ADMIN_PASSWORD, ALICE
from tests.security.secured_broker import Broker, sasl_ssl_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    http = f"http://127.0.0.1:{free_port()}"
    with sasl_ssl_broker(tmp_path_factory.mktemp("client-security"), **{"http.listeners": http}) as made:
        yield made


def created_topic(broker: Broker, prefix: str) -> str:
    """A fresh topic, created with `odradek topics --command-config` as the admin."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    config = str(broker.admin_config())
    created = run_odradek(
        "topics",
        "--bootstrap-server",
        broker.bootstrap,
        "--command-config",
        config,
        "--create",
        "--topic",
        topic,
    )
    assert created.returncode == 0, created.stderr
    return topic


def test_topics_tool_creates_and_lists_over_sasl_ssl(broker: Broker) -> None:
    topic = created_topic(broker, "tool")
    config = str(broker.admin_config())
    listed = run_odradek(
        "topics", "--bootstrap-server", broker.bootstrap, "--command-config", config, "--list"
    )
    assert topic in listed.stdout.split()
    assert f"authenticated with PLAIN as User:{ADMIN}" in broker.process.output_path.read_text()


def test_leader_election_takes_its_security_from_admin_config(broker: Broker) -> None:
    topic = created_topic(broker, "elect")
    elected = run_odradek(
        "leader-election", "--bootstrap-server", broker.bootstrap, "--election-type", "preferred",
        "--topic", topic, "--partition", "0", "--admin.config", str(broker.admin_config()),
    )  # fmt: skip
    assert (elected.returncode, elected.stderr) == (0, "")
    assert elected.stdout == f"Valid replica already elected for partitions {topic}-0\n"


def test_console_tools_take_a_java_clients_security_settings(broker: Broker) -> None:
    """--producer.config / --consumer.config with Kafka's keys (a PEM truststore, sasl.jaas.config),
    as kafka-console-producer.sh takes them: librdkafka gets them under its own names."""
    topic = created_topic(broker, "console")
    config = str(broker.admin_config())
    produced = run_odradek(
        "console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--producer.config", config, stdin="one\ntwo\n",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = run_odradek(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning",
        "--max-messages", "2", "--timeout-ms", "20000", "--consumer.config", config,
    )  # fmt: skip
    assert (consumed.returncode, consumed.stdout) == (0, "one\ntwo\n"), consumed.stderr


def test_scram_credentials_made_with_the_configs_tool_log_a_user_in(broker: Broker) -> None:
    user = f"u{uuid.uuid4().hex[:6]}"
    admin = str(broker.admin_config())
    altered = run_odradek(
        "configs", "--bootstrap-server", broker.bootstrap, "--command-config", admin,
        "--entity-type", "users", "--entity-name", user,
        "--alter", "--add-config", "SCRAM-SHA-256=[iterations=4096,password=s3cret]",
    )  # fmt: skip
    assert altered.returncode == 0, altered.stderr
    config = str(broker.command_config("SCRAM-SHA-256", user, "s3cret"))
    listed = run_odradek(
        "topics", "--bootstrap-server", broker.bootstrap, "--command-config", config, "--list"
    )
    assert listed.returncode == 0, listed.stderr
    assert f"authenticated with SCRAM-SHA-256 as User:{user}" in broker.process.output_path.read_text()


def test_a_wrong_password_is_one_line_and_exit_1(broker: Broker) -> None:
    config = str(broker.command_config("PLAIN", ALICE, "not-her-password"))
    done = run_odradek(
        "topics", "--bootstrap-server", broker.bootstrap, "--command-config", config, "--list",
        "--connect-timeout", "2",
    )  # fmt: skip
    assert done.returncode == 1, exit_report(done)
    assert "authentication failed" in done.stderr
    assert done.stdout == ""


def test_an_untrusted_broker_certificate_is_refused(broker: Broker, tmp_path: Path) -> None:
    other_ca = CertificateAuthority(tmp_path / "other")
    config = str(broker.command_config("PLAIN", ADMIN, ADMIN_PASSWORD, truststore=other_ca.cert_path))
    done = run_odradek(
        "topics", "--bootstrap-server", broker.bootstrap, "--command-config", config, "--list",
        "--connect-timeout", "2",
    )  # fmt: skip
    assert done.returncode == 1, exit_report(done)
    assert "TLS handshake failed" in done.stderr and "CERTIFICATE_VERIFY_FAILED" in done.stderr


def test_a_setting_the_client_cannot_honour_is_named(broker: Broker, tmp_path: Path) -> None:
    config = tmp_path / "gssapi.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    done = run_odradek(
        "topics", "--bootstrap-server", broker.bootstrap, "--command-config", str(config), "--list"
    )
    assert done.returncode == 1, exit_report(done)
    assert "sasl.mechanism" in done.stderr and "GSSAPI" in done.stderr


def test_the_web_console_reads_a_secured_cluster(broker: Broker) -> None:
    assert ENTRY_POINT is not None
    topic = created_topic(broker, "console")
    admin = str(broker.admin_config())
    port = free_port()
    with subprocess.Popen(
        [ENTRY_POINT, "console", "--bootstrap-server", broker.bootstrap,
         "--command-config", admin, "--listen", f"http://127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=sys.stderr, text=True,
    ) as console:  # fmt: skip
        try:
            assert console.stdout is not None
            assert "odradek console of" in console.stdout.readline()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/topics", timeout=30) as page:
                assert topic in page.read().decode()
        finally:
            console.terminate()
            console.wait(10)


def test_the_brokers_own_web_console_reads_it_as_the_broker(broker: Broker) -> None:
    """A broker whose only listener is SASL_SSL serves its console through that listener, secured
    and authenticated as its own connections to other brokers are."""
    topic = created_topic(broker, "embedded")
    http = broker.process.overrides["http.listeners"]
    with urllib.request.urlopen(f"{http}/topics", timeout=30) as page:
        assert topic in page.read().decode()
