"""Error codes, KafkaError, and the generated API key facts."""

from __future__ import annotations

import pytest

from odradek.protocol.api_keys import API_SPECS, ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError, check, error_name
from odradek.protocol.messages import MESSAGE_CLASSES, FetchRequest, FetchResponse
from odradek.protocol.schema import VERSION_MAX, Versions


def test_error_codes_cover_kafka_3_9_and_4_with_kafka_names() -> None:
    assert [c.value for c in ErrorCode] == list(range(-1, 130))
    expected = {
        "UNKNOWN_SERVER_ERROR": -1,
        "NONE": 0,
        "OFFSET_OUT_OF_RANGE": 1,
        "CORRUPT_MESSAGE": 2,
        "UNKNOWN_TOPIC_OR_PARTITION": 3,
        "INVALID_FETCH_SIZE": 4,
        "MESSAGE_TOO_LARGE": 10,
        "NOT_ENOUGH_REPLICAS": 19,
        "UNSUPPORTED_VERSION": 35,
        "TOPIC_ALREADY_EXISTS": 36,
        "INVALID_PARTITIONS": 37,
        "INVALID_REPLICATION_FACTOR": 38,
        "INVALID_CONFIG": 40,
        "INVALID_RECORD": 87,
        "UNKNOWN_TOPIC_ID": 100,
        "VOTER_NOT_FOUND": 127,
        "INVALID_REGULAR_EXPRESSION": 128,
        "REBOOTSTRAP_REQUIRED": 129,
    }
    assert {name: ErrorCode[name].value for name in expected} == expected


def test_retriable_codes_follow_kafka() -> None:
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and ErrorCode.COORDINATOR_LOAD_IN_PROGRESS.retriable
    assert not ErrorCode.TOPIC_ALREADY_EXISTS.retriable and not ErrorCode.NONE.retriable


def test_kafka_error_carries_code_and_message() -> None:
    error = KafkaError(36, "topic t exists")
    assert error.code is ErrorCode.TOPIC_ALREADY_EXISTS and error.message == "topic t exists"
    assert str(error) == "TOPIC_ALREADY_EXISTS: topic t exists" and not error.retriable
    assert str(KafkaError(ErrorCode.REQUEST_TIMED_OUT)) == "REQUEST_TIMED_OUT"
    assert error_name(6) == "NOT_LEADER_OR_FOLLOWER" and error_name(4242) == "UNKNOWN_ERROR_CODE_4242"


def test_check_names_the_code_once_when_the_broker_gave_no_message() -> None:
    check(ErrorCode.NONE)
    with pytest.raises(KafkaError) as refused:
        check(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    assert refused.value.message == "CLUSTER_AUTHORIZATION_FAILED"  # callers print the message alone
    assert str(refused.value) == "CLUSTER_AUTHORIZATION_FAILED"
    with pytest.raises(KafkaError, match="^INVALID_REQUEST: no such user$"):
        check(ErrorCode.INVALID_REQUEST, "no such user")


def test_api_keys_and_version_facts() -> None:
    assert (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA) == (0, 1, 2, 3)
    assert (ApiKey.API_VERSIONS, ApiKey.CREATE_TOPICS, ApiKey.OFFSET_DELETE, ApiKey.DESCRIBE_CLUSTER) == (
        18,
        19,
        47,
        60,
    )
    produce = API_SPECS[ApiKey.PRODUCE]
    # Kafka 3.9.0's v0-v2 (which Kafka 4 removed) and Kafka 4.4.0's v12-v13
    assert produce.request_versions == Versions(0, 13) and produce.request_flexible == Versions(
        9, VERSION_MAX
    )
    assert API_SPECS[ApiKey.LEADER_AND_ISR].zk_broker and not API_SPECS[ApiKey.BROKER_REGISTRATION].zk_broker
    assert API_SPECS[ApiKey.SASL_HANDSHAKE].request_flexible.empty


def test_message_registry_covers_every_api_key() -> None:
    assert set(MESSAGE_CLASSES) == {int(k) for k in ApiKey}
    assert MESSAGE_CLASSES[ApiKey.FETCH] == (FetchRequest, FetchResponse)
