"""InitProducerId over raw frames: every version, Kafka's answers, and ids unique across restarts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages.init_producer_id import InitProducerIdRequest
from odradek.testing.broker import BrokerProcess
from tests.server.raw_client import RawClient

VERSIONS = range(0, 6)


def init(client: RawClient, version: int = 5, **fields: object):
    request = InitProducerIdRequest(transaction_timeout_ms=60_000, **fields)  # type: ignore[arg-type]
    return client.call(ApiKey.INIT_PRODUCER_ID, version, request)


@pytest.fixture
def client(connect) -> RawClient:
    return connect()


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_hands_out_a_new_id_at_epoch_zero(client: RawClient, version: int) -> None:
    first, second = init(client, version), init(client, version)
    assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
    assert (second.error_code, second.producer_epoch) == (ErrorCode.NONE, 0)
    assert 0 <= first.producer_id < second.producer_id


def test_given_id_and_epoch_without_transactional_id_still_get_a_fresh_id(client: RawClient) -> None:
    first = init(client)
    again = init(client, producer_id=first.producer_id, producer_epoch=first.producer_epoch)
    assert again.error_code == ErrorCode.NONE
    assert (again.producer_id, again.producer_epoch) != (first.producer_id, first.producer_epoch)
    assert again.producer_epoch == 0 and again.producer_id > first.producer_id


@pytest.mark.parametrize("fields", [{"producer_id": 5}, {"producer_epoch": 3}])
def test_half_given_producer_id_and_epoch_is_an_invalid_request(client: RawClient, fields) -> None:
    response = init(client, **fields)
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert (response.producer_id, response.producer_epoch) == (-1, -1)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"transactional_id": "txn-a"}, ErrorCode.NOT_COORDINATOR),  # no FindCoordinator yet
        ({"transactional_id": ""}, ErrorCode.INVALID_REQUEST),
        ({"transactional_id": "txn-b", "transaction_timeout_ms": 0}, ErrorCode.INVALID_TRANSACTION_TIMEOUT),
        (
            {"transactional_id": "txn-c", "transaction_timeout_ms": 900_001},
            ErrorCode.INVALID_TRANSACTION_TIMEOUT,
        ),
    ],
)
def test_transactional_ids_get_kafkas_errors_before_the_coordinator_is_found(
    client: RawClient, fields: dict, code: ErrorCode
) -> None:
    version = 1  # a non-flexible version too
    request = InitProducerIdRequest(**{"transaction_timeout_ms": 60_000, **fields})
    response = client.call(ApiKey.INIT_PRODUCER_ID, version, request)
    assert response.error_code == code
    assert (response.producer_id, response.producer_epoch) == (-1, -1)


def test_the_reserved_block_is_recorded_in_the_first_log_dir(
    broker: BrokerProcess, client: RawClient
) -> None:
    produced = init(client).producer_id
    block = json.loads((broker.data_dir / "producer-id-block").read_text())
    assert int(block["block_start"]) <= produced <= int(block["block_end"])
    assert int(block["block_end"]) - int(block["block_start"]) == 999


@pytest.mark.parametrize("hard", [False, True])
def test_ids_are_never_reused_after_a_restart(tmp_path: Path, hard: bool) -> None:
    broker = BrokerProcess(tmp_path / "data", output_path=tmp_path / "broker.out")
    broker.start()
    try:
        with RawClient(broker.bootstrap) as client:
            before = [init(client).producer_id for _ in range(3)]
        broker.restart(hard=hard)
        with RawClient(broker.bootstrap) as client:
            after = init(client).producer_id
    finally:
        broker.stop()
    assert before == [0, 1, 2]
    assert after == 1000  # the rest of the first block is skipped, as in Kafka
