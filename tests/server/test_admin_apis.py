"""Metadata and the admin APIs end to end: raw requests to a real broker process."""

from __future__ import annotations

import uuid

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.alter_configs import AlterConfigsRequest
from odradek.protocol.messages.create_partitions import CreatePartitionsRequest
from odradek.protocol.messages.create_topics import CreateTopicsRequest
from odradek.protocol.messages.delete_topics import DeleteTopicsRequest
from odradek.protocol.messages.describe_cluster import DescribeClusterRequest
from odradek.protocol.messages.describe_configs import DescribeConfigsRequest
from odradek.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from odradek.protocol.messages.metadata import MetadataRequest
from tests.conftest import topic_name

NewTopic = CreateTopicsRequest.CreatableTopic
TopicConfig = CreateTopicsRequest.CreatableTopicConfig
Assignment = CreateTopicsRequest.CreatableReplicaAssignment
TOPIC, BROKER = 2, 4


@pytest.fixture
def client(connect):
    return connect()


def create(client, *topics, version=7, validate_only=False):
    request = CreateTopicsRequest(topics=list(topics), timeout_ms=5000, validate_only=validate_only)
    return client.call(ApiKey.CREATE_TOPICS, version, request).topics


def metadata(client, *names, version=12, allow_auto_topic_creation=False):
    topics = [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    request = MetadataRequest(topics=topics, allow_auto_topic_creation=allow_auto_topic_creation)
    return client.call(ApiKey.METADATA, version, request)


def topic_configs(client, name, *keys):
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC, resource_name=name, configuration_keys=list(keys) or None
    )
    request = DescribeConfigsRequest(resources=[resource], include_synonyms=True)
    (result,) = client.call(ApiKey.DESCRIBE_CONFIGS, 4, request).results
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {c.name: c for c in result.configs}


def test_create_topic_with_defaults_then_metadata(client, broker):
    name = topic_name("defaults")
    (result,) = create(client, NewTopic(name=name, num_partitions=-1, replication_factor=-1))
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 1, 1)
    assert result.topic_id != uuid.UUID(int=0)
    assert {c.name for c in result.configs} >= {"retention.ms", "segment.bytes", "cleanup.policy"}
    response = metadata(client, name)
    assert response.cluster_id and response.controller_id == 0
    assert [(b.node_id, f"{b.host}:{b.port}") for b in response.brokers] == [(0, broker.bootstrap)]
    (topic,) = response.topics
    assert (topic.error_code, topic.name, topic.topic_id) == (0, name, result.topic_id)
    (partition,) = topic.partitions
    assert (partition.leader_id, partition.replica_nodes, partition.isr_nodes) == (0, [0], [0])
    assert partition.leader_epoch >= 0
    assert topic.topic_authorized_operations == -2147483648


