"""LocalMetadata: persistence, elections on open, topic name rules, assignments, listeners."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from odradek.controller.local import METADATA_FILE, LocalMetadata
from odradek.controller.meta_properties import (
    MetaPropertiesError,
    ensure_meta_properties,
    new_cluster_id,
    read_meta_properties,
)
from odradek.controller.metadata import BrokerInfo, Endpoint, TopicChange, validate_topic_name
from odradek.protocol.errors import ErrorCode, KafkaError

BROKER = BrokerInfo(0, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),))


def open_backend(tmp_path):
    return LocalMetadata.open(tmp_path, BROKER, "cluster-a")


def error_code(fn, *args, **kwargs) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        fn(*args, **kwargs)
    return info.value.code


def test_created_topic_survives_reopen_with_same_id_and_bumped_epochs(tmp_path):
    backend = open_backend(tmp_path)
    created = backend.create_topic("orders", 3, 1, {"retention.ms": "1000"})
    assert sorted(created.partitions) == [0, 1, 2]
    assert created.partitions[0].leader == 0 and created.partitions[0].isr == (0,)

    reopened = open_backend(tmp_path)
    topic = reopened.topic("orders")
    assert topic is not None
    assert topic.topic_id == created.topic_id
    assert topic.configs == {"retention.ms": "1000"}
    assert topic.partitions[1].leader_epoch == created.partitions[1].leader_epoch + 1
    assert topic.partitions[1].partition_epoch == created.partitions[1].partition_epoch + 1
    assert reopened.controller_epoch == backend.controller_epoch + 1
    assert reopened.topic_by_id(created.topic_id) is topic


def test_file_is_json_written_atomically(tmp_path):
    backend = open_backend(tmp_path)
    topic = backend.create_topic("t", 1, 1, {})
    document = json.loads((tmp_path / METADATA_FILE).read_text())
    assert document["topics"]["t"]["topic_id"] == str(topic.topic_id)
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a" * 250, "has space", "slash/name", "ünï"],
)
def test_illegal_topic_names_are_refused(tmp_path, name):
    backend = open_backend(tmp_path)
    assert error_code(backend.create_topic, name, 1, 1, {}) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert backend.topics() == {}


def test_legal_topic_names(tmp_path):
    for name in ["a" * 249, "A.b_c-9", "..."]:
        validate_topic_name(name)


def test_duplicate_and_colliding_names(tmp_path):
    backend = open_backend(tmp_path)
    backend.create_topic("a.b", 1, 1, {})
    assert error_code(backend.create_topic, "a.b", 1, 1, {}) == ErrorCode.TOPIC_ALREADY_EXISTS
    assert error_code(backend.create_topic, "a_b", 1, 1, {}) == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_partition_and_replication_factor_validation(tmp_path):
    backend = open_backend(tmp_path)
    assert error_code(backend.create_topic, "t", 0, 1, {}) == ErrorCode.INVALID_PARTITIONS
    assert error_code(backend.create_topic, "t", 1, 2, {}) == ErrorCode.INVALID_REPLICATION_FACTOR
    assert error_code(backend.create_topic, "t", 1, 0, {}) == ErrorCode.INVALID_REPLICATION_FACTOR
    bad = {0: [0], 2: [0]}
    assert error_code(backend.create_topic, "t", -1, -1, {}, bad) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    unknown = {0: [7]}
    assert error_code(backend.create_topic, "t", -1, -1, {}, unknown) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    topic = backend.create_topic("t", -1, -1, {}, {0: [0], 1: [0]})
    assert sorted(topic.partitions) == [0, 1]


def test_validate_only_changes_nothing(tmp_path):
    backend = open_backend(tmp_path)
    seen: list[TopicChange] = []
    backend.add_listener(seen.append)
    backend.create_topic("t", 2, 1, {}, validate_only=True)
    assert backend.topic("t") is None and seen == []


def test_create_partitions_grows_only(tmp_path):
    backend = open_backend(tmp_path)
    backend.create_topic("t", 2, 1, {})
    assert error_code(backend.create_partitions, "t", 2) == ErrorCode.INVALID_PARTITIONS
    assert error_code(backend.create_partitions, "t", 1) == ErrorCode.INVALID_PARTITIONS
    assert error_code(backend.create_partitions, "nope", 3) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    grown = backend.create_partitions("t", 4)
    assert sorted(grown.partitions) == [0, 1, 2, 3]
    assert sorted(open_backend(tmp_path).topic("t").partitions) == [0, 1, 2, 3]


def test_listeners_hear_create_grow_alter_delete(tmp_path):
    backend = open_backend(tmp_path)
    seen: list[TopicChange] = []
    backend.add_listener(seen.append)
    backend.create_topic("t", 1, 1, {})
    backend.create_partitions("t", 2)
    backend.alter_topic_configs("t", {"cleanup.policy": "compact"})
    backend.delete_topic("t")
    assert [(c.previous is None, c.current is None) for c in seen] == [
        (True, False),
        (False, False),
        (False, False),
        (False, True),
    ]
    assert len(seen[1].current.partitions) == 2
    assert seen[2].current.configs == {"cleanup.policy": "compact"}
    assert error_code(backend.delete_topic, "t") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert open_backend(tmp_path).topics() == {}


def test_internal_topics_are_marked(tmp_path):
    backend = open_backend(tmp_path)
    assert backend.create_topic("__consumer_offsets", 1, 1, {}).is_internal
    assert not backend.create_topic("plain", 1, 1, {}).is_internal


def test_meta_properties_written_and_checked(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    cluster_id = ensure_meta_properties(dirs, 3, None)
    assert len(cluster_id) == 22
    for d in dirs:
        props = read_meta_properties(d)
        assert props == {"version": "1", "broker.id": "3", "cluster.id": cluster_id}
    assert ensure_meta_properties(dirs, 3, None) == cluster_id
    with pytest.raises(MetaPropertiesError, match="broker.id"):
        ensure_meta_properties(dirs, 4, None)
    with pytest.raises(MetaPropertiesError, match="cluster.id"):
        ensure_meta_properties(dirs, 3, "another-cluster")


def test_cluster_ids_are_random_uuids():
    first, second = new_cluster_id(), new_cluster_id()
    assert first != second
    assert uuid.UUID(bytes=base64.urlsafe_b64decode(first + "=="))
