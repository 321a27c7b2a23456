"""Codec micro-benchmarks: microseconds per operation (median of 5 runs after a warm-up).

Run: python bench/protocol_codec.py
"""

from __future__ import annotations

import statistics
import timeit

from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import FetchResponse, MetadataResponse, ProduceRequest
from odradek.protocol.primitives import FileSlice

RECORDS = bytes(16 * 1024)


def produce_request(partitions: int) -> ProduceRequest:
    data = [ProduceRequest.PartitionProduceData(index=i, records=RECORDS) for i in range(partitions)]
    return ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[ProduceRequest.TopicProduceData(name="bench", partition_data=data)],
    )


def fetch_response(partitions: int) -> FetchResponse:
    parts = [
        FetchResponse.PartitionData(
            partition_index=i, high_watermark=1000, last_stable_offset=1000, records=FileSlice(3, 0, 16384)
        )
        for i in range(partitions)
    ]
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="bench", partitions=parts)])


def metadata_response(partitions: int) -> MetadataResponse:
    parts = [
        MetadataResponse.MetadataResponsePartition(
            partition_index=i, leader_id=0, replica_nodes=[0], isr_nodes=[0]
        )
        for i in range(partitions)
    ]
    return MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=0, host="localhost", port=9092)],
        topics=[MetadataResponse.MetadataResponseTopic(name="bench", partitions=parts)],
    )


def micros(fn, number: int) -> float:
    fn()
    runs = timeit.repeat(fn, number=number, repeat=5)
    return statistics.median(runs) / number * 1e6


def main() -> None:
    produce_bytes = memoryview(codec.encode_request(ApiKey.PRODUCE, 9, produce_request(1)))
    produce_100 = memoryview(codec.encode_request(ApiKey.PRODUCE, 9, produce_request(100)))
    fetch_1, fetch_100 = fetch_response(1), fetch_response(100)
    metadata = metadata_response(100)
    header = memoryview(bytes.fromhex("0000 0009 00000001 0007") + b"rdkafka" + b"\x00")
    cases = [
        (
            "decode ProduceRequest v9, 1 partition, 16 KiB records",
            lambda: codec.decode_request(0, 9, produce_bytes),
        ),
        (
            "decode ProduceRequest v9, 100 partitions x 16 KiB",
            lambda: codec.decode_request(0, 9, produce_100),
        ),
        ("encode FetchResponse v12, 1 partition, FileSlice", lambda: codec.encode_response(1, 12, fetch_1)),
        (
            "encode FetchResponse v12, 100 partitions, FileSlices",
            lambda: codec.encode_response(1, 12, fetch_100),
        ),
        ("encode MetadataResponse v12, 100 partitions", lambda: codec.encode_response(3, 12, metadata)),
        ("parse request header v2", lambda: parse_request_header(header)),
    ]
    for label, fn in cases:
        print(f"{label:58s} {micros(fn, 2000 if '100' not in label else 100):9.2f} us/op")


if __name__ == "__main__":
    main()
