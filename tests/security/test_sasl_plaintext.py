"""SASL on a SASL_PLAINTEXT listener of a real broker, with real clients (confluent-kafka,
kafka-python, aiokafka, kcat) and raw frames: every mechanism, the failures Kafka answers (wrong
password, unknown user, unsupported mechanism, a request before authentication, garbage after it),
the bounds (failure delay, unfinished handshake, receive size), re-authentication (KIP-368), and
the SCRAM credential APIs. The broker also has a PLAINTEXT listener, which has no SASL gate."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.api_versions import ApiVersionsRequest
from odradek.protocol.messages.describe_cluster import DescribeClusterRequest
from odradek.protocol.messages.metadata import MetadataRequest
from odradek.protocol.messages.produce import ProduceRequest
from odradek.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from odradek.protocol.messages.sasl_handshake import SaslHandshakeRequest
from odradek.security.sasl import mechanisms
from odradek.security.sasl.scram import ScramMechanism as Scram
from odradek.testing.broker import BrokerProcess, free_port
from tests.exit_report import exit_report
from tests.security.round_trips import (
    aiokafka_round_trip,
    confluent_round_trip,
    credentials,
    kafka_python_round_trip,
)
from tests.security.sasl_brokers import (
    ADMIN,
    ADMIN_PASSWORD,
    ALICE,
    ALICE_PASSWORD,
    LISTENER,
    MECHANISMS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    aiokafka_token_provider,
    authenticate,
    confluent_config,
    handshake,
    kafka_python_config,
    oauth_login,
    plain_login,
    sasl_overrides,
    unsecured_jwt,
)
from tests.server.raw_client import RawClient

FAILED_AUTHENTICATION_DELAY_MS = 500
HANDSHAKE_BOUND_MS = 4000  # connections.max.idle.ms
REAUTH_MS = 3000  # SCRAM-SHA-512 only
SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM = 58, 34, 33


class Broker:
    def __init__(self, process: BrokerProcess, plaintext_port: int) -> None:
        self.process = process
        self.bootstrap = process.bootstrap
        self.plaintext = f"127.0.0.1:{plaintext_port}"

    def log(self) -> str:
        return self.process.output_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    root = tmp_path_factory.mktemp("sasl")
    port, plaintext_port = free_port(), free_port()
    overrides = sasl_overrides(
        **{
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{plaintext_port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "connection.failed.authentication.delay.ms": FAILED_AUTHENTICATION_DELAY_MS,
            "connections.max.idle.ms": HANDSHAKE_BOUND_MS,
            f"listener.name.{LISTENER}.scram-sha-512.connections.max.reauth.ms": REAUTH_MS,
        }
    )
    with BrokerProcess(
        root / "data", port=port, overrides=overrides, output_path=root / "broker.out"
    ) as process:
        made = Broker(process, plaintext_port)
        _add_scram_user(made.bootstrap)
        yield made


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient(confluent_config(bootstrap, "PLAIN", ADMIN, ADMIN_PASSWORD))


def _add_scram_user(bootstrap: str) -> None:
    upserts = [
        UserScramCredentialUpsertion(
            SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), SCRAM_PASSWORD.encode()
        ),
        UserScramCredentialUpsertion(
            SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), SCRAM_PASSWORD.encode()
        ),
    ]
    admin = _admin(bootstrap)  # kept alive until the futures are done
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result()


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- each mechanism with each client library ----------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produces_and_consumes(broker: Broker, mechanism: str) -> None:
    config = confluent_config(broker.bootstrap, mechanism, *credentials(mechanism))
    assert confluent_round_trip(config, _topic("confluent"), b"secret record") == b"secret record"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_produces_and_consumes(broker: Broker, mechanism: str) -> None:
    config = kafka_python_config(mechanism, *credentials(mechanism))
    topic = _topic("kafka-python")
    assert kafka_python_round_trip(broker.bootstrap, config, topic, b"secret record") == b"secret record"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_produces_and_consumes(broker: Broker, mechanism: str) -> None:
    user, password = credentials(mechanism)
    config = kafka_python_config(mechanism, user, password)
    if mechanism == "OAUTHBEARER":
        config["sasl_oauth_token_provider"] = aiokafka_token_provider(user)
    topic = _topic("aiokafka")
    assert aiokafka_round_trip(broker.bootstrap, config, topic, b"secret record") == b"secret record"


def test_kcat_produces_and_consumes_with_scram(broker: Broker) -> None:
    topic = _topic("kcat")
    sasl = [
        "-X", "security.protocol=SASL_PLAINTEXT",
        "-X", "sasl.mechanisms=SCRAM-SHA-256",
        "-X", f"sasl.username={SCRAM_USER}",
        "-X", f"sasl.password={SCRAM_PASSWORD}",
    ]  # fmt: skip
    subprocess.run(
        ["kcat", "-b", broker.bootstrap, *sasl, "-P", "-t", topic], input=b"by kcat\n", check=True, timeout=60
    )
    consumed = subprocess.run(
        ["kcat", "-b", broker.bootstrap, *sasl, "-C", "-t", topic, "-o", "beginning", "-c", "1", "-e"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert consumed.stdout.strip() == b"by kcat"


# -- failures -----------------------------------------------------------------------------------------


def test_wrong_password_gets_the_error_and_a_close_after_the_delay(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        response = plain_login(client, ALICE, "not-her-password")
        assert response.error_code == SASL_AUTHENTICATION_FAILED
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert not client.is_closed_by_peer(timeout=FAILED_AUTHENTICATION_DELAY_MS / 1000 / 2)
        assert client.is_closed_by_peer(timeout=5)
    assert "Failed authentication with 127.0.0.1" in broker.log()


def test_wrong_password_is_reported_to_confluent_kafka(broker: Broker) -> None:
    errors: list[confluent_kafka.KafkaError] = []
    config = confluent_config(broker.bootstrap, "SCRAM-SHA-512", SCRAM_USER, "wrong")
    producer = confluent_kafka.Producer({**config, "error_cb": errors.append})
    producer.produce(_topic("refused"), b"never")
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == confluent_kafka.KafkaError._AUTHENTICATION
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in errors[0].str()


def test_unknown_scram_user_gets_kafka_generic_message(broker: Broker) -> None:
    client_side = mechanisms.ScramClient(Scram.SCRAM_SHA_256, "nobody", "whatever")
    with RawClient(broker.bootstrap) as client:
        assert handshake(client, "SCRAM-SHA-256").error_code == 0
        response = authenticate(client, client_side.first())
        assert response.error_code == SASL_AUTHENTICATION_FAILED
        assert response.error_message == (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-256"
        )
        assert client.is_closed_by_peer(timeout=5)


def test_unknown_plain_user_is_refused(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        response = plain_login(client, "mallory", ALICE_PASSWORD)
        assert response.error_code == SASL_AUTHENTICATION_FAILED
        assert response.error_message == "Authentication failed: Invalid username or password"


def test_unsupported_mechanism_is_answered_with_the_enabled_ones(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        response = handshake(client, "GSSAPI")
        assert response.error_code == UNSUPPORTED_SASL_MECHANISM
        assert response.mechanisms == list(MECHANISMS)
        assert client.is_closed_by_peer(timeout=5)


def test_produce_before_authenticating_is_closed_unanswered(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        client.send(ApiKey.PRODUCE, 9, ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[]))
        assert client.is_closed_by_peer(timeout=5)
    assert "unexpected PRODUCE request during SASL handshake" in broker.log()


def test_another_request_after_the_handshake_gets_illegal_sasl_state(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        assert handshake(client, "PLAIN").error_code == 0
        response = client.call(ApiKey.DESCRIBE_CLUSTER, 0, DescribeClusterRequest())
        assert response.error_code == ILLEGAL_SASL_STATE
        assert client.is_closed_by_peer(timeout=5)


def test_api_versions_before_authenticating_lists_the_sasl_apis(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        response = client.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("tests", "1"))
        ranges = {api.api_key: (api.min_version, api.max_version) for api in response.api_keys}
        assert ranges[ApiKey.SASL_HANDSHAKE] == (0, 1)
        assert ranges[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        assert plain_login(client, ALICE, ALICE_PASSWORD).error_code == 0


def test_authenticated_client_sending_garbage_is_closed_and_others_carry_on(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        assert plain_login(client, ALICE, ALICE_PASSWORD).error_code == 0
        client.send_raw(b"\x00\x00\x00\x0c" + b"\x7f\x7f" + b"\x00" * 10)
        assert client.is_closed_by_peer(timeout=5)
    with RawClient(broker.bootstrap) as other:
        assert plain_login(other, ALICE, ALICE_PASSWORD).error_code == 0
        assert other.call(ApiKey.METADATA, 12, MetadataRequest(topics=[])).brokers


def test_client_that_never_finishes_its_handshake_is_closed_after_the_bound(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        started = time.monotonic()
        closed = False
        while not closed and time.monotonic() - started < HANDSHAKE_BOUND_MS / 1000 * 3:
            # never idle: an ApiVersions every half second, and never a handshake
            client.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("tests", "1"))
            closed = client.is_closed_by_peer(timeout=0.5)
        assert closed
    assert f"SASL authentication did not complete within {HANDSHAKE_BOUND_MS} ms" in broker.log()


def test_frame_above_sasl_server_max_receive_size_before_authentication_closes(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        client.send_raw((600_000).to_bytes(4, "big") + b"\x00" * 64)
        assert client.is_closed_by_peer(timeout=5)
    assert "sasl.server.max.receive.size" in broker.log()


def test_expired_oauthbearer_token_gets_the_json_error_then_fails(broker: Broker) -> None:
    expired = unsecured_jwt("carol", lifetime_s=60, issued_s=time.time() - 3600)
    with RawClient(broker.bootstrap) as client:
        challenge = oauth_login(client, expired)
        assert challenge.error_code == 0 and challenge.auth_bytes == b'{"status":"invalid_token"}'
        response = authenticate(client, b"\x01")
        assert response.error_code == SASL_AUTHENTICATION_FAILED
        assert response.error_message == '{"status":"invalid_token"}'


def test_v0_handshake_exchanges_raw_tokens(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        assert handshake(client, "PLAIN", version=0).error_code == 0
        token = mechanisms.plain_client_token(ALICE, ALICE_PASSWORD)
        client.send_raw(len(token).to_bytes(4, "big") + token)
        assert client.read_frame() == b""
        assert client.call(ApiKey.METADATA, 12, MetadataRequest(topics=[])).brokers


# -- re-authentication (KIP-368) ---------------------------------------------------------------------


def _scram_login(client: RawClient, user: str, password: str) -> object:
    client_side = mechanisms.ScramClient(Scram.SCRAM_SHA_512, user, password)
    assert handshake(client, "SCRAM-SHA-512").error_code == 0
    first = authenticate(client, client_side.first())
    assert first.error_code == 0, first.error_message
    final = authenticate(client, client_side.evaluate(first.auth_bytes) or b"")
    if final.error_code == 0:
        assert client_side.evaluate(final.auth_bytes) is None
    return final


def test_session_lifetime_re_authentication_and_expiry(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        assert _scram_login(client, SCRAM_USER, SCRAM_PASSWORD).session_lifetime_ms == REAUTH_MS
        time.sleep(REAUTH_MS / 1000 / 2)
        assert _scram_login(client, SCRAM_USER, SCRAM_PASSWORD).session_lifetime_ms == REAUTH_MS
        time.sleep(REAUTH_MS / 1000 * 0.7)  # past the first session's end, within the second's
        assert client.call(ApiKey.METADATA, 12, MetadataRequest(topics=[])).brokers
        time.sleep(REAUTH_MS / 1000 * 0.5)  # past the second session's end
        client.send(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        assert client.is_closed_by_peer(timeout=5)
    assert "SASL session has expired" in broker.log()


def test_re_authentication_cannot_change_the_principal(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        assert plain_login(client, ALICE, ALICE_PASSWORD).error_code == 0
        response = plain_login(client, ADMIN, ADMIN_PASSWORD)
        assert response.error_code == SASL_AUTHENTICATION_FAILED
        assert (
            response.error_message
            == "Cannot change principals during re-authentication from User:alice: User:admin"
        )
        assert client.is_closed_by_peer(timeout=5)


def test_sessions_without_a_lifetime_do_not_expire(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        assert plain_login(client, ALICE, ALICE_PASSWORD).session_lifetime_ms == 0


def test_oauthbearer_session_lasts_until_the_token_expires(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as client:
        lifetime_ms = oauth_login(client, unsecured_jwt("carol", lifetime_s=60)).session_lifetime_ms
        assert 50_000 < lifetime_ms <= 60_000


def test_confluent_kafka_re_authenticates_across_session_ends(broker: Broker) -> None:
    config = confluent_config(broker.bootstrap, "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)
    topic = _topic("reauth")
    producer = confluent_kafka.Producer(config)
    for _ in range(3):
        producer.produce(topic, b"again")
        assert producer.flush(20) == 0
        time.sleep(REAUTH_MS / 1000 * 0.8)
    producer.produce(topic, b"last")
    assert producer.flush(20) == 0


# -- PLAINTEXT listener --------------------------------------------------------------------------------


def test_plaintext_listener_has_no_gate_and_refuses_sasl_requests(broker: Broker) -> None:
    with RawClient(broker.plaintext) as client:
        assert client.call(ApiKey.METADATA, 12, MetadataRequest(topics=[])).brokers
        assert (
            client.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN")).error_code
            == ILLEGAL_SASL_STATE
        )
        response = client.call(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(b""))
        assert response.error_code == ILLEGAL_SASL_STATE


# -- SCRAM credentials ---------------------------------------------------------------------------------


def test_scram_credentials_are_described_without_secrets(broker: Broker) -> None:
    admin = _admin(broker.bootstrap)
    described = admin.describe_user_scram_credentials([SCRAM_USER])[SCRAM_USER].result()
    infos = {(info.mechanism, info.iterations) for info in described.scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)}


def test_scram_credential_errors(broker: Broker) -> None:
    admin = _admin(broker.bootstrap)
    with pytest.raises(confluent_kafka.KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result()
    too_few = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw"
    )
    with pytest.raises(confluent_kafka.KafkaException, match="Too few iterations"):
        admin.alter_user_scram_credentials([too_few])["dave"].result()
    missing = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)
    with pytest.raises(confluent_kafka.KafkaException, match="does not exist"):
        admin.alter_user_scram_credentials([missing])["dave"].result()


def test_deleted_scram_credential_no_longer_authenticates(broker: Broker) -> None:
    admin = _admin(broker.bootstrap)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("erin", info, b"erin-pw")])[
        "erin"
    ].result()
    with RawClient(broker.bootstrap) as client:
        assert _scram_login(client, "erin", "erin-pw").error_code == 0
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_512)])[
        "erin"
    ].result()
    with RawClient(broker.bootstrap) as client:
        client_side = mechanisms.ScramClient(Scram.SCRAM_SHA_512, "erin", "erin-pw")
        assert handshake(client, "SCRAM-SHA-512").error_code == 0
        assert authenticate(client, client_side.first()).error_code == SASL_AUTHENTICATION_FAILED


# -- odradek configs --entity-type users ---------------------------------------------------------------


def _configs(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "configs", "--bootstrap-server", broker.plaintext, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _scram_256_login(broker: Broker, user: str, password: str) -> int:
    client_side = mechanisms.ScramClient(Scram.SCRAM_SHA_256, user, password)
    with RawClient(broker.bootstrap) as client:
        assert handshake(client, "SCRAM-SHA-256").error_code == 0
        first = authenticate(client, client_side.first())
        if first.error_code:
            return first.error_code
        return authenticate(client, client_side.evaluate(first.auth_bytes) or b"").error_code


def test_configs_command_sets_describes_and_deletes_scram_credentials_beside_quotas(broker: Broker) -> None:
    user = ["--entity-type", "users", "--entity-name", "gina"]
    added = _configs(
        broker,
        *user,
        "--alter",
        "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=gina-pw],producer_byte_rate=1024",
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == "Completed updating config for user gina."
    described = _configs(broker, *user, "--describe")
    assert described.stdout.splitlines() == [
        "Quota configs for user-principal 'gina' are producer_byte_rate=1024.0",
        "SCRAM credential configs for user-principal 'gina' are SCRAM-SHA-256=iterations=8192",
    ]
    assert _scram_256_login(broker, "gina", "gina-pw") == 0
    deleted = _configs(broker, *user, "--alter", "--delete-config", "SCRAM-SHA-256")
    assert deleted.returncode == 0, deleted.stderr
    assert _configs(broker, *user, "--describe").stdout.splitlines() == [
        "Quota configs for user-principal 'gina' are producer_byte_rate=1024.0"
    ]
    assert _scram_256_login(broker, "gina", "gina-pw") == SASL_AUTHENTICATION_FAILED


def test_configs_command_refuses_scram_for_a_default_user(broker: Broker) -> None:
    refused = _configs(
        broker,
        "--entity-type",
        "users",
        "--entity-default",
        "--alter",
        "--add-config",
        "SCRAM-SHA-512=[password=x]",
    )
    assert refused.returncode != 0, exit_report(refused)
    assert "SCRAM credentials go with --entity-type users and an --entity-name only" in refused.stderr
