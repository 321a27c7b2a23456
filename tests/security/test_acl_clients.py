"""ACLs against real clients on a single broker (`odradek serve` with an authorizer).

Until SASL and TLS land every PLAINTEXT client is User:ANONYMOUS, so the broker runs with
`allow.everyone.if.no.acl.found=true`: a resource without ACLs is open (that is how `odradek acls`
may create the first ACLs), and each test puts ALLOW / DENY ACLs for User:ANONYMOUS on resources of
its own, through `odradek acls` (kafka-acls.sh's flags) or the admin client's CreateAcls. Then
confluent-kafka, kafka-python and aiokafka are refused or served as Kafka would: produce, consume,
consumer groups, admin calls and transactions. Also: the ACLs survive a restart (the local file),
super.users overrides a DENY, a broker without an authorizer answers SECURITY_DISABLED, and Metadata
reports the operations the principal is allowed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewPartitions,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.errors import TopicAuthorizationFailedError as KafkaPythonTopicAuthorizationFailed

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    MetadataRequest,
)
from odradek.security.acl_store import ACLS_FILE
from odradek.testing.broker import BrokerProcess
from tests.cli.tooling import ok, run_odradek
from tests.compat.helpers import QUIET, TIMEOUT_S, admin, consume, create_topic, produce
from tests.server.raw_client import RawClient

ANONYMOUS = "User:ANONYMOUS"
SECURED = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("acl-broker")
    with BrokerProcess(root / "data", overrides=SECURED, output_path=root / "broker.out") as process:
        yield process


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def acls(broker: BrokerProcess, *args: str) -> str:
    return ok("acls", "--bootstrap-server", broker.bootstrap, *args)


def deny(broker: BrokerProcess, operation: str, *resource: str) -> None:
    acls(broker, "--add", "--deny-principal", ANONYMOUS, "--operation", operation, *resource)


def produce_error(bootstrap: str, topic: str, **conf: object) -> int | None:
    """The error code of one record's delivery (None: delivered)."""
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET, **conf})
    found: list[int | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: found.append(err.code() if err else None))
    assert producer.flush(TIMEOUT_S) == 0
    return found[0]


def test_produce_is_refused_where_an_acl_denies_write_and_served_elsewhere(broker):
    open_topic, denied = name("open"), name("nowrite")
    for topic in (open_topic, denied):
        create_topic(broker.bootstrap, topic)
    deny(broker, "Write", "--topic", denied)
    assert produce_error(broker.bootstrap, open_topic) is None
    assert produce_error(broker.bootstrap, denied) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    async def aiokafka_send(topic: str) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"v")
        finally:
            await producer.stop()

    asyncio.run(aiokafka_send(open_topic))
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(aiokafka_send(denied))


def test_a_prefixed_allow_admits_only_its_topics_and_deny_wins(broker):
    prefix = name("team")
    allowed, denied, outside = f"{prefix}-a", f"{prefix}-b", name("other")
    for topic in (allowed, denied, outside):
        create_topic(broker.bootstrap, topic)
    acls(
        broker,
        "--add",
        "--allow-principal",
        ANONYMOUS,
        "--producer",
        "--topic",
        f"{prefix}-",
        "--resource-pattern-type",
        "prefixed",
    )
    deny(broker, "All", "--topic", denied)
    assert produce_error(broker.bootstrap, allowed) is None
    assert produce_error(broker.bootstrap, denied) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # an ALLOW for another principal only: ANONYMOUS has no ACL there and is refused
    acls(broker, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", outside)
    assert produce_error(broker.bootstrap, outside) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_consume_is_refused_where_an_acl_denies_read(broker):
    topic = name("noread")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"a", b"b"])
    assert len(consume(broker.bootstrap, topic, 2)) == 2
    # once a topic has ACLs, only they decide: DESCRIBE is allowed so that only the fetch is refused
    acls(broker, "--add", "--allow-principal", ANONYMOUS, "--operation", "Describe", "--topic", topic)
    deny(broker, "Read", "--topic", topic)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    try:
        consumer.assign([KafkaPythonPartition(topic, 0)])
        consumer.seek(KafkaPythonPartition(topic, 0), 0)
        with pytest.raises(KafkaPythonTopicAuthorizationFailed):
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=500)
    finally:
        consumer.close()


