"""SIGTERM while a group member waits in a JoinGroup: the broker answers it and exits cleanly.

The group coordinator is stopped before the network drain, so a JoinGroup parked in a rebalance is
answered NOT_COORDINATOR (Kafka's answer when a coordinator unloads its groups) instead of holding the
drain until the rebalance times out. Timeouts here are long (60 s) so that only that ordering, not
the rebalance ending by itself, can answer the parked request.
"""

from __future__ import annotations

import signal
import struct

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.headers import (
    RequestHeader,
    encode_request_header,
    parse_response_header,
    response_header_version,
)
from odradek.protocol.messages import FindCoordinatorRequest, JoinGroupRequest, JoinGroupResponse
from odradek.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, read_checkpoint
from tests.compat.test_groups_protocol import Wire, describe, subscription, sync

LONG_MS = 60_000
NOT_COORDINATOR = 16
MEMBER_ID_REQUIRED = 79
JOIN_VERSION = 9


def join_request(group: str, member_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=LONG_MS,
        rebalance_timeout_ms=LONG_MS,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription("t"))],
    )


def join(wire: Wire, group: str, member_id: str = "") -> JoinGroupResponse:
    return wire.call(ApiKey.JOIN_GROUP, JOIN_VERSION, join_request(group, member_id))


def send_join(wire: Wire, group: str, member_id: str) -> int:
    """Send a JoinGroup without waiting for its answer; returns its correlation id."""
    wire.correlation_id += 1
    header = RequestHeader(ApiKey.JOIN_GROUP, JOIN_VERSION, wire.correlation_id, "wire-test")
    frame = encode_request_header(header) + encode_request(
        ApiKey.JOIN_GROUP, JOIN_VERSION, join_request(group, member_id)
    )
    wire.sock.sendall(struct.pack(">i", len(frame)) + frame)
    return wire.correlation_id


def receive_join(wire: Wire, correlation_id: int) -> JoinGroupResponse:
    payload = wire._receive(struct.unpack(">i", wire._receive(4))[0])
    header_version = response_header_version(ApiKey.JOIN_GROUP, JOIN_VERSION)
    received_id, start = parse_response_header(payload, header_version)
    assert received_id == correlation_id
    return decode_response(ApiKey.JOIN_GROUP, JOIN_VERSION, payload[start:])


def stable_member(wire: Wire, group: str) -> None:
    """One member that joined and synced, then never rejoins (its session outlasts the test)."""
    joined = join(wire, group, join(wire, group).member_id)
    assert joined.error_code == 0
    synced = sync(wire, group, joined.generation_id, joined.member_id, {joined.member_id: b"a"})
    assert synced.error_code == 0


def test_sigterm_answers_a_parked_join_and_exits_cleanly(make_broker) -> None:
    broker = make_broker()
    group = "parked-join"
    first, second, observer = Wire(broker.bootstrap), Wire(broker.bootstrap), Wire(broker.bootstrap)
    try:
        assert first.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group)).error_code == 0
        stable_member(first, group)
        required = join(second, group)
        assert required.error_code == MEMBER_ID_REQUIRED
        parked = send_join(second, group, required.member_id)
        # The second member's join moved the group into a rebalance that waits for the first member.
        while describe(observer, group).group_state != "PreparingRebalance":
            pass

        broker.send_signal(signal.SIGTERM)

        answer = receive_join(second, parked)
        assert answer.error_code == NOT_COORDINATOR
        assert broker.wait(timeout=LONG_MS / 1000 / 2) == 0, (
            broker.output_tail()
        )  # a generous bound, well under the timeouts
    finally:
        for wire in (first, second, observer):
            wire.close()
    assert (broker.data_dir / ".kafka_cleanshutdown").exists()
    recovery_points = read_checkpoint(broker.data_dir / RECOVERY_POINT_CHECKPOINT)
    assert any(topic == "__consumer_offsets" for topic, _ in recovery_points)
