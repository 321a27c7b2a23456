"""The console's ACL, SCRAM user and client quota pages, in a headless Chromium against one broker
with an authorizer: a PLAINTEXT inter-broker listener (User:ANONYMOUS, a super user: the tests' own
admin clients) and a SASL_PLAINTEXT listener with SCRAM-SHA-256, where the console's users log in
(read-write) and the users the console creates produce. The super user `admin` makes the changes;
`bob`, allowed to describe the cluster but not to alter it, is refused. Every change made in the
browser is checked through another path: confluent_kafka's AdminClient, a SCRAM producer, a
DescribeClientQuotas of its own."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import jinja2
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek.client import KafkaClient
from odradek.console.acl_pages import Acl
from odradek.console.filters import FILTERS
from odradek.console.reader import ClientQuota
from odradek.console.user_pages import Credential
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from odradek.testing.broker import BrokerProcess, free_port
from tests.console.browsing import snapshot, submit, visit

TOPIC = "payments"
USER = "alice"
FIRST, SECOND = "first-secret", "second-secret"
ADMIN, BOB = ("admin", "admin-secret"), ("bob", "bob-secret")
SCRAM_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="unused";'
)


class Broker:
    def __init__(self, process: BrokerProcess, sasl: str, base: str) -> None:
        self.process, self.sasl, self.base = process, sasl, base
        self.plaintext = process.bootstrap


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    root = tmp_path_factory.mktemp("security-admin")
    port, sasl_port, http_port = free_port(), free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "super.users": f"User:ANONYMOUS;User:{ADMIN[0]}",
        "http.listeners": f"http://127.0.0.1:{http_port}",
        "console.authentication": "sasl",
        "console.sasl.mechanism": "SCRAM-SHA-256",
    }
    with BrokerProcess(
        root / "data", port=port, overrides=overrides, output_path=root / "broker.out"
    ) as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        scram_user(admin, *ADMIN)
        yield Broker(process, f"127.0.0.1:{sasl_port}", f"http://127.0.0.1:{http_port}")


def scram_user(admin: AdminClient, user: str, password: str) -> None:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsertion = UserScramCredentialUpsertion(user, info, password.encode())
    admin.alter_user_scram_credentials([upsertion])[user].result(30)


def log_in(browser: Any, broker: Broker, user: str, password: str) -> str:
    browser.get(broker.base + "/login")
    return submit(browser, "form[action='/login']", username=user, password=password)


def every_acl(broker: Broker) -> list[AclBinding]:
    admin = AdminClient({"bootstrap.servers": broker.plaintext})
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    return list(admin.describe_acls(everything).result(30))


def test_an_acl_is_created_filtered_and_deleted(broker, browser, screenshots):
    assert f"User:{ADMIN[0]}" in log_in(browser, broker, *ADMIN)
    page = visit(browser, screenshots, broker.base + "/acls", "acls-empty")
    assert "0 of 0 ACL bindings" in page and "Create an ACL" in page

    page = submit(
        browser,
        "form.create-acl",
        resource_type="TOPIC",
        resource_name="pay",
        pattern_type="PREFIXED",
        principal="User:bob",
        host="*",
        operation="WRITE",
        permission="DENY",
    )
    assert "Created the ACL: DENY User:bob from * WRITE on TOPIC PREFIXED 'pay'." in page
    assert "TOPIC pay PREFIXED User:bob * WRITE DENY" in page
    snapshot(browser, screenshots, "acls-list")
    assert every_acl(broker) == [
        AclBinding(
            ResourceType.TOPIC,
            "pay",
            ResourcePatternType.PREFIXED,
            "User:bob",
            "*",
            AclOperation.WRITE,
            AclPermissionType.DENY,
        )
    ]

    assert "1 of 1 ACL binding" in visit(
        browser, screenshots, broker.base + "/acls?principal=bob", "acls-filtered"
    )
    assert "0 of 1 ACL binding" in visit(browser, screenshots, broker.base + "/acls?type=GROUP", "acls-none")

    page = submit(
        browser,
        "form.create-acl",
        resource_type="GROUP",
        resource_name="g",
        principal="User:bob",
        operation="WRITE",
    )
    assert "A GROUP ACL may name only ALL, READ, DESCRIBE, DELETE; not WRITE." in page  # 400, nothing sent
    assert len(every_acl(broker)) == 1

    browser.get(broker.base + "/acls?principal=bob")
    page = submit(browser, "form.delete-acl")
    assert browser.current_url == broker.base + "/acls?principal=bob"  # still filtered
    assert "Deleted the ACL: DENY User:bob from * WRITE on TOPIC PREFIXED 'pay'." in page
    assert "0 of 0 ACL bindings" in page
    assert every_acl(broker) == []


def produce_as(broker: Broker, password: str) -> str | None:
    """None when a record is produced as USER with `password` over SCRAM-SHA-256; else the error."""
    errors: list[str] = []
    delivered: list[object] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.sasl,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": USER,
            "sasl.password": password,
            "message.timeout.ms": 15000,
            "error_cb": lambda error: errors.append(str(error)),
            "log_level": 0,
        }
    )
    producer.produce(TOPIC, b"hello", on_delivery=lambda error, _: delivered.append(error))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not delivered:
        producer.poll(0.1)
        if any("Authentication failed" in e or "authentication" in e.lower() for e in errors):
            return errors[0]
    if delivered and delivered[0] is None:
        return None
    return str(delivered[0]) if delivered else f"not delivered: {errors}"


def test_a_scram_user_is_created_changed_and_deleted(broker, browser, screenshots):
    page = visit(browser, screenshots, broker.base + "/users", "users-admin")
    assert f"{ADMIN[0]} SCRAM-SHA-256 4096" in page and USER not in page

    page = submit(browser, "form.create-user", user=USER, mechanism="SCRAM-SHA-256", password=FIRST)
    assert f"Set the SCRAM-SHA-256 password of {USER} (4096 iterations)." in page
    assert f"{USER} SCRAM-SHA-256 4096" in page
    snapshot(browser, screenshots, "users-list")
    assert produce_as(broker, FIRST) is None
    assert produce_as(broker, "wrong") is not None

    form = f"form.change-password[data-user='{USER}'][data-mechanism='SCRAM-SHA-256']"
    page = submit(browser, form, password=SECOND, iterations="8192")
    assert f"Set the SCRAM-SHA-256 password of {USER} (8192 iterations)." in page
    assert f"{USER} SCRAM-SHA-256 8192" in page
    assert produce_as(broker, FIRST) is not None
    assert produce_as(broker, SECOND) is None

    page = submit(browser, f"form.delete-user[data-user='{USER}']")
    assert f"Deleted the SCRAM-SHA-256 credential of {USER}." in page
    assert USER not in page.replace(f"credential of {USER}", "")
    assert produce_as(broker, SECOND) is not None

    # a credential made elsewhere is listed; deleted meanwhile, its delete button is refused
    admin = AdminClient({"bootstrap.servers": broker.plaintext})
    scram_user(admin, "carol", "carol-secret")
    assert "carol SCRAM-SHA-256 4096" in visit(browser, screenshots, broker.base + "/users", "users-carol")
    deletion = UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)
    admin.alter_user_scram_credentials([deletion])["carol"].result(30)
    page = submit(browser, "form.delete-user[data-user='carol']")
    assert "Refused: RESOURCE_NOT_FOUND" in page and "Deleted" not in page


def quotas_of(broker: Broker, entity_type: str, name: str | None) -> dict[str, float]:
    """The quotas of one entity (a name, or None: the default), as DescribeClientQuotas (strict)
    answers them."""
    match_type, match = (0, name) if name is not None else (1, None)  # EXACT, DEFAULT
    component = DescribeClientQuotasRequest.ComponentData(entity_type, match_type, match)
    request = DescribeClientQuotasRequest(components=[component], strict=True)
    with KafkaClient(broker.plaintext) as client:
        response = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, request)
    assert response.error_code == 0, response.error_message
    return {v.key: v.value for entry in response.entries or () for v in entry.values}


def test_a_user_quota_is_set_and_removed(broker, browser, screenshots):
    visit(browser, screenshots, broker.base + "/quotas", "quotas-empty")
    page = submit(browser, "form.set-quota", user=USER, key="producer_byte_rate", value="1048576")
    assert f"Set producer_byte_rate of user {USER} to 1048576." in page
    assert f"{USER} 1048576 Remove - - -" in page
    snapshot(browser, screenshots, "quotas-edit")
    assert quotas_of(broker, "user", USER) == {"producer_byte_rate": 1048576.0}

    page = submit(browser, f"form.remove-quota[data-user='{USER}'][data-key='producer_byte_rate']")
    assert f"Removed producer_byte_rate of user {USER}." in page
    assert "No client quotas are set." in page
    assert quotas_of(broker, "user", USER) == {}

    default_client = {"client_id_default": "on", "key": "consumer_byte_rate"}
    page = submit(browser, "form.set-quota", **default_client, value="2048.5")  # a byte rate is whole
    assert "Refused: INVALID_REQUEST: Configuration consumer_byte_rate must be a Long value" in page
    assert quotas_of(broker, "client-id", None) == {}
    page = submit(browser, "form.set-quota", **default_client, value="2048")
    assert "Set consumer_byte_rate of client-id <default> to 2048." in page
    assert "<default> - 2048 Remove - -" in page
    assert quotas_of(broker, "client-id", None) == {"consumer_byte_rate": 2048.0}
    page = submit(browser, "form.set-quota", **default_client, value="")
    assert "Removed consumer_byte_rate of client-id <default>." in page
    assert quotas_of(broker, "client-id", None) == {}


def test_a_user_not_allowed_is_refused(broker, browser, screenshots):
    admin = AdminClient({"bootstrap.servers": broker.plaintext})
    scram_user(admin, *BOB)
    bindings = [
        AclBinding(
            ResourceType.BROKER,
            "kafka-cluster",
            ResourcePatternType.LITERAL,
            f"User:{BOB[0]}",
            "*",
            operation,
            permission,
        )
        for operation, permission in (
            (AclOperation.DESCRIBE, AclPermissionType.ALLOW),
            (AclOperation.ALTER, AclPermissionType.DENY),
        )
    ]
    for future in admin.create_acls(bindings).values():
        future.result(30)
    submit(browser, "form[action='/logout']")
    assert f"User:{BOB[0]}" in log_in(browser, broker, *BOB)

    visit(browser, screenshots, broker.base + "/acls", "acls-bob")
    page = submit(
        browser,
        "form.create-acl",
        resource_type="TOPIC",
        resource_name=TOPIC,
        principal=f"User:{BOB[0]}",
        operation="READ",
        permission="ALLOW",
    )
    assert "Refused: CLUSTER_AUTHORIZATION_FAILED" in page and "Created" not in page
    snapshot(browser, screenshots, "acls-refused")
    assert len(every_acl(broker)) == 2

    visit(browser, screenshots, broker.base + "/users", "users-bob")
    page = submit(browser, "form.create-user", user="mallory", password="mallory-secret")
    assert "Refused: CLUSTER_AUTHORIZATION_FAILED" in page and "mallory" not in page
    described = admin.describe_user_scram_credentials().result(30)
    assert sorted(described) == [ADMIN[0], BOB[0]]

    page = visit(browser, screenshots, broker.base + "/quotas", "quotas-bob")
    assert "Not allowed" in page and f"User:{BOB[0]} may not do this" in page


@pytest.mark.parametrize("read_only", [False, True])
def test_read_only_pages_have_no_forms_that_change(read_only):
    templates = jinja2.Environment(
        loader=jinja2.PackageLoader("odradek.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    templates.filters.update(FILTERS)
    common = {
        "nav": (),
        "path": "/",
        "session": None,
        "csrf_token": "",
        "csrf_field": "csrf_token",
        "csrf_input": "",
        "flashes": [],
        "read_only": read_only,
        "login": False,
        "static": lambda name: f"/static/{name}",
        "title": "t",
    }
    pages = {
        "acls/list.html": {
            "acls": [Acl("TOPIC", "t", "LITERAL", "User:bob", "*", "READ", "ALLOW")],
            "total": 1,
            "wanted": {"type": "", "name": "", "principal": ""},
            "disabled": "",
            "resource_types": ["TOPIC"],
            "pattern_types": ["LITERAL"],
            "operations": ["READ"],
            "permissions": ["ALLOW"],
        },
        "users/list.html": {
            "credentials": [Credential("bob", "SCRAM-SHA-256", 4096)],
            "mechanisms": ["SCRAM-SHA-256"],
            "min_iterations": 4096,
            "max_iterations": 16384,
            "default_iterations": 4096,
        },
        "quotas/list.html": {
            "quotas": [ClientQuota({"user": "bob"}, {"producer_byte_rate": 1024.0})],
            "keys": ("producer_byte_rate",),
        },
    }
    for name, context in pages.items():
        html = templates.get_template(name).render(**common, **context)
        forms = html.count('method="post"')
        assert (forms == 0) if read_only else (forms >= 2), (name, forms)
        if read_only and name == "quotas/list.html":  # as tests/quotas/test_quota_admin.py reads it
            assert '<td class="num">1024</td>' in html
