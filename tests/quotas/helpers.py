"""What the quota acceptance tests share: `odradek configs` run as a process, producers at full
speed that note when each record was acknowledged, and the steady-state rate a producer was allowed.

Rates are measured from the acknowledgements a client received, over a span that starts once a whole
quota window has passed (before it, Kafka's rate lets a burst of num - 1 windows through), and long
enough (20 s) that one request more or less stays within the tolerance: never a bound on speed.
The brokers run with quota.window.num 2 (QUOTA_WINDOW): Kafka's rate lets a group that was held
back catch up in bursts of up to num - 1 windows, so with 11 windows of 1 s a 20 s span would hold
one or two 10 s bursts; with 2 windows a burst is 1 s and 20 s hold ten of them."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import Producer

MiB = 1 << 20
PAYLOAD = b"q" * 10_000
QUOTA_WINDOW = {"quota.window.num": 2, "quota.window.size.seconds": 1}
WARM_UP_S = 2.0  # quota.window.num x quota.window.size.seconds
MEASURED_S = 20.0


def configs(bootstrap: str, *args: str) -> str:
    """`odradek configs --bootstrap-server B ARGS` in a process of its own; its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "odradek", "configs", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@dataclass
class Acks:
    """The acknowledgements one producer received: (monotonic time, bytes), and any delivery error."""

    times: list[tuple[float, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, size: int) -> None:
        with self.lock:
            self.times.append((time.monotonic(), size))

    @property
    def count(self) -> int:
        return len(self.times)

    def rate(self, start: float, end: float) -> float:
        """Bytes per second acknowledged within [start, end]."""
        with self.lock:
            acked = sum(size for at, size in self.times if start <= at <= end)
        return acked / (end - start)


def produce_confluent(
    bootstrap: str, topic: str, client_id: str, until: float, acks: Acks, security: Mapping[str, object] = {}
) -> None:
    """A confluent-kafka producer writing PAYLOAD records as fast as it can until `until` (with the
    `security` settings: security.protocol, sasl.*)."""
    producer = Producer(
        {
            **security,
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 200_000,
            "queue.buffering.max.kbytes": 2048,  # full speed keeps it full; it drains fast at the end
        }
    )

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acks.add(len(PAYLOAD))
        else:
            acks.errors.append(str(err))

    while time.monotonic() < until:
        try:
            producer.produce(topic, PAYLOAD, callback=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0


def run_together(*jobs: Callable[[], None]) -> None:
    """Run the jobs in threads and wait for all; the first failure is raised."""
    failures: list[BaseException] = []

    def guarded(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(job,), daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    if failures:
        raise failures[0]


def within(rate: float, quota: float, above: float = 0.10, below: float = 0.35) -> bool:
    """Whether a measured rate shows a client held to `quota`. More than 10% above it, the quota was not
    enforced. Below it, the client may have been starved of CPU (two cores shared by brokers and
    clients; a CI run measured 0.88 of the quota on all three brokers at once), so the floor is only
    what tells this quota from the others in a test: none is within a factor of 1.5 of another."""
    return (1 - below) * quota <= rate <= (1 + above) * quota
