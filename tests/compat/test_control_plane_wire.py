"""A single-node broker is its own controller: LeaderAndIsr, UpdateMetadata and StopReplica frames
from the wire (from a would-be controller with a far newer controller epoch, trying to move a
partition's leadership away or delete it) close the connection, as a Kafka broker closes the
connection of a request for an API its mode does not enable; ApiVersions does not list them; the
partition keeps its leader and its data, and takes and serves records afterwards.

The frames are encoded with odradek's codec (the same encoder a remote controller uses); everything
else goes through the independent wire client of wire.py."""

from __future__ import annotations

import uuid

import pytest

from odradek.controller.channel import (
    ControllerIdentity,
    leader_and_isr_request,
    stop_replica_request,
    update_metadata_request,
)
from odradek.controller.metadata import BrokerInfo, Endpoint, PartitionState
from odradek.protocol.api_keys import ApiKey
from tests.compat import helpers, wire
from tests.server.raw_client import request_frame

TOPIC = "controller-takeover"
INTRUDER = 99
INTRUDER_EPOCH = 1_000_000


def takeover_frames(broker_id: int) -> dict[str, bytes]:
    sender = ControllerIdentity(INTRUDER, INTRUDER_EPOCH)
    state = PartitionState(INTRUDER, 1000, (INTRUDER, broker_id), (INTRUDER,), INTRUDER_EPOCH, 1000)
    topics = {TOPIC: (uuid.uuid4(), {0: state})}
    intruder = BrokerInfo(INTRUDER, (Endpoint("PLAINTEXT", "127.0.0.1", 1),))
    return {
        "LeaderAndIsr": request_frame(
            ApiKey.LEADER_AND_ISR, 7, leader_and_isr_request(sender, topics, [intruder]), 1
        ),
        "UpdateMetadata": request_frame(
            ApiKey.UPDATE_METADATA, 8, update_metadata_request(sender, topics, [intruder]), 2
        ),
        "StopReplica": request_frame(
            ApiKey.STOP_REPLICA, 4, stop_replica_request(sender, {TOPIC: {0: -1}}, delete=True), 3
        ),
    }


@pytest.mark.parametrize("api", ["LeaderAndIsr", "UpdateMetadata", "StopReplica"])
def test_single_node_refuses_controller_requests_from_the_wire_and_keeps_serving(fresh_broker, api):
    bootstrap = fresh_broker.bootstrap
    helpers.create_topic(bootstrap, TOPIC)
    with wire.Connection(bootstrap) as conn:
        (broker_id,) = conn.metadata([TOPIC]).brokers
        assert conn.produce(TOPIC, 0, wire.record_batch([(b"k", b"before")])).error_code == 0
        versions = conn.api_versions()
    assert versions.error_code == 0
    assert not {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA} & set(versions.ranges)

    sock = wire.connect(bootstrap)
    try:
        sock.sendall(takeover_frames(broker_id)[api])
        assert wire.is_closed_by_peer(sock)
    finally:
        sock.close()

    with wire.Connection(bootstrap) as conn:
        metadata = conn.metadata([TOPIC])
        assert metadata.topics[TOPIC].partitions[0] == (0, broker_id)
        assert set(metadata.brokers) == {broker_id}
        assert conn.produce(TOPIC, 0, wire.record_batch([(b"k", b"after")])).error_code == 0
        assert [r.value for r in conn.read_all(TOPIC)] == [b"before", b"after"]
