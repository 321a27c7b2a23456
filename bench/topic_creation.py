"""Topic creation and restart against a real broker process: how long, and what the event loop feels.

Starts `odradek serve` (BrokerProcess) in a temporary directory and, while a thread sends ApiVersions
on its own connection every 10 ms, sends the incident's CreateTopics v7 (100,000 partitions, refused
by max.broker.partitions) and then creates a topic of N partitions with timeout_ms 0; it produces to
the last partition until that succeeds. Prints: each answer's time, how long until the last
partition took a produce, and the ApiVersions latencies (median, p99, worst). Then SIGTERM on the
idle broker, a restart (time until the port opens and until ApiVersions and Metadata answer, how
many partitions are still loading, time until every one serves), and a SIGTERM three seconds into a
second creation of N partitions.

Run `python bench/topic_creation.py [--partitions N]` from the repository root. Numbers, not
assertions (tests/compat/test_topic_creation_load.py asserts the bounds).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the raw-frame helpers of tests/compat

from odradek.testing.broker import BrokerProcess  # noqa: E402
from tests.compat.test_topic_creation_load import (  # noqa: E402
    INCIDENT_FRAME,
    api_versions_probes,
    create_topics_error,
    create_topics_v7,
    wait_for,
)
from tests.compat.wire import Connection, record_batch  # noqa: E402

LEADER_NOT_AVAILABLE = 5


def timed(label: str, started: float) -> float:
    elapsed = time.monotonic() - started
    print(f"{label}: {elapsed * 1000:,.0f} ms")
    return elapsed


def creation(broker: BrokerProcess, partitions: int) -> None:
    with api_versions_probes(broker.bootstrap) as latencies:
        started = time.monotonic()
        code = create_topics_error(INCIDENT_FRAME, broker.bootstrap)
        timed(f"incident CreateTopics (100,000 partitions) answered with error {code}", started)
        started = time.monotonic()
        code = create_topics_error(create_topics_v7("big", partitions, 0), broker.bootstrap)
        timed(f"CreateTopics of {partitions} partitions (timeout_ms 0) answered with error {code}", started)
        with Connection(broker.bootstrap) as conn:
            batch = record_batch([(None, b"v")])
            wait_for(lambda: conn.produce("big", partitions - 1, batch, acks=1).error_code == 0, 900, 0.5)
        timed("the last partition took a produce after", started)
    latencies.sort()
    median, p99 = (latencies[int(len(latencies) * q)] * 1000 for q in (0.5, 0.99))
    worst = latencies[-1] * 1000
    print(
        f"ApiVersions meanwhile: {len(latencies)} probes, median {median:.2f} ms, p99 {p99:.1f} ms, "
        f"worst {worst:.1f} ms"
    )


def restart(broker: BrokerProcess, partitions: int) -> None:
    started = time.monotonic()
    broker.send_signal(signal.SIGTERM)
    broker.wait(60)
    timed(f"SIGTERM on the idle broker with {partitions} partitions: exited after", started)
    started = time.monotonic()
    broker.start(timeout=120)
    timed("restart: port open after", started)
    with Connection(broker.bootstrap) as conn:
        conn.api_versions()
        found = conn.metadata(["big"]).topics["big"].partitions
        timed("restart: ApiVersions and Metadata answered after", started)
        loading = sum(1 for error, _ in found.values() if error == LEADER_NOT_AVAILABLE)
        print(f"restart: {len(found)} partitions listed, {loading} still loading")
        wait_for(
            lambda: all(e == 0 for e, _ in conn.metadata(["big"]).topics["big"].partitions.values()), 900, 0.5
        )
    timed("restart: every partition serving after", started)


def sigterm_mid_creation(broker: BrokerProcess, partitions: int) -> None:
    create_topics_error(create_topics_v7("again", partitions, 0), broker.bootstrap)
    time.sleep(3)
    started = time.monotonic()
    broker.send_signal(signal.SIGTERM)
    broker.wait(60)
    timed(f"SIGTERM three seconds into creating {partitions} partitions: exited after", started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-topic-creation-") as root:
        broker = BrokerProcess(Path(root) / "data", output_path=Path(root) / "broker.out")
        broker.start()
        try:
            creation(broker, args.partitions)
            restart(broker, args.partitions)
            sigterm_mid_creation(broker, args.partitions)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
