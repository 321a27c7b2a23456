"""Consumer groups side by side: KIP-848's consumer protocol against the classic protocol, and a KIP-932
share group, on odradek and on Apache Kafka 4.4 (KRaft, one node) in one run (issue 35).

What it measures, on each broker in turn (bench/peers.py's `single_broker`, as bench/side_by_side.py
starts them, with the same group settings on both: group.initial.rebalance.delay.ms 0,
offsets.topic.num.partitions 5, the share coordinator's state topic at replication factor 1):
1. settle time after one member joins: a topic of 100 partitions (empty: no record is fetched) and a
   group of 10 confluent-kafka consumers, stable with every partition assigned; an 11th subscribes.
   Timed from the 11th's subscribe() to the moment every partition is owned by exactly one member and
   all 11 own 9 or 10 each (the balanced end state of both assignors here). Ownership is what the
   consumers' rebalance callbacks (on_assign / on_revoke / on_lost) said, recorded in the callback
   itself, so a partition is recorded given up before the broker can give it to another member; a
   partition recorded owned by two members at any moment is counted and reported under the table.
   The 11th then leaves, the 10 settle again, and another 11th joins: the median and p90 of RUNS
   joins, and the median number of partitions whose owner changed (an ideal cooperative move is 9).
   Four configurations:
   - classic, partition.assignment.strategy=cooperative-sticky, librdkafka's heartbeat.interval.ms
     (3000) and session.timeout.ms (45000): the members learn of a rebalance from a heartbeat answer,
     and a cooperative rebalance takes two rounds, so this is bounded below by heartbeats too;
   - group.protocol=consumer, the broker's default assignor (uniform), the brokers'
     group.consumer.heartbeat.interval.ms at its default 5000 (Kafka's and odradek's): a member learns
     of a new target assignment at its next heartbeat, and a revoked partition is handed over at the
     heartbeats after that, so this settle time is bounded below by heartbeats, not by the broker's work;
   - the same two with heartbeats every 500 ms: a second broker start with
     group.consumer.heartbeat.interval.ms and group.consumer.min.heartbeat.interval.ms 500, and the
     classic members' heartbeat.interval.ms 500.
2. records per second through a group of 4: a topic of 12 partitions filled first with RECORDS records
   of 100 bytes, 4 consumers in a consumer-protocol group (auto.offset.reset earliest). Each pauses
   the partitions it is given until all 4 hold 3 each, so that the figure is of a stable group and not
   of one member reading everything before the others join (at 5 s heartbeats it would); then all
   resume, and the time from the first record to the last gives records/s. Then the same topic read by
   a share group of 4 (confluent-kafka's ShareConsumer, implicit acknowledgement: each poll's records
   are accepted at the next poll), its share.auto.offset.reset set to earliest by
   IncrementalAlterConfigs on the group first, counting distinct (partition, offset) pairs. A broker
   whose ApiVersions lacks ShareGroupHeartbeat gets one line saying so instead of the row.

Why one process with a thread per consumer: every Consumer is a librdkafka handle with its own
threads (broker I/O, the group's heartbeats and rebalances); the Python thread of each only polls,
which releases the GIL while it waits, and runs its rebalance callbacks, a few microseconds each. So
the Python side handles each member's events within its own poll interval (50 ms at most, often at
once) whatever the other 10 do, and the process's CPU is far below one core: the times measured are
the broker's and the protocol's, not the GIL's. Polling the 11 round-robin from one thread would add
up to 11 poll timeouts to every callback. The throughput section reads 100-byte records in Python
(consume() in batches of up to 1,000), which costs the client about as much CPU as the broker; both
brokers pay the same client cost on the same two cores.

Sizes: the full run makes 5 joins per configuration and reads 200,000 records; `--quick` makes 2 joins
and reads 20,000, a check of the whole path (about 5 minutes here under load), its figures mean
little. A broker that cannot run here is named in one line and its cells say "not run"; a measurement
that fails says "failed" with the error under the table, and the run goes on.

Run `python bench/group_rebalance.py [--quick] [--brokers odradek,kafka-4]` from the repository root.
Progress lines go to stderr, the table (bench/side_by_side.py's, with odradek's ratio to Kafka 4) to
stdout. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import datetime
import socket
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from peers import label, missing, single_broker
from side_by_side import Figure, Table, attempt, progress
from throughput import machine_description

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.headers import RequestHeader, encode_request_header
from odradek.protocol.messages.api_versions import ApiVersionsRequest

BROKERS = ("odradek", "kafka-4")  # Kafka 3.9 has no consumer protocol outside early access; Tansu none
QUIET = {"log_level": 0}  # librdkafka's log lines (the share consumer's "Preview" warning) stay out
SETTLE_PARTITIONS = 100
SETTLE_MEMBERS = 10
READ_PARTITIONS = 12
READERS = 4
RECORD_SIZE = 100
POLL_S = 0.05
GROUP_TIMEOUT_S = 180.0  # for a group to reach a balanced assignment
QUIET_S = 1.0  # no ownership change for this long before a join is timed
READ_TIMEOUT_S = 300.0
SHARE_GIVE_UP_S = 30.0
FAST_HEARTBEAT_MS = 500
# The same group settings on both brokers. Kafka's test broker already has the first two; the share
# coordinator's state topic wants 3 replicas by default, and Kafka 4.4 answers a one-node share
# group's first fetch by failing to create it.
COMMON_SETTINGS: dict[str, object] = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 5,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
}
FAST_SETTINGS: dict[str, object] = {
    "group.consumer.heartbeat.interval.ms": FAST_HEARTBEAT_MS,
    "group.consumer.min.heartbeat.interval.ms": FAST_HEARTBEAT_MS,
}


@dataclass(frozen=True, slots=True)
class Plan:
    runs: int  # joins per settle configuration
    records: int  # records read through the group of 4 and the share group


FULL = Plan(runs=5, records=200_000)
QUICK = Plan(runs=2, records=20_000)


@dataclass(frozen=True, slots=True)
class Protocol:
    """One settle configuration: the members' client settings, and whether it needs fast heartbeats
    on the broker."""

    name: str
    client: Mapping[str, object]
    fast: bool

    def figures(self) -> tuple[Figure, Figure, Figure]:
        return (
            Figure(f"11th member joins 10, {self.name}: settle, median, s", False, 2),
            Figure(f"11th member joins 10, {self.name}: settle, p90, s", False, 2),
            Figure(f"11th member joins 10, {self.name}: partitions moved, median", False, 0),
        )


CLASSIC = {"partition.assignment.strategy": "cooperative-sticky"}
CONSUMER = {"group.protocol": "consumer"}
PROTOCOLS = (
    Protocol("classic cooperative-sticky, heartbeat 3 s", CLASSIC, False),
    Protocol("consumer protocol uniform, heartbeat 5 s", CONSUMER, False),
    Protocol(
        f"classic cooperative-sticky, heartbeat {FAST_HEARTBEAT_MS} ms",
        CLASSIC | {"heartbeat.interval.ms": FAST_HEARTBEAT_MS},
        True,
    ),
    Protocol(f"consumer protocol uniform, heartbeat {FAST_HEARTBEAT_MS} ms", CONSUMER, True),
)
GROUP_READ = Figure(f"group of {READERS}, consumer protocol, {RECORD_SIZE} B records: records/s", True, 0)
SHARE_READ = Figure(f"share group of {READERS}, {RECORD_SIZE} B records, implicit ack: records/s", True, 0)


# -- who owns what -----------------------------------------------------------------------------


class Ownership:
    """Which member owns each partition, as the members' rebalance callbacks report it."""

    def __init__(self, partitions: int) -> None:
        self.changed = threading.Condition()
        self.owners: dict[int, set[str]] = {p: set() for p in range(partitions)}
        self.held: dict[str, set[int]] = {}
        self.doubles: list[str] = []  # "partition 7: m1, m3" for each partition seen owned twice
        self.errors: list[str] = []  # the clients' errors (poll errors, error callbacks)
        self.first_assigned: dict[str, float] = {}  # when each member was first given a partition
        self.last_change = time.monotonic()

    def join(self, member: str) -> None:
        with self.changed:
            self.held[member] = set()
            self._touch()

    def assign(self, member: str, partitions: list[int]) -> None:
        with self.changed:
            for p in partitions:
                self.owners[p].add(member)
                self.held[member].add(p)
                if len(self.owners[p]) > 1:
                    self.doubles.append(f"partition {p}: {', '.join(sorted(self.owners[p]))}")
            self._touch()
            if partitions:
                self.first_assigned.setdefault(member, self.last_change)

    def revoke(self, member: str, partitions: list[int]) -> None:
        with self.changed:
            for p in partitions:
                self.owners[p].discard(member)
                self.held.get(member, set()).discard(p)
            self._touch()

    def leave(self, member: str) -> None:
        with self.changed:
            for p in self.held.pop(member, set()):
                self.owners[p].discard(member)
            self._touch()

    def error(self, member: str, text: str) -> None:
        with self.changed:
            if len(self.errors) < 20:
                self.errors.append(f"{member}: {text}")

    def _touch(self) -> None:
        self.last_change = time.monotonic()
        self.changed.notify_all()

    def balanced(self, members: int) -> bool:
        """Every partition owned by exactly one of `members` members, each owning its fair share."""
        if len(self.held) != members or any(len(owners) != 1 for owners in self.owners.values()):
            return False
        low = len(self.owners) // members
        high = low + (1 if len(self.owners) % members else 0)
        return all(low <= len(parts) <= high for parts in self.held.values())

    def snapshot(self) -> dict[int, str]:
        with self.changed:
            return {p: next(iter(owners)) for p, owners in self.owners.items() if len(owners) == 1}

    def wait_balanced(self, members: int, timeout: float, what: str) -> float:
        """Wait for `balanced(members)`; return when the change that made it so happened."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not self.balanced(members):
                left = deadline - time.monotonic()
                if left <= 0:
                    counts = sorted((len(parts) for parts in self.held.values()), reverse=True)
                    unowned = sum(1 for owners in self.owners.values() if not owners)
                    raise TimeoutError(
                        f"{what}: no balanced assignment over {members} members in {timeout:g} s "
                        f"({len(self.held)} members holding {counts}, {unowned} partitions unowned"
                        f"{'; ' + self.errors[0] if self.errors else ''})"
                    )
                self.changed.wait(min(left, 1.0))
            return self.last_change

    def wait_quiet(self, seconds: float) -> None:
        """Wait until no ownership change has happened for `seconds`."""
        with self.changed:
            while (left := self.last_change + seconds - time.monotonic()) > 0:
                self.changed.wait(left)


class Member(threading.Thread):
    """One confluent-kafka Consumer subscribed to `topic`, polled by this thread until `stop()`; its
    rebalance callbacks report to `ownership`. `subscribed_at` is the monotonic time of subscribe()."""

    def __init__(self, name: str, config: Mapping[str, object], topic: str, ownership: Ownership) -> None:
        super().__init__(name=name, daemon=True)
        self.config = {
            **config,
            **QUIET,
            "client.id": name,
            "error_cb": lambda err: ownership.error(name, str(err)),
        }
        self.topic = topic
        self.ownership = ownership
        self.subscribed = threading.Event()
        self.subscribed_at = 0.0
        self._stop_event = threading.Event()

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.ownership.assign(self.name, [tp.partition for tp in partitions])

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.ownership.revoke(self.name, [tp.partition for tp in partitions])

    def poll_once(self, consumer: Consumer) -> None:
        message = consumer.poll(POLL_S)
        if message is not None and message.error() is not None:
            self.ownership.error(self.name, str(message.error()))

    def run(self) -> None:
        consumer = Consumer(self.config)
        try:
            self.ownership.join(self.name)
            self.subscribed_at = time.monotonic()
            consumer.subscribe(
                [self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_revoke
            )
            self.subscribed.set()
            while not self._stop_event.is_set():
                self.poll_once(consumer)
        except Exception as exc:  # reported through the ownership's errors; the waits time out
            self.ownership.error(self.name, f"{type(exc).__name__}: {exc}")
        finally:
            consumer.close()
            self.ownership.leave(self.name)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=60)[name].result(60)
    time.sleep(1.0)  # leaders loaded and known to every client


# -- 1. settle time after one member joins -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settle:
    seconds: list[float]
    moved: list[int]
    doubles: list[str]
    errors: list[str]


def measure_settle(bootstrap: str, protocol: Protocol, runs: int, name: str) -> Settle:
    topic = f"settle-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, SETTLE_PARTITIONS)
    client = {"bootstrap.servers": bootstrap, "group.id": f"settle-{uuid.uuid4().hex[:8]}", **protocol.client}
    ownership = Ownership(SETTLE_PARTITIONS)
    members = [Member(f"m{i}", client, topic, ownership) for i in range(SETTLE_MEMBERS)]
    seconds: list[float] = []
    moved: list[int] = []
    try:
        for member in members:
            member.start()
        started = time.monotonic()
        ownership.wait_balanced(SETTLE_MEMBERS, GROUP_TIMEOUT_S, "the first 10")
        progress(f"{name}: {protocol.name}: 10 members balanced after {time.monotonic() - started:.1f} s")
        for run in range(runs):
            ownership.wait_quiet(QUIET_S)
            before = ownership.snapshot()
            newcomer = Member(f"n{run}", client, topic, ownership)
            newcomer.start()
            try:
                settled = ownership.wait_balanced(SETTLE_MEMBERS + 1, GROUP_TIMEOUT_S, f"join {run + 1}")
                newcomer.subscribed.wait(GROUP_TIMEOUT_S)
                after = ownership.snapshot()
                seconds.append(settled - newcomer.subscribed_at)
                moved.append(sum(1 for p, owner in before.items() if after.get(p) != owner))
                given = ownership.first_assigned[newcomer.name] - newcomer.subscribed_at
                progress(
                    f"{name}: {protocol.name}: join {run + 1}: {seconds[-1]:.2f} s, {moved[-1]} moved "
                    f"(the 11th's first partitions after {given:.2f} s)"
                )
            finally:
                newcomer.stop()
            ownership.wait_balanced(SETTLE_MEMBERS, GROUP_TIMEOUT_S, f"after join {run + 1}, the 10 again")
    finally:
        for member in members:
            member.stop()
    return Settle(seconds, moved, list(ownership.doubles), list(ownership.errors))


def percentile(values: list[float], share: float) -> float:
    """The `share` percentile of `values`, interpolated between the nearest ranks."""
    ordered = sorted(values)
    at = (len(ordered) - 1) * share
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


# -- 2. records per second through a group of 4 and a share group of 4 ---------------------------


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.kbytes": 32 * 1024,
            **QUIET,
        }
    )
    value = b"x" * RECORD_SIZE
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % READ_PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError(f"{topic}: records still unsent after 60 s")


class Reader(threading.Thread):
    """A consumer-protocol group member that pauses what it is given until `go`, then counts records."""

    def __init__(self, name: str, config: Mapping[str, object], topic: str, ownership: Ownership,
                 go: threading.Event) -> None:  # fmt: skip
        super().__init__(name=name, daemon=True)
        self.config = {**config, **QUIET, "client.id": name}
        self.topic = topic
        self.ownership = ownership
        self.go = go
        self.count = 0
        self.early = 0  # records received before `go` (none expected)
        self.first = 0.0
        self.last = 0.0
        self._stop_event = threading.Event()

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)
        if not self.go.is_set():
            consumer.pause(partitions)
        self.ownership.assign(self.name, [tp.partition for tp in partitions])

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.ownership.revoke(self.name, [tp.partition for tp in partitions])

    def run(self) -> None:
        consumer = Consumer(self.config)
        resumed = False
        try:
            self.ownership.join(self.name)
            consumer.subscribe(
                [self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_revoke
            )
            while not self._stop_event.is_set():
                if not resumed and self.go.is_set():
                    consumer.resume(consumer.assignment())
                    resumed = True
                messages = consumer.consume(1000, POLL_S)
                now = time.monotonic()
                got = 0
                for message in messages:
                    if message.error() is None:
                        got += 1
                    else:
                        self.ownership.error(self.name, str(message.error()))
                if not got:
                    continue
                if not resumed:
                    self.early += got
                    continue
                self.first = self.first or now
                self.last = now
                self.count += got
        except Exception as exc:
            self.ownership.error(self.name, f"{type(exc).__name__}: {exc}")
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:g} s")
        time.sleep(0.01)


def read_through_group(bootstrap: str, topic: str, records: int) -> tuple[float, str]:
    """records/s through READERS consumer-protocol members, timed from the first record to the last."""
    client = {
        "bootstrap.servers": bootstrap,
        "group.id": f"read-{uuid.uuid4().hex[:8]}",
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 10,  # as bench/throughput.py: librdkafka's 1 s pause is a client artifact
    }
    ownership = Ownership(READ_PARTITIONS)
    go = threading.Event()
    readers = [Reader(f"r{i}", client, topic, ownership, go) for i in range(READERS)]
    try:
        for reader in readers:
            reader.start()
        ownership.wait_balanced(READERS, GROUP_TIMEOUT_S, f"the group of {READERS}")
        go.set()
        resumed = time.monotonic()

        def total() -> int:
            return sum(reader.count for reader in readers)

        wait_for(lambda: total() >= records, READ_TIMEOUT_S, f"{records:,} records read, {total():,} so far,")
        first = min(reader.first for reader in readers if reader.first)
        last = max(reader.last for reader in readers)
        counts = "/".join(f"{reader.count:,}" for reader in readers)
        detail = (
            f"{total():,} records ({counts} per member) in {last - first:.2f} s from the first record, "
            f"{last - resumed:.2f} s from the resume"
            + (f"; {early} records before it" if (early := sum(r.early for r in readers)) else "")
        )
        return total() / (last - first), detail
    finally:
        for reader in readers:
            reader.stop()


def api_keys(bootstrap: str) -> set[int]:
    """The API keys the broker's ApiVersions v0 answer lists."""
    body = encode_request_header(RequestHeader(ApiKey.API_VERSIONS, 0, 1, "group-rebalance"))
    body += encode_request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(len(body).to_bytes(4, "big") + body)
        size = int.from_bytes(receive(sock, 4), "big")
        answer = receive(sock, size)
    response = decode_response(ApiKey.API_VERSIONS, 0, answer[4:])  # after the correlation id
    return {api.api_key for api in response.api_keys}


def receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def read_through_share_group(bootstrap: str, topic: str, records: int) -> tuple[float, str]:
    """records/s through READERS share consumers, distinct records from the first to the last."""
    group = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(60)
    seen: set[tuple[int, int]] = set()
    delivered = 0
    first = last = 0.0
    errors: list[str] = []
    lock = threading.Lock()
    done = threading.Event()

    def share_member(index: int) -> None:
        nonlocal delivered, first, last
        config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"s{index}", **QUIET}
        consumer = ShareConsumer(config)
        try:
            consumer.subscribe([topic])
            while not done.is_set():
                messages = consumer.poll(POLL_S)
                now = time.monotonic()
                keys = []
                for message in messages:
                    if message.error() is None:
                        keys.append((message.partition(), message.offset()))
                    elif len(errors) < 20:
                        errors.append(f"s{index}: {message.error()}")
                if keys:
                    with lock:
                        delivered += len(keys)
                        seen.update(keys)
                        first = first or now
                        last = now
        except Exception as exc:
            errors.append(f"s{index}: {type(exc).__name__}: {exc}")
        finally:
            consumer.close()

    threads = [threading.Thread(target=share_member, args=(i,), daemon=True) for i in range(READERS)]
    for thread in threads:
        thread.start()
    try:
        started = time.monotonic()
        wait_for(  # or give up on a client that has seen only errors for SHARE_GIVE_UP_S
            lambda: (
                len(seen) >= records
                or bool(errors)
                and not first
                and time.monotonic() - started > SHARE_GIVE_UP_S
            ),
            READ_TIMEOUT_S,
            f"{records:,} distinct records read by the share group, {len(seen):,} so far,",
        )
    finally:
        done.set()
        for thread in threads:
            thread.join(30)
    if len(seen) < records:
        raise RuntimeError(f"the share group read {len(seen):,} records: {errors[0]}")
    detail = f"{len(seen):,} distinct records ({delivered:,} deliveries) in {last - first:.2f} s"
    if errors:
        detail += f"; errors: {'; '.join(errors[:3])}"
    return len(seen) / (last - first), detail


