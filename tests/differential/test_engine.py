"""The differential engine's comparison on its own (no broker, no Java): volatile fields left out,
messages compared as present or absent, keyed lists matched by key, records compared batch by batch
field by field, and Kafka's extra topic configs left out unless a case is strict."""

from __future__ import annotations

from odradek.protocol.messages.fetch import FetchResponse
from odradek.protocol.messages.metadata import MetadataResponse
from odradek.protocol.records.builder import SimpleRecord, build_batch
from tests.differential.engine import UNLISTED_CONFIGS, VOLATILE, batches, diff, normalize, to_tree


def _compare(kafka: object, odradek: object, unlisted: frozenset[str] = UNLISTED_CONFIGS) -> list[str]:
    return diff(
        normalize(to_tree(kafka), VOLATILE, unlisted), normalize(to_tree(odradek), VOLATILE, unlisted), "0:x"
    )


def _metadata(cluster_id: str, topics: list[tuple[str, int]]) -> MetadataResponse:
    return MetadataResponse(
        throttle_time_ms=7,
        cluster_id=cluster_id,
        topics=[MetadataResponse.MetadataResponseTopic(name=name, error_code=code) for name, code in topics],
    )


def test_volatile_fields_and_order_are_not_differences() -> None:
    kafka = _metadata("abc", [("a", 0), ("b", 3)])
    odradek = _metadata("xyz", [("b", 3), ("a", 0)])
    assert _compare(kafka, odradek) == []


def test_a_difference_is_named_by_the_element_key() -> None:
    lines = _compare(_metadata("c", [("a", 0), ("b", 3)]), _metadata("c", [("a", 0), ("b", 5)]))
    assert lines == ["0:x.topics[name='b'].error_code: kafka=3 odradek=5"]
    missing = _compare(_metadata("c", [("a", 0)]), _metadata("c", [("a", 0), ("b", 0)]))
    assert len(missing) == 1 and missing[0].startswith("0:x.topics[name='b']: kafka='<missing>'")


def test_messages_are_compared_as_present_or_absent() -> None:
    kafka = {"error_message": "Kafka's words", "error_code": 3}
    assert _compare(kafka, {"error_message": "odradek's words", "error_code": 3}) == []
    assert _compare({"error_message": ""}, {"error_message": None}) == []
    assert _compare(kafka, {"error_message": None, "error_code": 3}) == [
        "0:x.error_message: kafka='<present>' odradek='<absent>'"
    ]


def test_records_are_compared_field_by_field_without_the_producer_id() -> None:
    def batch(producer_id: int, value: bytes) -> bytes:
        return build_batch(
            [SimpleRecord(value, b"k", timestamp=5)], producer_id=producer_id, producer_epoch=0
        )

    def fetched(records: bytes) -> FetchResponse.PartitionData:
        return FetchResponse.PartitionData(records=records)

    assert _compare(fetched(batch(1, b"v")), fetched(batch(99, b"v"))) == []
    (line,) = _compare(fetched(batch(1, b"v")), fetched(batch(1, b"w")))
    assert line.startswith("0:x.records[0].records[0].value: kafka=b'v' odradek=b'w'")
    assert batches(batch(1, b"v")[:-3]) == [{"partial_batch_bytes": 67}]  # a batch cut short: its length


def test_kafkas_extra_topic_configs_are_left_out_unless_strict() -> None:
    kafka = {"configs": [{"name": "retention.ms"}, {"name": "message.format.version"}]}
    odradek = {"configs": [{"name": "retention.ms"}]}
    assert _compare(kafka, odradek) == []
    assert len(_compare(kafka, odradek, frozenset())) == 1