def test_create_topic_errors(client):
    name = topic_name("errors")
    results = create(
        client,
        NewTopic(name=name, num_partitions=3, replication_factor=1),
        NewTopic(name="bad name!", num_partitions=1, replication_factor=1),
        NewTopic(name=topic_name("rf"), num_partitions=1, replication_factor=3),
        NewTopic(name=topic_name("parts"), num_partitions=0, replication_factor=1),
        NewTopic(name=topic_name("cfg"), num_partitions=1, replication_factor=1,
                 configs=[TopicConfig(name="retention.ms", value="soon")]),
        NewTopic(name=topic_name("unknown-cfg"), num_partitions=1, replication_factor=1,
                 configs=[TopicConfig(name="no.such.config", value="1")]),
        NewTopic(name=topic_name("both"), num_partitions=2, replication_factor=-1,
                 assignments=[Assignment(partition_index=0, broker_ids=[0])]),
        NewTopic(name=topic_name("assign"), num_partitions=-1, replication_factor=-1,
                 assignments=[Assignment(partition_index=0, broker_ids=[5])]),
    )  # fmt: skip
    assert [r.error_code for r in results] == [
        ErrorCode.NONE,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.INVALID_REPLICATION_FACTOR,
        ErrorCode.INVALID_PARTITIONS,
        ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    ]
    assert "retention.ms" in results[4].error_message
    assert results[1].num_partitions == -1 and results[1].configs == []  # as Kafka: empty, not null
    (again,) = create(client, NewTopic(name=name, num_partitions=1, replication_factor=1))
    assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_duplicate_names_in_one_request_are_invalid(client):
    name = topic_name("dup")
    results = create(client, NewTopic(name=name, num_partitions=1, replication_factor=1),
                     NewTopic(name=name, num_partitions=2, replication_factor=1))  # fmt: skip
    assert [r.error_code for r in results] == [ErrorCode.INVALID_REQUEST] * 2
    assert metadata(client, name).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_validate_only_creates_nothing(client):
    name = topic_name("validate")
    (result,) = create(
        client, NewTopic(name=name, num_partitions=4, replication_factor=1), validate_only=True
    )
    assert (result.error_code, result.num_partitions) == (ErrorCode.NONE, 4)
    assert metadata(client, name).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_explicit_assignment_and_topic_configs(client):
    name = topic_name("assigned")
    (result,) = create(client, NewTopic(
        name=name, num_partitions=-1, replication_factor=-1,
        assignments=[Assignment(partition_index=i, broker_ids=[0]) for i in range(3)],
        configs=[TopicConfig(name="retention.ms", value="60000"),
                 TopicConfig(name="cleanup.policy", value="compact")],
    ))  # fmt: skip
    assert (result.error_code, result.num_partitions) == (0, 3)
    configs = topic_configs(client, name)
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("60000", 1)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].config_source == 5
    assert configs["retention.ms"].synonyms[0].source == 1
    assert configs["retention.ms"].config_type == 5  # LONG


def test_metadata_auto_creates_only_when_allowed(client):
    name = topic_name("auto")
    assert metadata(client, name).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    (topic,) = metadata(client, name, allow_auto_topic_creation=True).topics
    assert topic.error_code == ErrorCode.NONE and len(topic.partitions) == 1
    (legacy,) = metadata(client, topic_name("auto-v3"), version=3).topics
    assert legacy.error_code == ErrorCode.NONE
    (bad,) = metadata(client, "bad/name", allow_auto_topic_creation=True).topics
    assert bad.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_metadata_all_topics_and_lookup_by_id(client):
    name = topic_name("all")
    (created,) = create(client, NewTopic(name=name, num_partitions=2, replication_factor=1))
    everything = client.call(ApiKey.METADATA, 12, MetadataRequest(topics=None)).topics
    assert name in {t.name for t in everything}
    v0 = client.call(ApiKey.METADATA, 0, MetadataRequest(topics=[])).topics
    assert name in {t.name for t in v0}
    by_id = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(topic_id=created.topic_id, name=None)]
    )
    (topic,) = client.call(ApiKey.METADATA, 12, by_id).topics
    assert (topic.name, len(topic.partitions)) == (name, 2)
    unknown = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(topic_id=uuid.uuid4(), name=None)])
    assert client.call(ApiKey.METADATA, 12, unknown).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_delete_topics_by_name_and_id(client):
    first, second = topic_name("del-a"), topic_name("del-b")
    created = create(client, NewTopic(name=first, num_partitions=1, replication_factor=1),
                     NewTopic(name=second, num_partitions=1, replication_factor=1))  # fmt: skip
    by_name = client.call(
        ApiKey.DELETE_TOPICS, 5, DeleteTopicsRequest(topic_names=[first, topic_name("nope")], timeout_ms=5000)
    )
    assert [r.error_code for r in by_name.responses] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    state = DeleteTopicsRequest.DeleteTopicState
    by_id = DeleteTopicsRequest(
        topics=[state(topic_id=created[1].topic_id, name=None), state(topic_id=uuid.uuid4(), name=None)],
        timeout_ms=5000,
    )
    responses = client.call(ApiKey.DELETE_TOPICS, 6, by_id).responses
    assert [(r.name, r.error_code) for r in responses] == [
        (second, ErrorCode.NONE),
        (None, ErrorCode.UNKNOWN_TOPIC_ID),
    ]
    assert [t.error_code for t in metadata(client, first, second).topics] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    ] * 2


