"""kcat (librdkafka's command-line client) against a real broker: metadata listing, keyed produce,
consume from the beginning to the end of the partition, and header printing.

Apache Kafka's behaviour is the oracle: what kcat prints equals what it produced, byte for byte.
"""

from __future__ import annotations

import json
import shutil
import subprocess

from tests.compat import helpers

KCAT_TIMEOUT_S = 60


def kcat(bootstrap: str, *args: str, stdin: bytes = b"") -> bytes:
    binary = shutil.which("kcat")
    assert binary is not None, "kcat is not installed (make test installs it)"
    result = subprocess.run(
        [binary, "-b", bootstrap, *args], input=stdin, capture_output=True, timeout=KCAT_TIMEOUT_S
    )
    assert result.returncode == 0, f"kcat {args} exited {result.returncode}: {result.stderr.decode()}"
    return result.stdout


def test_metadata_lists_topic_and_partitions(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic, partitions=3)

    metadata = json.loads(kcat(broker.bootstrap, "-L", "-J"))

    assert [b["name"] for b in metadata["brokers"]] == [broker.bootstrap]
    topic = next(t for t in metadata["topics"] if t["topic"] == unique_topic)
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]
    assert {p["leader"] for p in topic["partitions"]} == {metadata["brokers"][0]["id"]}


def test_keyed_produce_then_consume_from_beginning(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)
    lines = b"".join(b"key-%d:value %d with spaces\n" % (i, i) for i in range(200))

    kcat(broker.bootstrap, "-P", "-t", unique_topic, "-p", "0", "-K:", stdin=lines)
    printed = kcat(broker.bootstrap, "-C", "-t", unique_topic, "-o", "beginning", "-e", "-f", "%k:%s\n")

    assert printed == lines


def test_headers_and_offsets_are_printed(broker, unique_topic: str) -> None:
    helpers.create_topic(broker.bootstrap, unique_topic)

    kcat(
        broker.bootstrap, "-P", "-t", unique_topic, "-p", "0", "-H", "trace=abc", "-H", "n=1", stdin=b"a\nb\n"
    )
    printed = kcat(broker.bootstrap, "-C", "-t", unique_topic, "-o", "beginning", "-e", "-f", "%o %h %s\n")

    assert printed == b"0 trace=abc,n=1 a\n1 trace=abc,n=1 b\n"
