"""Every version of every admin API this module serves answers a well-formed request, and ApiVersions
advertises exactly the APIs and version ranges the broker serves."""

from __future__ import annotations

import time

import pytest

from odradek.protocol.api_keys import API_SPECS, ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.alter_configs import AlterConfigsRequest
from odradek.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from odradek.protocol.messages.api_versions import ApiVersionsRequest
from odradek.protocol.messages.create_partitions import CreatePartitionsRequest
from odradek.protocol.messages.create_topics import CreateTopicsRequest
from odradek.protocol.messages.delete_groups import DeleteGroupsRequest
from odradek.protocol.messages.delete_records import DeleteRecordsRequest
from odradek.protocol.messages.delete_topics import DeleteTopicsRequest
from odradek.protocol.messages.describe_cluster import DescribeClusterRequest
from odradek.protocol.messages.describe_configs import DescribeConfigsRequest
from odradek.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from odradek.protocol.messages.elect_leaders import ElectLeadersRequest
from odradek.protocol.messages.find_coordinator import FindCoordinatorRequest
from odradek.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from odradek.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from odradek.protocol.messages.metadata import MetadataRequest
from odradek.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from odradek.server.handlers import registry
from tests.conftest import topic_name

# The APIs a client may rely on, with their ranges: dropping an API or narrowing a range fails here,
# and so does adding one without writing it down.
EXPECTED_RANGES: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 11),
    ApiKey.FETCH: (4, 18),
    ApiKey.LIST_OFFSETS: (1, 11),
    ApiKey.METADATA: (0, 13),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 5),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 5),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 5),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 0),
}


def topic_for(client, version: int) -> str:
    name = topic_name(f"v{version}")
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=2, replication_factor=1)
    (result,) = client.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics=[topic])).topics
    assert result.error_code == ErrorCode.NONE
    return name


def errors_of(response) -> list[int]:
    """Every error_code in a response, top level and nested."""
    codes = []
    stack = [response]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif hasattr(item, "__dataclass_fields__"):
            codes.extend([item.error_code] if hasattr(item, "error_code") else [])
            stack.extend(getattr(item, f) for f in item.__dataclass_fields__)
    return codes


def test_expected_ranges_are_the_registry_and_within_kafka():
    registered = {key: (m.MIN_VERSION, m.MAX_VERSION) for key, m in registry().items()}
    assert registered == EXPECTED_RANGES
    for key, (low, high) in EXPECTED_RANGES.items():
        kafka = API_SPECS[key].request_versions
        assert low <= high and low in kafka and high in kafka, ApiKey(key).name


@pytest.mark.parametrize("version", range(0, 6))
def test_api_versions(connect, version):
    request = ApiVersionsRequest(client_software_name="matrix", client_software_version="1")
    response = connect().call(ApiKey.API_VERSIONS, version, request)
    assert errors_of(response) == [0]
    advertised = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
    assert advertised == sorted((key, low, high) for key, (low, high) in EXPECTED_RANGES.items())


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata(connect, version):
    client = connect()
    name = topic_for(client, version)
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)])
    response = client.call(ApiKey.METADATA, version, request)
    assert [len(t.partitions) for t in response.topics] == [2]
    assert set(errors_of(response)) == {0}


@pytest.mark.parametrize("version", range(0, 8))
def test_create_topics(connect, version):
    topic = CreateTopicsRequest.CreatableTopic(
        name=topic_name(f"c{version}"), num_partitions=1, replication_factor=1
    )
    response = connect().call(ApiKey.CREATE_TOPICS, version, CreateTopicsRequest(topics=[topic]))
    assert set(errors_of(response)) == {0}


@pytest.mark.parametrize("version", range(0, 7))
def test_delete_topics(connect, version):
    client = connect()
    name = topic_for(client, version)
    state = DeleteTopicsRequest.DeleteTopicState
    request = DeleteTopicsRequest(topic_names=[name], topics=[state(name=name)])
    assert set(errors_of(client.call(ApiKey.DELETE_TOPICS, version, request))) == {0}


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions(connect, version):
    client = connect()
    grow = CreatePartitionsRequest.CreatePartitionsTopic(name=topic_for(client, version), count=3)
    response = client.call(ApiKey.CREATE_PARTITIONS, version, CreatePartitionsRequest(topics=[grow]))
    assert set(errors_of(response)) == {0}


@pytest.mark.parametrize("version", range(0, 5))
def test_describe_configs(connect, version):
    client = connect()
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[resource(resource_type=2, resource_name=topic_for(client, version)),
                   resource(resource_type=4, resource_name="0")],
        include_synonyms=True,
        include_documentation=True,
    )  # fmt: skip
    response = client.call(ApiKey.DESCRIBE_CONFIGS, version, request)
    assert set(errors_of(response)) == {0}
    assert all(result.configs for result in response.results)


@pytest.mark.parametrize("version", range(0, 3))
def test_alter_configs(connect, version):
    client = connect()
    config = AlterConfigsRequest.AlterableConfig(name="retention.ms", value="12345")
    resource = AlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name=topic_for(client, version), configs=[config]
    )
    response = client.call(ApiKey.ALTER_CONFIGS, version, AlterConfigsRequest(resources=[resource]))
    assert set(errors_of(response)) == {0}


@pytest.mark.parametrize("version", range(0, 2))
def test_incremental_alter_configs(connect, version):
    client = connect()
    config = IncrementalAlterConfigsRequest.AlterableConfig(
        name="retention.ms", config_operation=0, value="1"
    )
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name=topic_for(client, version), configs=[config]
    )
    request = IncrementalAlterConfigsRequest(resources=[resource])
    assert set(errors_of(client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, request))) == {0}