def test_create_partitions(client):
    name = topic_name("grow")
    create(client, NewTopic(name=name, num_partitions=2, replication_factor=1))
    grow = CreatePartitionsRequest.CreatePartitionsTopic
    request = CreatePartitionsRequest(
        topics=[grow(name=name, count=5), grow(name=topic_name("none"), count=2)], timeout_ms=5000
    )
    results = client.call(ApiKey.CREATE_PARTITIONS, 3, request).results
    assert [r.error_code for r in results] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert len(metadata(client, name).topics[0].partitions) == 5
    shrink = CreatePartitionsRequest(topics=[grow(name=name, count=3)])
    (result,) = client.call(ApiKey.CREATE_PARTITIONS, 3, shrink).results
    assert result.error_code == ErrorCode.INVALID_PARTITIONS and "higher" in result.error_message
    dry = CreatePartitionsRequest(topics=[grow(name=name, count=9)], validate_only=True)
    assert client.call(ApiKey.CREATE_PARTITIONS, 3, dry).results[0].error_code == ErrorCode.NONE
    assert len(metadata(client, name).topics[0].partitions) == 5


def test_create_topics_waits_for_leaders_only_when_asked(client):
    """With timeout_ms the answer comes once every partition serves; too short a timeout answers
    REQUEST_TIMED_OUT while the topic is created all the same."""
    waited, hurried = topic_name("waited"), topic_name("hurried")
    (result,) = create(client, NewTopic(name=waited, num_partitions=20, replication_factor=1))
    assert result.error_code == ErrorCode.NONE
    (topic,) = metadata(client, waited).topics
    assert [p.error_code for p in topic.partitions] == [ErrorCode.NONE] * 20
    request = CreateTopicsRequest(
        topics=[NewTopic(name=hurried, num_partitions=200, replication_factor=1)], timeout_ms=1
    )
    (late,) = client.call(ApiKey.CREATE_TOPICS, 7, request).topics
    assert late.error_code == ErrorCode.REQUEST_TIMED_OUT and late.num_partitions == 200
    gone = DeleteTopicsRequest(topic_names=[waited, hurried], timeout_ms=30_000)
    assert [r.error_code for r in client.call(ApiKey.DELETE_TOPICS, 5, gone).responses] == [0, 0]


