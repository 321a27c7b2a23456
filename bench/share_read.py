"""Share group reads alone, repeated: `python bench/share_read.py [--brokers odradek,kafka-4] [--runs 5]`.

Each run starts the broker afresh (bench/group_rebalance.py's settings), writes `--records` records of
100 B over 12 partitions, and reads them through a share group of 4 (confluent-kafka's ShareConsumer,
implicit acknowledgement: group_rebalance.py's `read_through_share_group`). It prints, per run, the
records per second from the first record read to the last, and the broker's CPU seconds (user and
system, from /proc) from the end of the writes to the last record read, the group's forming
included; then the median of each.
The brokers take turns run by run, so a slow minute of the machine falls on each of them.
Run it with PYTHONPATH pointing at another tree's `src` to set two trees of odradek side by side.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import group_rebalance as groups
from latency import cpu_seconds
from peers import label, missing, single_broker
from side_by_side import progress


def one_run(name: str, records: int) -> tuple[float, float]:
    """(records/s, broker CPU seconds) of one share group read on a fresh broker `name`."""
    with single_broker(name, groups.COMMON_SETTINGS) as broker:
        topic = f"read-{uuid.uuid4().hex[:8]}"
        groups.create_topic(broker.bootstrap, topic, groups.READ_PARTITIONS)
        groups.fill(broker.bootstrap, topic, records)
        before = cpu_seconds([broker.pid])
        rate, detail = groups.read_through_share_group(broker.bootstrap, topic, records)
        cpu = cpu_seconds([broker.pid]) - before
    progress(f"{name}: {rate:,.0f} records/s, broker CPU {cpu:.2f} s: {detail}")
    return rate, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default="odradek,kafka-4", help="comma-separated: odradek,kafka-4")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--records", type=int, default=groups.FULL.records)
    args = parser.parse_args()
    brokers = [name for name in args.brokers.split(",") if missing(name) is None]
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in brokers}
    started = time.monotonic()
    for _ in range(args.runs):
        for name in brokers:
            results[name].append(one_run(name, args.records))
    print(
        f"\n{args.records:,} records of 100 B over 12 partitions, a share group of 4, {args.runs} runs each"
    )
    print("| broker | records/s, median (min-max) | broker CPU s, median |\n|---|---:|---:|")
    for name, runs in results.items():
        rates = [rate for rate, _ in runs]
        rate = f"{statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"
        print(f"| {label(name)} | {rate} | {statistics.median(c for _, c in runs):.2f} |")
    print(f"- wall time: {(time.monotonic() - started) / 60:.1f} min")


if __name__ == "__main__":
    main()
