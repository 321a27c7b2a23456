"""A producer process for the crash tests: `python crash_producer.py BOOTSTRAP TOPIC ACKS OUT_PATH`.

Produces values `seq-00000000`, `seq-00000001`, ... to partition 0 with confluent-kafka until SIGTERM
(then flushes what is in flight and exits). Every delivery report is appended to OUT_PATH as
`<offset> <value>` and flushed as it arrives, so the file always lists exactly the records the broker
acknowledged so far. Messages wait up to two minutes for the broker, so they survive a broker restart.

Caller: tests/compat/test_crash_recovery.py, which kills and restarts the broker under it.
"""

from __future__ import annotations

import signal
import sys
import time

from confluent_kafka import Producer

MAX_IN_FLIGHT_RECORDS = 2000


def main(bootstrap: str, topic: str, acks: str, out_path: str) -> None:
    stopping = False

    def on_sigterm(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_sigterm)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 2, "message.timeout.ms": 120_000}
    )
    with open(out_path, "a", buffering=1) as out:

        def on_delivery(err: object, msg: object) -> None:
            if err is None:
                out.write(f"{msg.offset()} {msg.value().decode()}\n")  # type: ignore[attr-defined]

        seq = 0
        while not stopping:
            if len(producer) >= MAX_IN_FLIGHT_RECORDS:
                producer.poll(0.01)
                continue
            producer.produce(topic, value=b"seq-%08d" % seq, partition=0, on_delivery=on_delivery)
            seq += 1
            producer.poll(0)
            if seq % 100 == 0:
                time.sleep(0.01)  # about 10k records/s: enough to be mid-flight at any moment
        producer.flush(60)


if __name__ == "__main__":
    main(*sys.argv[1:5])