# -- the run -------------------------------------------------------------------------------------


def settle_into(table: Table, name: str, bootstrap: str, protocol: Protocol, plan: Plan) -> None:
    median, p90, moved = protocol.figures()

    def measure() -> None:
        result = measure_settle(bootstrap, protocol, plan.runs, name)
        table.put(median, name, statistics.median(result.seconds))
        table.put(p90, name, percentile(result.seconds, 0.9))
        table.put(moved, name, float(statistics.median(result.moved)))
        if result.doubles:
            table.notes.append(
                f"{label(name)}, {protocol.name}: {len(result.doubles)} times a partition was owned by two "
                f"members at once, first {result.doubles[0]}"
            )
        if result.errors:
            errors = "; ".join(result.errors[:3])
            table.notes.append(f"{label(name)}, {protocol.name}: client errors: {errors}")

    attempt(table, name, [median, p90, moved], f"settle, {protocol.name}", measure)


def broker_run(table: Table, name: str, plan: Plan, fast: bool) -> None:
    """One start of broker `name`: the settle configurations of that heartbeat, and with the default
    heartbeats the two reads."""
    settings = COMMON_SETTINGS | (FAST_SETTINGS if fast else {})
    with single_broker(name, settings) as broker:
        progress(f"{name}: started on {broker.bootstrap}{' with 500 ms heartbeats' if fast else ''}")
        for protocol in PROTOCOLS:
            if protocol.fast == fast:
                settle_into(table, name, broker.bootstrap, protocol, plan)
        if fast:
            return
        topic = f"read-{uuid.uuid4().hex[:8]}"
        try:
            create_topic(broker.bootstrap, topic, READ_PARTITIONS)
            started = time.monotonic()
            fill(broker.bootstrap, topic, plan.records)
            progress(f"{name}: {plan.records:,} records written in {time.monotonic() - started:.1f} s")
        except Exception as exc:
            for figure in (GROUP_READ, SHARE_READ):
                table.put(figure, name, "failed")
            table.notes.append(f"{label(name)}, filling the read topic: failed: {type(exc).__name__}: {exc}")
            return

        def group_read() -> None:
            _, detail = read_through_group(broker.bootstrap, topic, plan.records)
            progress(f"{name}: group of {READERS}, warm-up (unmeasured): {detail}")
            rate, detail = read_through_group(broker.bootstrap, topic, plan.records)
            table.put(GROUP_READ, name, rate)
            progress(f"{name}: group of {READERS}: {rate:,.0f} records/s: {detail}")

        attempt(table, name, [GROUP_READ], f"group of {READERS}", group_read)

        def share_read() -> None:
            if ApiKey.SHARE_GROUP_HEARTBEAT not in api_keys(broker.bootstrap):
                table.put(SHARE_READ, name, "not served")
                table.notes.append(
                    f"{label(name)} does not serve share groups yet (no ShareGroupHeartbeat in its "
                    "ApiVersions): no share group figure"
                )
                progress(f"{name}: no ShareGroupHeartbeat in ApiVersions: the share group is not measured")
                return
            rate, detail = read_through_share_group(broker.bootstrap, topic, plan.records)
            table.put(SHARE_READ, name, rate)
            progress(f"{name}: share group of {READERS}: {rate:,.0f} records/s: {detail}")

        attempt(table, name, [SHARE_READ], f"share group of {READERS}", share_read)