def test_requests_past_max_broker_partitions_are_refused_whole(client):
    """The default cap is 10,000 replicas per broker: nothing of a request past it is written."""
    name, small = topic_name("too-big"), topic_name("small")
    (refused,) = create(client, NewTopic(name=name, num_partitions=10_001, replication_factor=1))
    assert (
        refused.error_code == ErrorCode.POLICY_VIOLATION and "max.broker.partitions" in refused.error_message
    )
    create(client, NewTopic(name=small, num_partitions=1, replication_factor=1))
    grow = CreatePartitionsRequest.CreatePartitionsTopic
    request = CreatePartitionsRequest(topics=[grow(name=small, count=10_001)], timeout_ms=5000)
    assert (
        client.call(ApiKey.CREATE_PARTITIONS, 3, request).results[0].error_code == ErrorCode.POLICY_VIOLATION
    )
    found = metadata(client, name, small).topics
    assert found[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and len(found[1].partitions) == 1


def test_describe_broker_configs(client):
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(resources=[
        resource(resource_type=BROKER, resource_name="0", configuration_keys=["num.partitions", "log.dirs"]),
        resource(resource_type=BROKER, resource_name="7"),
        resource(resource_type=TOPIC, resource_name=topic_name("missing")),
    ])  # fmt: skip
    results = client.call(ApiKey.DESCRIBE_CONFIGS, 4, request).results
    assert [r.error_code for r in results] == [
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    configs = {c.name: c for c in results[0].configs}
    assert set(configs) == {"num.partitions", "log.dirs"}
    assert (configs["num.partitions"].value, configs["num.partitions"].config_source) == ("1", 5)
    assert configs["log.dirs"].config_source == 4 and configs["log.dirs"].read_only


def test_describe_configs_v0_reports_is_default(client):
    name = topic_name("v0")
    create(client, NewTopic(name=name, num_partitions=1, replication_factor=1,
                            configs=[TopicConfig(name="segment.bytes", value="100000")]))  # fmt: skip
    resource = DescribeConfigsRequest.DescribeConfigsResource(resource_type=TOPIC, resource_name=name)
    (result,) = client.call(ApiKey.DESCRIBE_CONFIGS, 0, DescribeConfigsRequest(resources=[resource])).results
    configs = {c.name: c for c in result.configs}
    assert configs["segment.bytes"].value == "100000" and not configs["segment.bytes"].is_default
    assert configs["retention.bytes"].is_default


def test_alter_configs_replaces_the_override_set(client):
    name = topic_name("alter")
    create(client, NewTopic(name=name, num_partitions=1, replication_factor=1,
                            configs=[TopicConfig(name="retention.ms", value="1000")]))  # fmt: skip
    alterable = AlterConfigsRequest.AlterableConfig
    resource = AlterConfigsRequest.AlterConfigsResource(
        resource_type=TOPIC, resource_name=name, configs=[alterable(name="segment.ms", value="5000")]
    )
    (result,) = client.call(ApiKey.ALTER_CONFIGS, 2, AlterConfigsRequest(resources=[resource])).responses
    assert result.error_code == ErrorCode.NONE
    configs = topic_configs(client, name, "segment.ms", "retention.ms")
    assert configs["segment.ms"].value == "5000" and configs["segment.ms"].config_source == 1
    assert configs["retention.ms"].config_source == 5
    bad = AlterConfigsRequest.AlterConfigsResource(
        resource_type=TOPIC, resource_name=name, configs=[alterable(name="segment.ms", value="0")]
    )
    (result,) = client.call(ApiKey.ALTER_CONFIGS, 2, AlterConfigsRequest(resources=[bad])).responses
    assert result.error_code == ErrorCode.INVALID_CONFIG
    assert topic_configs(client, name, "segment.ms")["segment.ms"].value == "5000"


def test_incremental_alter_configs(client):
    name = topic_name("incremental")
    create(client, NewTopic(name=name, num_partitions=1, replication_factor=1,
                            configs=[TopicConfig(name="retention.ms", value="1000")]))  # fmt: skip
    op = IncrementalAlterConfigsRequest.AlterableConfig
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource

    def alter(*ops):
        request = IncrementalAlterConfigsRequest(resources=[resource(resource_type=TOPIC, resource_name=name,
                                                                     configs=list(ops))])  # fmt: skip
        return client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request).responses[0].error_code

    changed = alter(op(name="max.message.bytes", config_operation=0, value="2000"),
                    op(name="cleanup.policy", config_operation=2, value="compact"))  # fmt: skip
    assert changed == ErrorCode.NONE
    configs = topic_configs(client, name, "max.message.bytes", "cleanup.policy", "retention.ms")
    assert configs["max.message.bytes"].value == "2000"
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["retention.ms"].value == "1000"
    assert alter(op(name="retention.ms", config_operation=1)) == ErrorCode.NONE
    assert topic_configs(client, name, "retention.ms")["retention.ms"].config_source == 5
    assert alter(op(name="retention.ms", config_operation=2, value="1")) == ErrorCode.INVALID_CONFIG
    assert alter(op(name="a", config_operation=0, value="1"), op(name="a", config_operation=1)) == (
        ErrorCode.INVALID_REQUEST
    )


def test_describe_cluster(client, broker):
    response = client.call(
        ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(include_cluster_authorized_operations=True)
    )
    assert response.error_code == ErrorCode.NONE
    assert [(b.broker_id, f"{b.host}:{b.port}") for b in response.brokers] == [(0, broker.bootstrap)]
    assert response.controller_id == 0 and response.cluster_id
    assert response.cluster_authorized_operations > 0
    controllers = client.call(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=2))
    assert controllers.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
