"""Shared pieces of the SASL tests: a broker's SASL settings (JAAS configs made at test time), the
users they know, unsecured OAUTHBEARER tokens, raw-client exchanges, and each client library's
SASL settings."""

from __future__ import annotations

import base64
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from odradek.network_client import ClientSecurity
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from odradek.protocol.messages.sasl_handshake import SaslHandshakeRequest
from odradek.security.sasl.client import SaslClientSettings, sasl_authenticate
from odradek.security.sasl.mechanisms import oauthbearer_client_token, plain_client_token
from odradek.security.sasl.scram import ScramMechanism as Scram
from odradek.security.sasl.scram import credential_from_password
from odradek.testing.cluster import LocalCluster
from tests.conftest import CLUSTER_SESSION_TIMEOUT_MS
from tests.server.raw_client import RawClient

LISTENER = "sasl_plaintext"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
ALICE, ALICE_PASSWORD = "alice", "alice-secret"
SCRAM_USER, SCRAM_PASSWORD = "bob", "bob-secret"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def jaas(module: str, **options: str) -> str:
    rendered = " ".join(f'{name}="{value}"' for name, value in options.items())
    return f"{module} required {rendered};"


def sasl_overrides(listener: str = LISTENER, **extra: object) -> dict[str, object]:
    """Every mechanism enabled on `listener`; PLAIN knows admin and alice; the broker's own
    credentials are admin's."""
    prefix = f"listener.name.{listener}"
    return {
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        f"{prefix}.plain.sasl.jaas.config": jaas(
            PLAIN_MODULE,
            username=ADMIN,
            password=ADMIN_PASSWORD,
            user_admin=ADMIN_PASSWORD,
            user_alice=ALICE_PASSWORD,
        ),
        f"{prefix}.scram-sha-256.sasl.jaas.config": jaas(
            SCRAM_MODULE, username=ADMIN, password=ADMIN_PASSWORD
        ),
        f"{prefix}.scram-sha-512.sasl.jaas.config": jaas(
            SCRAM_MODULE, username=ADMIN, password=ADMIN_PASSWORD
        ),
        f"{prefix}.oauthbearer.sasl.jaas.config": jaas(OAUTH_MODULE, unsecuredLoginStringClaim_sub=ADMIN),
        **extra,
    }


def unsecured_jwt(subject: str, lifetime_s: float = 3600, issued_s: float | None = None) -> str:
    """An unsigned JWS as Kafka's unsecured login module makes one."""
    issued_s = time.time() if issued_s is None else issued_s

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'iat': issued_s, 'exp': issued_s + lifetime_s})}."


def handshake(client: RawClient, mechanism: str, version: int = 1) -> Any:
    return client.call(ApiKey.SASL_HANDSHAKE, version, SaslHandshakeRequest(mechanism))


def authenticate(client: RawClient, token: bytes, version: int = 2) -> Any:
    return client.call(ApiKey.SASL_AUTHENTICATE, version, SaslAuthenticateRequest(token))


def plain_login(client: RawClient, user: str, password: str, version: int = 2) -> Any:
    assert handshake(client, "PLAIN").error_code == 0
    return authenticate(client, plain_client_token(user, password), version)


def oauth_login(client: RawClient, token: str, version: int = 2) -> Any:
    assert handshake(client, "OAUTHBEARER").error_code == 0
    return authenticate(client, oauthbearer_client_token(token), version)


def confluent_config(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
    }
    if mechanism == "OAUTHBEARER":
        config.update(
            {"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": f"principal={user}"}
        )
    else:
        config.update({"sasl.username": user, "sasl.password": password})
    return config


def kafka_python_config(mechanism: str, user: str, password: str) -> dict[str, object]:
    """kafka-python's and aiokafka's keyword arguments (they share the names)."""
    config: dict[str, object] = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        config["sasl_oauth_token_provider"] = _token_provider(user)
    else:
        config.update({"sasl_plain_username": user, "sasl_plain_password": password})
    return config


def _token_provider(user: str) -> Any:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class UnsecuredTokens(AbstractTokenProvider):
        def token(self) -> str:
            return unsecured_jwt(user)

    return UnsecuredTokens()


def aiokafka_token_provider(user: str) -> Any:
    from aiokafka.abc import AbstractTokenProvider

    class UnsecuredTokens(AbstractTokenProvider):
        async def token(self) -> str:
            return unsecured_jwt(user)

    return UnsecuredTokens()


def store_scram_credential(connect: str, chroot: str, user: str, password: str) -> None:
    """A SCRAM-SHA-512 credential in Kafka's form, written to ZooKeeper before any broker starts (as
    `kafka-configs.sh --zookeeper` would: the brokers' own, which they need to authenticate)."""
    credential = credential_from_password(Scram.SCRAM_SHA_512, password, 4096)
    zk = KazooClient(hosts=connect, timeout=5.0)
    zk.start(timeout=10)
    try:
        data = {"version": 1, "config": {"SCRAM-SHA-512": credential.to_config()}}
        zk.create(f"{chroot}/config/users/{user}", json.dumps(data).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()


CLUSTER_LISTENER = "PLAINTEXT"  # the name LocalCluster's brokers listen under, mapped to SASL_PLAINTEXT


@contextlib.contextmanager
def sasl_cluster(connect: str, root: Path, **overrides: object) -> Iterator[LocalCluster]:
    """Three brokers on the ZooKeeper at `connect` (a chroot of their own) whose only listener is
    SASL_PLAINTEXT: every mechanism for clients, SCRAM-SHA-512 between brokers as User:admin (its
    credential stored before they start), with `overrides`; handed over once a controller rules."""
    chroot = f"/sasl-{uuid.uuid4().hex[:8]}"
    store_scram_credential(connect, chroot, ADMIN, ADMIN_PASSWORD)
    settings = sasl_overrides(
        CLUSTER_LISTENER.lower(),
        **{
            "listener.security.protocol.map": f"{CLUSTER_LISTENER}:SASL_PLAINTEXT",
            "inter.broker.listener.name": CLUSTER_LISTENER,
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            **overrides,
        },
    )
    probes = SaslClientSettings("PLAIN", {"username": ADMIN, "password": ADMIN_PASSWORD})
    cluster = LocalCluster(
        root,
        3,
        zookeeper_connect=connect,
        chroot=chroot,
        session_timeout_ms=CLUSTER_SESSION_TIMEOUT_MS,
        overrides=settings,
        security=ClientSecurity("SASL_PLAINTEXT", authenticate=sasl_authenticate(probes)),
    )
    try:
        cluster.start()
        cluster.wait_for_controller(timeout_s=30)
        yield cluster
    finally:
        cluster.close()
