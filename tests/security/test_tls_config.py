"""The TLS settings of a listener (security/ssl_config.py) and the principal of a client certificate
(security/principal.py): Kafka's keys and their listener overrides, PEM stores by location or inline,
an encrypted key, the refusals naming the key, cipher suite names, the RFC 2253 name of a subject
and ssl.principal.mapping.rules. A TLS handshake between the contexts built here proves they work
together."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest

from odradek.security.principal import ANONYMOUS, KafkaPrincipal, SslPrincipalMapper, distinguished_name
from odradek.security.ssl_config import ListenerSsl, listener_ssl, openssl_cipher_name
from odradek.server.config import ConfigError, KafkaConfig
from odradek.testing.certs import CertificateAuthority


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("certs"))


def _config(**props: object) -> KafkaConfig:
    settings = {"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093", **props}
    return KafkaConfig({k: str(v) for k, v in settings.items()})


def _stores(ca: CertificateAuthority, prefix: str = "") -> dict[str, object]:
    broker = ca.issue("broker")
    return {
        f"{prefix}ssl.keystore.type": "PEM",
        f"{prefix}ssl.keystore.location": broker.keystore_path,
        f"{prefix}ssl.truststore.type": "PEM",
        f"{prefix}ssl.truststore.location": ca.cert_path,
    }


def _handshake(server: ListenerSsl, client: ssl.SSLContext) -> dict:
    """A TLS handshake over a socket pair: the server side's view of the client certificate."""
    left, right = socket.socketpair()
    seen: dict = {}

    def serve() -> None:
        with server.server_context.wrap_socket(left, server_side=True) as tls:
            seen.update(tls.getpeercert() or {})
            tls.sendall(b"ok")

    thread = threading.Thread(target=serve)
    thread.start()
    with client.wrap_socket(right, server_hostname="localhost") as tls:
        assert tls.recv(2) == b"ok"
    thread.join(5)
    return seen


def test_an_ssl_listener_loads_pem_stores_and_its_client_side_trusts_the_ca(ca):
    config = _config(**_stores(ca), **{"ssl.client.auth": "required"})
    tls = config.listener_ssl["SSL"]
    assert "PLAINTEXT" not in config.listener_ssl
    assert tls.server_context.verify_mode == ssl.CERT_REQUIRED
    seen = _handshake(tls, tls.client_context)  # the broker's own client presents its certificate
    assert tls.principal_mapper.principal(seen["subject"]) == KafkaPrincipal("User", "CN=broker")


def test_inline_pem_stores_and_an_encrypted_key(ca):
    broker = ca.issue("inline", key_password="s3cret")
    config = _config(
        **{
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": broker.key_pem,
            "ssl.keystore.certificate.chain": broker.chain_pem,
            "ssl.key.password": "s3cret",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": ca.cert_pem,
        }
    )
    tls = config.listener_ssl["SSL"]
    assert _handshake(tls, tls.client_context) == {}  # ssl.client.auth none: no client certificate


def test_listener_overrides_win_key_by_key(ca):
    config = _config(
        **_stores(ca),
        **{
            "listeners": "SSL://127.0.0.1:9093,MTLS://127.0.0.1:9094,PLAINTEXT://127.0.0.1:9092",
            "listener.security.protocol.map": "SSL:SSL,MTLS:SSL,PLAINTEXT:PLAINTEXT",
            "ssl.client.auth": "none",
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.enabled.protocols": "TLSv1.3",
        },
    )
    assert config.listener_ssl["SSL"].server_context.verify_mode == ssl.CERT_NONE
    mtls = config.listener_ssl["MTLS"].server_context
    assert mtls.verify_mode == ssl.CERT_REQUIRED
    assert mtls.minimum_version == ssl.TLSVersion.TLSv1_3


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("ssl.keystore.type", "JKS", "PEM"),
        ("ssl.keystore.password", "pw", "only key password"),
        ("ssl.client.auth", "sometimes", "none, requested, required"),
        ("ssl.enabled.protocols", "TLSv1.1,TLSv1.3", "contiguous"),
        ("ssl.enabled.protocols", "SSLv3", "unknown protocols"),
        ("ssl.cipher.suites", "TLS_MADE_UP_WITH_NOTHING", "TLS_MADE_UP_WITH_NOTHING"),
        ("ssl.endpoint.identification.algorithm", "ldap", "https or empty"),
        ("ssl.principal.mapping.rules", "RULE:^CN=(.*)$", "Invalid rule"),
        ("listener.name.ssl.ssl.truststore.location", "/nonexistent/ca.pem", "trust store"),
    ],
)
def test_a_bad_tls_setting_stops_the_start_naming_the_key(ca, key, value, reason):
    with pytest.raises(ConfigError, match=reason) as info:
        _config(**{**_stores(ca), key: value})
    assert info.value.key == key