def test_a_consumer_group_the_principal_may_not_read_is_refused(broker):
    topic, group, open_group = name("grouped"), name("nogroup"), name("group")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"x"])
    deny(broker, "Read", "--group", group)

    def first_event(group_id: str) -> KafkaError | None:
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group_id,
                "auto.offset.reset": "earliest",
                **QUIET,
            }
        )
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None:
                    return message.error()
            raise AssertionError("no message and no error")
        finally:
            consumer.close()

    assert first_event(open_group) is None
    error = first_event(group)
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_admin_calls_follow_the_acls(broker):
    locked, hidden = name("locked"), name("hidden")
    client = admin(broker.bootstrap)
    for topic in (locked, hidden):
        create_topic(broker.bootstrap, topic)
    acls(broker, "--add", "--allow-principal", ANONYMOUS, "--operation", "Describe", "--topic", locked)
    deny(broker, "Alter", "--topic", locked)
    deny(broker, "Describe", "--topic", hidden)
    deny(broker, "Delete", "--topic", hidden)
    with pytest.raises(KafkaException) as refused:
        client.create_partitions([NewPartitions(locked, 2)])[locked].result(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as refused:
        client.delete_topics([hidden])[hidden].result(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert hidden not in client.list_topics(timeout=TIMEOUT_S).topics
    described = client.describe_acls(
        AclBindingFilter(
            ResourceType.TOPIC,
            hidden,
            ResourcePatternType.LITERAL,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(TIMEOUT_S)
    assert sorted(b.operation for b in described) == [AclOperation.DELETE, AclOperation.DESCRIBE]


def test_transactions_need_write_on_the_transactional_id(broker):
    topic, allowed_id, denied_id = name("txn"), name("tx-ok"), name("tx-denied")
    create_topic(broker.bootstrap, topic)
    client = admin(broker.bootstrap)
    entry = (ANONYMOUS, "*", AclOperation.WRITE, AclPermissionType.DENY)
    for future in client.create_acls(
        [AclBinding(ResourceType.TRANSACTIONAL_ID, denied_id, ResourcePatternType.LITERAL, *entry)]
    ).values():
        future.result(TIMEOUT_S)
    committed = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": allowed_id, **QUIET})
    committed.init_transactions(TIMEOUT_S)
    committed.begin_transaction()
    committed.produce(topic, b"in-txn")
    committed.commit_transaction(TIMEOUT_S)
    refused = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": denied_id, **QUIET})
    with pytest.raises(KafkaException) as failed:
        refused.init_transactions(TIMEOUT_S)
    assert failed.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_acls_cli_lists_and_removes_as_kafka_acls_does(broker):
    topic = name("listed")
    create_topic(broker.bootstrap, topic)
    out = acls(
        broker,
        "--add",
        "--deny-principal",
        ANONYMOUS,
        "--operation",
        "Write",
        "--operation",
        "Read",
        "--topic",
        topic,
    )
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert f"Adding ACLs for resource `{pattern}`: " in out
    assert f"(principal={ANONYMOUS}, host=*, operation=WRITE, permissionType=DENY)" in out
    listed = acls(broker, "--list", "--topic", topic)
    assert listed.splitlines()[0] == f"Current ACLs for resource `{pattern}`: "
    assert listed.count("permissionType=DENY") == 2
    assert produce_error(broker.bootstrap, topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    acls(broker, "--remove", "--force", "--topic", topic)
    assert "principal=" not in acls(broker, "--list", "--topic", topic)
    assert produce_error(broker.bootstrap, topic) is None
    refused = run_odradek(
        "acls",
        "--bootstrap-server",
        broker.bootstrap,
        "--add",
        "--allow-principal",
        ANONYMOUS,
        "--operation",
        "Write",
        "--group",
        "g",
    )
    assert refused.returncode == 1 and "only supports operations" in refused.stderr


def test_acls_survive_a_restart_and_super_users_pass_every_check(tmp_path: Path):
    topic = name("kept")
    process = BrokerProcess(tmp_path / "data", overrides=SECURED, output_path=tmp_path / "broker.out")
    with process:
        create_topic(process.bootstrap, topic)
        deny(process, "Write", "--topic", topic)
        assert produce_error(process.bootstrap, topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        process.overrides["super.users"] = ANONYMOUS
        process.restart()
        assert produce_error(process.bootstrap, topic) is None
        del process.overrides["super.users"]
        process.restart()
        assert produce_error(process.bootstrap, topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topic in (tmp_path / "data" / ACLS_FILE).read_text()


def test_a_broker_without_an_authorizer_answers_security_disabled(tmp_path: Path):
    with BrokerProcess(tmp_path / "data", output_path=tmp_path / "broker.out") as process:
        done = run_odradek("acls", "--bootstrap-server", process.bootstrap, "--list")
    assert done.returncode == 1 and "No Authorizer is configured on the broker" in done.stderr


def test_metadata_reports_the_principals_authorized_operations(broker):
    topic = name("ops")
    create_topic(broker.bootstrap, topic)
    acls(broker, "--add", "--allow-principal", ANONYMOUS, "--operation", "Read", "--topic", topic)
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    with RawClient(broker.bootstrap) as client:
        response = client.call(ApiKey.METADATA, 10, request)
    (described,) = response.topics
    # READ, and DESCRIBE which READ implies; nothing else
    assert described.topic_authorized_operations == (1 << 3) | (1 << 8)
    # the cluster has no ACL: allow.everyone.if.no.acl.found allows every cluster operation
    assert response.cluster_authorized_operations == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def test_the_producer_and_consumer_conveniences_are_all_a_client_needs(broker):
    topic, group = name("convenient"), name("readers")
    create_topic(broker.bootstrap, topic)
    acls(broker, "--add", "--allow-principal", ANONYMOUS, "--producer", "--topic", topic)
    acls(broker, "--add", "--allow-principal", ANONYMOUS, "--consumer", "--topic", topic, "--group", group)
    listed = acls(broker, "--list", "--topic", topic) + acls(broker, "--list", "--group", group)
    for operation in ("WRITE", "DESCRIBE", "CREATE", "READ"):
        assert f"operation={operation}, permissionType=ALLOW" in listed

    async def round_trip() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"through-acls")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            message = await asyncio.wait_for(consumer.getone(), TIMEOUT_S)
            await consumer.commit()
            return [message.value]
        finally:
            await consumer.stop()

    # once the topic and the group have ACLs, only they decide: these are enough
    assert asyncio.run(round_trip()) == [b"through-acls"]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_of_the_acl_apis_creates_describes_and_deletes(broker, version):
    topic = name(f"v{version}")
    creation = CreateAclsRequest.AclCreation(
        resource_type=2, resource_name=topic, principal="User:carol", host="*", operation=3, permission_type=3
    )
    wanted = {"resource_type_filter": 2, "resource_name_filter": topic, "operation": 1, "permission_type": 1}
    with RawClient(broker.bootstrap) as client:
        created = client.call(ApiKey.CREATE_ACLS, version, CreateAclsRequest(creations=[creation]))
        described = client.call(ApiKey.DESCRIBE_ACLS, version, DescribeAclsRequest(**wanted))
        deleted = client.call(
            ApiKey.DELETE_ACLS,
            version,
            DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(**wanted)]),
        )
        after = client.call(ApiKey.DESCRIBE_ACLS, version, DescribeAclsRequest(**wanted))
    assert [r.error_code for r in created.results] == [ErrorCode.NONE]
    assert [
        (r.resource_name, r.pattern_type, [a.principal for a in r.acls]) for r in described.resources
    ] == [(topic, 3, ["User:carol"])]
    (result,) = deleted.filter_results
    assert result.error_code == ErrorCode.NONE and [m.resource_name for m in result.matching_acls] == [topic]
    assert after.resources == []


def test_an_invalid_acl_is_refused_with_invalid_request(broker):
    creations = [
        CreateAclsRequest.AclCreation(
            resource_type=4,
            resource_name="other-cluster",
            principal=ANONYMOUS,
            host="*",
            operation=7,
            permission_type=3,
        ),
        CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="t", principal="no-colon", host="*", operation=3, permission_type=3
        ),
        CreateAclsRequest.AclCreation(
            resource_type=2,
            resource_name="t",
            resource_pattern_type=1,
            principal=ANONYMOUS,
            host="*",
            operation=3,
            permission_type=3,
        ),
    ]
    with RawClient(broker.bootstrap) as client:
        response = client.call(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=creations))
    assert [r.error_code for r in response.results] == [ErrorCode.INVALID_REQUEST] * 3
    assert "kafka-cluster" in (response.results[0].error_message or "")


def test_the_scram_and_quota_apis_need_their_cluster_operations(tmp_path: Path):
    """DescribeUserScramCredentials needs DESCRIBE on the cluster, AlterUserScramCredentials ALTER,
    DescribeClientQuotas DESCRIBE_CONFIGS and AlterClientQuotas ALTER_CONFIGS: each refused
    CLUSTER_AUTHORIZATION_FAILED once the principal is denied that operation, nothing altered."""
    from odradek.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as Quotas
    from odradek.protocol.messages.alter_user_scram_credentials import (
        AlterUserScramCredentialsRequest as Scram,
    )
    from odradek.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
    from odradek.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest

    with BrokerProcess(tmp_path / "data", overrides=SECURED, output_path=tmp_path / "broker.out") as process:
        # the cluster's other operations stay allowed (once the cluster has an ACL, no-ACL-found no
        # longer applies to it); the four denied in one CreateAcls, since ALTER guards CreateAcls and
        # DESCRIBE the tool's listing after it (which therefore fails: its exit status is not asked)
        acls(process, "--add", "--allow-principal", ANONYMOUS, "--operation", "All", "--cluster")
        run_odradek("acls", "--bootstrap-server", process.bootstrap, "--add", "--deny-principal", ANONYMOUS,
                    "--operation", "Describe", "--operation", "Alter", "--operation", "DescribeConfigs",
                    "--operation", "AlterConfigs", "--cluster")  # fmt: skip
        entry = Quotas.EntryData(
            [Quotas.EntityData("client-id", "c")], [Quotas.OpData("producer_byte_rate", 1000.0)]
        )
        upsert = Scram.ScramCredentialUpsertion("u", 1, 4096, b"salt" * 8, b"p" * 32)
        with RawClient(process.bootstrap) as client:
            described = client.call(
                ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, DescribeUserScramCredentialsRequest()
            )
            altered = client.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, Scram(upsertions=[upsert]))
            quotas = client.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, DescribeClientQuotasRequest())
            set_quota = client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, Quotas([entry]))
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [r.error_code for r in altered.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    assert quotas.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [e.error_code for e in set_quota.entries] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