def all_figures() -> list[Figure]:
    return [figure for protocol in PROTOCOLS for figure in protocol.figures()] + [GROUP_READ, SHARE_READ]


def run_figures(fast: bool) -> list[Figure]:
    """The rows one broker start fills."""
    settle = [figure for protocol in PROTOCOLS if protocol.fast == fast for figure in protocol.figures()]
    return settle if fast else [*settle, GROUP_READ, SHARE_READ]


def header(plan: Plan, quick: bool) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", ":/src", ":/bench"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
    ).stdout.strip()
    if dirty:  # the broker runs from the working tree
        commit = f"{commit or '?'} with uncommitted changes in src/ or bench/"
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{'Quick run (figures mean little)' if quick else 'Full run'}, {when}, commit {commit or '?'}\n"
        f"Machine: {machine_description()}\n"
        f"Settle: {SETTLE_PARTITIONS} partitions, {SETTLE_MEMBERS} members + 1, {plan.runs} joins per row; "
        f"reads: {plan.records:,} records of {RECORD_SIZE} B over {READ_PARTITIONS} partitions, "
        f"{READERS} members"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 joins per row, 20,000 records")
    parser.add_argument("--brokers", default=",".join(BROKERS), help="comma-separated: " + ",".join(BROKERS))
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    brokers = [name.strip() for name in args.brokers.split(",")]
    unknown = [name for name in brokers if name not in BROKERS]
    if unknown:
        parser.error(f"unknown brokers {', '.join(unknown)}: one of {', '.join(BROKERS)}")
    table = Table(brokers, "kafka-4")  # the one Kafka this run starts: KIP-848 and KIP-932 need 4.x
    for figure in all_figures():
        table.figure(figure)
    absent = {name: reason for name in brokers if (reason := missing(name)) is not None}
    for name, reason in absent.items():
        progress(f"{label(name)}: not run: {reason}")
    started = time.monotonic()
    heading = header(plan, args.quick)  # the tree the brokers start from, before others change it
    for name in brokers:
        if name in absent:
            continue
        for fast in (False, True):
            try:
                broker_run(table, name, plan, fast)
            except Exception as exc:  # a broker that would not start: its rows not yet filled fail
                for figure in run_figures(fast):
                    if name not in table.cells[figure.text]:
                        table.put(figure, name, "failed")
                reason = (str(exc) or type(exc).__name__).splitlines()[0][:200]
                table.notes.append(f"{label(name)}: failed: {type(exc).__name__}: {reason}")
                progress(f"{name}: failed: {reason}")
    print(heading)
    print()
    print(table.markdown())
    print()
    for name, reason in absent.items():
        print(f"- {label(name)}: not run: {reason}")
    print(
        "- settle times are bounded below by heartbeats: a member learns of a new assignment at its next "
        "heartbeat, and a cooperative hand-over takes more than one; the broker's own work shows in the "
        f"{FAST_HEARTBEAT_MS} ms rows, if at all"
    )
    for note in table.notes:
        print(f"- {note}")
    print(f"- wall time of the run: {(time.monotonic() - started) / 60:.1f} min")


if __name__ == "__main__":
    main()