@pytest.mark.parametrize("version", range(0, 3))
def test_describe_cluster(connect, version):
    request = DescribeClusterRequest(include_fenced_brokers=True)
    response = connect().call(ApiKey.DESCRIBE_CLUSTER, version, request)
    assert set(errors_of(response)) == {0} and response.brokers
    assert not any(b.is_fenced for b in response.brokers)


@pytest.mark.parametrize("version", range(0, 4))
def test_delete_groups(connect, version):
    client, names = connect(), [f"matrix-delete-groups-v{version}"]
    find = FindCoordinatorRequest(key=names[0])
    deadline = time.monotonic() + 30  # the first FindCoordinator creates __consumer_offsets
    while client.call(ApiKey.FIND_COORDINATOR, 3, find).error_code != ErrorCode.NONE:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    request = DeleteGroupsRequest(groups_names=names)
    while (response := client.call(ApiKey.DELETE_GROUPS, version, request)).results[0].error_code in (
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
    ):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert [(r.group_id, r.error_code, r.error_message) for r in response.results] == [
        (names[0], ErrorCode.GROUP_ID_NOT_FOUND, None)
    ]


@pytest.mark.parametrize("version", range(0, 3))
def test_delete_records(connect, version):
    client = connect()
    name = topic_for(client, version)
    partition = DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=-1)
    request = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(name, [partition])])
    response = client.call(ApiKey.DELETE_RECORDS, version, request)
    assert set(errors_of(response)) == {0}
    assert [p.low_watermark for t in response.topics for p in t.partitions] == [0]


@pytest.mark.parametrize("version", range(0, 6))
def test_describe_log_dirs(connect, version):
    client = connect()
    name = topic_for(client, version)
    request = DescribeLogDirsRequest(topics=[DescribeLogDirsRequest.DescribableLogDirTopic(name, [0, 1])])
    response = client.call(ApiKey.DESCRIBE_LOG_DIRS, version, request)
    assert set(errors_of(response)) == {0}
    (result,) = response.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [(name, [0, 1])]
    assert (result.total_bytes > 0) == (version >= 4) and not result.is_cordoned


@pytest.mark.parametrize("version", range(0, 3))
def test_elect_leaders(connect, version):
    """A single node's one replica already leads: no election needed; a null list (every
    partition) answers only the partitions that needed one, none here; an unknown election type
    is INVALID_REQUEST (v1+, where the type exists)."""
    client = connect()
    name = topic_for(client, version)
    asked = [ElectLeadersRequest.TopicPartitions(topic=name, partitions=[0, 1, 7])]
    response = client.call(ApiKey.ELECT_LEADERS, version, ElectLeadersRequest(topic_partitions=asked))
    (result,) = response.replica_election_results
    codes = {p.partition_id: p.error_code for p in result.partition_result}
    assert codes == {0: ErrorCode.ELECTION_NOT_NEEDED, 1: ErrorCode.ELECTION_NOT_NEEDED,
                     7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}  # fmt: skip
    everything = client.call(ApiKey.ELECT_LEADERS, version, ElectLeadersRequest(topic_partitions=None))
    assert everything.replica_election_results == [] and everything.error_code == 0
    if version >= 1:
        bad = ElectLeadersRequest(election_type=7, topic_partitions=asked)
        refused = client.call(ApiKey.ELECT_LEADERS, version, bad)
        assert refused.error_code == ErrorCode.INVALID_REQUEST
        assert {p.error_code for r in refused.replica_election_results for p in r.partition_result} == {
            ErrorCode.INVALID_REQUEST
        }


def test_partition_reassignments_on_a_single_node(connect):
    """The node is its own controller: a move to itself changes nothing, another broker is not live."""
    client = connect()
    name = topic_for(client, 0)

    def alter(replicas: list[int] | None) -> int:
        partition = AlterPartitionReassignmentsRequest.ReassignablePartition(
            partition_index=0, replicas=replicas
        )
        topic = AlterPartitionReassignmentsRequest.ReassignableTopic(name=name, partitions=[partition])
        response = client.call(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, AlterPartitionReassignmentsRequest(topics=[topic])
        )
        assert response.error_code == 0
        return response.responses[0].partitions[0].error_code

    own_id = client.call(ApiKey.METADATA, 1, MetadataRequest(topics=[])).controller_id
    assert alter([own_id]) == ErrorCode.NONE
    assert alter([own_id + 1]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert alter(None) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    listed = client.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, ListPartitionReassignmentsRequest())
    assert (listed.error_code, listed.topics) == (0, [])


@pytest.mark.parametrize("version", range(0, 2))
def test_write_txn_markers(connect, version):
    client = connect()
    name = topic_for(client, version)

    def write(producer_epoch: int, topic: str = name) -> list[int]:
        topics = [WriteTxnMarkersRequest.WritableTxnMarkerTopic(topic, [0, 1])]
        marker = WriteTxnMarkersRequest.WritableTxnMarker(42, producer_epoch, False, topics, 0)
        response = client.call(ApiKey.WRITE_TXN_MARKERS, version, WriteTxnMarkersRequest(markers=[marker]))
        (result,) = response.markers
        assert result.producer_id == 42 and [t.name for t in result.topics] == [topic]
        return [p.error_code for t in result.topics for p in t.partitions]

    assert write(3) == [0, 0]
    assert write(2) == [ErrorCode.INVALID_PRODUCER_EPOCH] * 2
    assert write(3, topic_name("missing")) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
