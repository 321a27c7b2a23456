"""The SASL settings a broker reads at start (server/sasl_listener.py, jaas.py): Kafka's keys
accepted, and what Kafka would refuse refused with a ConfigError naming the key."""

from __future__ import annotations

import pytest

from odradek.security.sasl.jaas import JaasConfigError, parse_jaas_config
from odradek.server.config import ConfigError, KafkaConfig
from odradek.server.sasl_listener import inter_broker_client, sasl_listeners
from tests.security.sasl_brokers import PLAIN_MODULE, SCRAM_MODULE, jaas

LISTENERS = {"listeners": "SASL_PLAINTEXT://127.0.0.1:9093"}
PLAIN_JAAS = jaas(PLAIN_MODULE, username="admin", password="pw", user_admin="pw", user_alice="alice-pw")


def _config(**settings: str) -> KafkaConfig:
    return KafkaConfig({**LISTENERS, **{k.replace("__", "."): v for k, v in settings.items()}})


def test_jaas_config_is_parsed_as_kafka_writes_it() -> None:
    entry = parse_jaas_config(
        f'{PLAIN_MODULE} required username="admin" password="a;b \\"c\\"" user_alice=alice-pw;'
    )
    assert entry.login_module == PLAIN_MODULE and entry.control_flag == "required"
    assert entry.options == {"username": "admin", "password": 'a;b "c"', "user_alice": "alice-pw"}


@pytest.mark.parametrize(
    "text",
    [
        f"{PLAIN_MODULE} required username=admin",
        f"{PLAIN_MODULE} always;",
        f"{PLAIN_MODULE} required; {PLAIN_MODULE} required;",
    ],
)
def test_invalid_jaas_configs_are_refused(text: str) -> None:
    with pytest.raises(JaasConfigError):
        parse_jaas_config(text)


def test_plain_users_come_from_the_listeners_jaas_config() -> None:
    config = KafkaConfig(
        {
            **LISTENERS,
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "60000",
        }
    )
    listener = sasl_listeners(config)["SASL_PLAINTEXT"]
    assert listener.mechanisms == ("PLAIN",)
    assert listener.reauth_ms == {"PLAIN": 60000}
    server = listener.new_server("PLAIN")
    server.evaluate(b"\x00alice\x00alice-pw")
    assert server.complete and server.authorization_id == "alice"


def test_kafkas_default_mechanism_gssapi_is_refused_on_a_sasl_listener() -> None:
    with pytest.raises(ConfigError, match="GSSAPI is not provided") as info:
        sasl_listeners(KafkaConfig(LISTENERS))
    assert info.value.key == "sasl.enabled.mechanisms"


def test_an_enabled_mechanism_needs_its_jaas_config() -> None:
    config = KafkaConfig({**LISTENERS, "sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    with pytest.raises(ConfigError) as info:
        sasl_listeners(config)
    assert info.value.key == "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"


def test_a_mechanism_with_another_login_module_is_refused() -> None:
    config = KafkaConfig(
        {
            **LISTENERS,
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(SCRAM_MODULE),
        }
    )
    with pytest.raises(ConfigError, match="PlainLoginModule"):
        sasl_listeners(config)


def test_per_listener_mechanisms_override_the_broker_wide_list() -> None:
    config = KafkaConfig(
        {
            **LISTENERS,
            "sasl.enabled.mechanisms": "GSSAPI",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        }
    )
    assert sasl_listeners(config)["SASL_PLAINTEXT"].mechanisms == ("PLAIN",)


def test_the_brokers_own_credentials_come_from_the_inter_broker_listener() -> None:
    base = {
        **LISTENERS,
        "sasl.enabled.mechanisms": "PLAIN",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    with pytest.raises(ConfigError) as info:
        inter_broker_client(KafkaConfig(base))  # Kafka's default inter-broker mechanism, GSSAPI
    assert info.value.key == "sasl.mechanism.inter.broker.protocol"
    settings = inter_broker_client(KafkaConfig({**base, "sasl.mechanism.inter.broker.protocol": "PLAIN"}))
    assert settings is not None and settings.mechanism == "PLAIN"
    assert (settings.options["username"], settings.options["password"]) == ("admin", "pw")
    without_password = jaas(PLAIN_MODULE, username="admin", user_admin="pw")
    config = KafkaConfig(
        {
            **base,
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": without_password,
        }
    )
    with pytest.raises(ConfigError, match="need the password option"):
        inter_broker_client(config)


def test_a_broker_wide_jaas_config_is_still_refused() -> None:
    with pytest.raises(ConfigError, match="does not provide"):
        KafkaConfig({**LISTENERS, "sasl.jaas.config": PLAIN_JAAS})
