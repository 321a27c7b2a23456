"""The generated KIP-848 coordinator record codecs (Kafka 4.4's group and share coordinator schemas)."""

from __future__ import annotations

from odradek.protocol import codec
from odradek.protocol.messages import DATA_SPECS
from odradek.protocol.messages import consumer_group_member_metadata_key as member_key
from odradek.protocol.messages import consumer_group_member_metadata_value as member_value


def test_member_metadata_key_round_trips_with_its_record_type() -> None:
    spec = DATA_SPECS["ConsumerGroupMemberMetadataKey"]
    assert spec is member_key.SPEC and spec.kind == "coordinator-key"
    assert member_key.RECORD_TYPE == member_value.RECORD_TYPE == 5
    key = member_key.ConsumerGroupMemberMetadataKey(group_id="g", member_id="m1")
    data = codec.encode_message(spec, 0, key)
    assert data == b"\x00\x01g\x00\x02m1"  # not flexible: int16-length strings
    assert codec.decode_message(spec, 0, data) == key


def test_member_metadata_value_round_trips_with_its_tagged_field() -> None:
    cls = member_value.ConsumerGroupMemberMetadataValue
    spec = DATA_SPECS["ConsumerGroupMemberMetadataValue"]
    assert spec.kind == "coordinator-value" and spec.is_flexible(0)
    assert cls().rebalance_timeout_ms == -1 and cls().classic_member_metadata is None
    value = cls(
        instance_id=None,
        rack_id="r1",
        client_id="rdkafka",
        client_host="/127.0.0.1",
        subscribed_topic_names=["a", "b"],
        subscribed_topic_regex="^t.*",
        rebalance_timeout_ms=45_000,
        server_assignor="uniform",
        classic_member_metadata=cls.ClassicMemberMetadata(
            session_timeout_ms=10_000,
            supported_protocols=[cls.ClassicProtocol(name="range", metadata=b"\x00\x03")],
        ),
    )
    assert codec.decode_message(spec, 0, codec.encode_message(spec, 0, value)) == value
    plain = cls(client_id="c", client_host="h")
    assert codec.decode_message(spec, 0, codec.encode_message(spec, 0, plain)) == plain
