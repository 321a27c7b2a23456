"""Produce and consume throughput over secured listeners against PLAINTEXT, in the same run.

One odradek broker (a real process, a temporary log dir) with a listener per security protocol
measured: PLAINTEXT, SSL (TLS with a certificate made by odradek.testing.certs, no client
certificate) and SASL_SSL (the same TLS, then SASL SCRAM-SHA-512 as a user whose credential the
bench stores first; PLAIN on SASL_SSL costs the same per byte, SCRAM only at connect). For each
protocol and each topic shape (one partition, 100 partitions), a
confluent-kafka Producer (linger.ms=5, batch.size=1 MiB, acks=1, no compression, Nagle off: see
CLIENT) sends N records of 1 KiB to a fresh topic, timed from the first produce() to the end of
flush(); then a Consumer (assigned every partition, from the beginning, Nagle off too) reads them
all back, timed from assign() to the last record. A warm-up of a tenth of the records precedes
each measurement. MB/s counts value bytes (10^6 bytes/s); the ratio column sets each protocol
against PLAINTEXT's figure of the same shape.
The issue's aim: SSL consume at least half of PLAINTEXT's.
Run `python bench/security.py [--records N] [--protocols PLAINTEXT,SSL,SASL_SSL] [--partitions 1,100]`.

Not a test: numbers, not assertions.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from odradek.testing.broker import BrokerProcess, free_port
from odradek.testing.certs import CertificateAuthority

RECORD_SIZE = 1024
TIMEOUT_S = 300.0
QUIET = {"log_level": 0}
# librdkafka writes a TLS request in several SSL_write calls (one per buffer segment, many with 100
# partitions); with Nagle on (its default) each later write waits for the broker's delayed ACK, which
# measured the client, not the broker. Both protocols run with Nagle off.
CLIENT = {**QUIET, "socket.nagle.disable": True}
MIB = 1 << 20


USER, PASSWORD = "bench", "bench-secret"
SCRAM = "SCRAM-SHA-512"


def ssl_client(ca: Path) -> dict[str, object]:
    return {"security.protocol": "SSL", "ssl.ca.location": str(ca)}


def sasl_ssl_client(ca: Path) -> dict[str, object]:
    return {
        **ssl_client(ca),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM,
        "sasl.username": USER,
        "sasl.password": PASSWORD,
    }


# protocol -> the client settings of its listener, given the CA certificate
PROTOCOLS: dict[str, Callable[[Path], Mapping[str, object]]] = {
    "PLAINTEXT": lambda ca: {"security.protocol": "PLAINTEXT"},
    "SSL": ssl_client,
    "SASL_SSL": sasl_ssl_client,
}


def broker_settings(ports: Mapping[str, int], certs: CertificateAuthority) -> dict[str, object]:
    """One listener per measured protocol, named as its protocol, and the broker's TLS stores."""
    broker = certs.issue("broker")
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": broker.keystore_path,
        "sasl.enabled.mechanisms": SCRAM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "num.partitions": 1,
    }


def store_credential(bootstrap: str) -> None:
    """The bench user's SCRAM credential, through the PLAINTEXT listener."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    upsert = UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode()
    )
    admin.alter_user_scram_credentials([upsert])[USER].result(30)


def produce(config: Mapping[str, object], topic: str, records: int) -> float:
    producer = Producer({**config, "linger.ms": 5, "batch.size": MIB, "acks": 1, **CLIENT})
    value = b"x" * RECORD_SIZE
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(TIMEOUT_S):
        raise RuntimeError(f"{topic}: records left undelivered")
    return time.perf_counter() - start


def consume(config: Mapping[str, object], topic: str, partitions: int, records: int) -> float:
    consumer = Consumer(
        {**config, "group.id": f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False, **CLIENT}
    )
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    received, deadline = 0, time.monotonic() + TIMEOUT_S
    try:
        while received < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: {received} of {records} records consumed")
            for message in consumer.consume(1000, 1.0):
                if message.error() is None:
                    received += 1
        return time.perf_counter() - start
    finally:
        consumer.close()


def measure(config: Mapping[str, object], partitions: int, records: int) -> tuple[float, float]:
    """(produce MB/s, consume MB/s) on a fresh topic of `partitions`, after a warm-up topic."""
    admin = AdminClient({**config, **QUIET})
    topics = [f"bench-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for future in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        future.result(60)
    warm, measured = topics
    produce(config, warm, records // 10)
    consume(config, warm, partitions, records // 10)
    megabytes = records * RECORD_SIZE / 1e6
    return megabytes / produce(config, measured, records), megabytes / consume(
        config, measured, partitions, records
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--partitions", default="1,100")
    args = parser.parse_args()
    protocols = args.protocols.split(",")
    shapes = [int(p) for p in args.partitions.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-security-") as root:
        ca = CertificateAuthority(Path(root) / "certs")
        ports = {protocol: free_port() for protocol in protocols}
        process = BrokerProcess(Path(root) / "data", port=ports[protocols[0]])
        process.overrides = broker_settings(ports, ca)
        with process:
            if "SASL_SSL" in ports:  # through the first listener, PLAINTEXT in the default run
                store_credential(f"127.0.0.1:{ports[protocols[0]]}")
            results: dict[tuple[str, int], tuple[float, float]] = {}
            for partitions in shapes:
                for protocol in protocols:
                    config = {
                        "bootstrap.servers": f"127.0.0.1:{ports[protocol]}",
                        **PROTOCOLS[protocol](ca.cert_path),
                    }
                    results[protocol, partitions] = measure(config, partitions, args.records)
                    print(f"measured {protocol} with {partitions} partitions", flush=True)
    print(f"\n{args.records} records of {RECORD_SIZE} B; MB/s of values (ratio: against PLAINTEXT)")
    print(f"{'protocol':<10} {'partitions':>10} {'produce':>9} {'ratio':>6} {'consume':>9} {'ratio':>6}")
    for (protocol, partitions), (produced, consumed) in results.items():
        base = results.get(("PLAINTEXT", partitions), (produced, consumed))
        print(
            f"{protocol:<10} {partitions:>10} {produced:>9.1f} {produced / base[0]:>6.2f} "
            f"{consumed:>9.1f} {consumed / base[1]:>6.2f}"
        )


if __name__ == "__main__":
    main()