def test_a_wrong_key_password_names_the_key_store(ca):
    broker = ca.issue("locked", key_password="right")
    stores = {**_stores(ca), "ssl.keystore.location": broker.keystore_path, "ssl.key.password": "wrong"}
    with pytest.raises(ConfigError, match="cannot load the key store") as info:
        _config(**stores)
    assert info.value.key == "ssl.keystore.location"


def test_security_inter_broker_protocol_ssl_picks_the_ssl_listener(ca):
    config = _config(**_stores(ca), **{"security.inter.broker.protocol": "SSL"})
    assert config.inter_broker_listener_name == "SSL"
    assert config.inter_broker_ssl is config.listener_ssl["SSL"]
    assert _config(**_stores(ca)).inter_broker_ssl is None  # PLAINTEXT by default
    with pytest.raises(ConfigError, match="Only one of"):
        _config(
            **_stores(ca), **{"security.inter.broker.protocol": "SSL", "inter.broker.listener.name": "SSL"}
        )
    with pytest.raises(ConfigError):
        _config(**_stores(ca), **{"security.inter.broker.protocol": "SASL_SSL"})  # SASL is not served yet
    with pytest.raises(ConfigError, match="no listener speaks SSL"):
        _config(**{"listeners": "PLAINTEXT://127.0.0.1:9092", "security.inter.broker.protocol": "SSL"})


def test_cipher_suites_take_kafkas_names():
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384") == "ECDHE-RSA-AES256-GCM-SHA384"
    assert (
        openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256")
        == "ECDHE-ECDSA-CHACHA20-POLY1305"
    )
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA") == "ECDHE-RSA-AES128-SHA"
    assert openssl_cipher_name("TLS_RSA_WITH_AES_128_GCM_SHA256") == "AES128-GCM-SHA256"
    assert openssl_cipher_name("ECDHE-RSA-AES128-GCM-SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"


def test_tls12_suites_only_leave_tls13_off(ca, tmp_path: Path):
    tls = listener_ssl(
        {k: str(v) for k, v in _stores(ca).items()}
        | {"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
        "SSL",
    )
    assert tls.server_context.maximum_version == ssl.TLSVersion.TLSv1_2
    assert [c["name"] for c in tls.server_context.get_ciphers() if c["protocol"] == "TLSv1.2"] == [
        "ECDHE-ECDSA-AES128-GCM-SHA256"
    ]


def test_the_subject_is_named_as_java_names_it(ca):
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc"),), (("commonName", "#alice "),))
    assert distinguished_name(subject) == "CN=\\#alice\\ ,O=Acme\\, Inc,C=US"
    issued = ca.issue("bob", organizational_unit="Eng+Ops", organization="Acme")
    with_email = ((("commonName", "x"),), (("emailAddress", "x@example.com"),))
    assert distinguished_name(with_email) == "1.2.840.113549.1.9.1=#160d78406578616d706c652e636f6d,CN=x"
    parsed = ssl._ssl._test_decode_cert(str(issued.cert_path))  # the dict getpeercert() returns
    assert distinguished_name(parsed["subject"]) == issued.subject  # cryptography's RFC 4514 text


def test_principal_mapping_rules_as_kafka_applies_them():
    mapper = SslPrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\n"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT"
    )
    assert mapper.name("CN=kafka-server1,OU=ServiceUsers,O=Org,C=US") == "kafka-server1"
    assert mapper.name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US") == "duke@javasoft"
    assert mapper.name("OU=Eng,CN=alice.b") == "ALICE.B"
    assert mapper.name("O=NoCommonName") == "O=NoCommonName"
    assert SslPrincipalMapper("DEFAULT").principal(None) == ANONYMOUS
    with pytest.raises(ValueError, match="No rules apply"):
        SslPrincipalMapper("RULE:^CN=a$/b/").name("CN=c")
    assert SslPrincipalMapper("RULE:^CN=([^,]*)\\/x$/$1\\/y/").name("CN=a/x") == "a/y"
