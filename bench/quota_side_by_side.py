"""Client quotas side by side: odradek and Apache Kafka enforcing the same client-id quotas on the
same clients, in one run, with Kafka's default quota windows (issue 34, part 5).

Owns the run and its tables. Each broker in turn (Kafka 4.x in KRaft mode, optionally Kafka 3.9 on
ZooKeeper, then odradek), quota.window.num and quota.window.size.seconds left at their defaults
(11 x 1 s):
- a topic `q-prefill` is filled first by a producer without a quota (client id `prefill`);
- one AlterClientQuotas request (the same bytes to every broker) sets producer_byte_rate 1 MiB/s
  and 4 MiB/s on the producers' client ids and consumer_byte_rate 1 MiB/s and 4 MiB/s on the
  consumers';
- then, started together, each client id with its own quota and each producer with its own
  1-partition topic: two librdkafka producers (confluent-kafka, a process each, 10,000-byte records
  as fast as they go: idempotent, linger.ms 5, batch.size 200,000, the settings of the issue's
  observation), two Java producers (Kafka 4.x's own ProducerPerformance, --throughput -1,
  --record-size 10000, batch.size 200,000 so that the quota and not its 16 KiB default batch is
  what holds it), two librdkafka consumers and two Java consumers (Kafka 4.x's ConsumerPerformance,
  its defaults) reading `q-prefill` from its start.

What a client got is read every 0.25 s: a producer's topic's high watermark (records x 10,000
bytes, read by this process), a consumer's record bytes received (ConsumerPerformance's progress
lines for the Java one). A client at full speed under a
quota of 11 windows does not run at an even rate: it is let through in a burst of up to num - 1
windows' worth whenever its old samples expire (about every 12 s), then trickles until the next,
so the rate over a fixed span (the issue's 14-34 s) depends on how many bursts fall inside it.
The steady state is therefore measured over whole cycles: from the first to the last burst within
--from to --to seconds after the client's start, its first bytes (the span's rate where under two
bursts are found; clients started together on a loaded machine get going seconds apart, the JVMs
last, so each is measured from its own start and all run 30 s longer than --to). The
throttle times are the clients' own: librdkafka's statistics (the throttle_time_ms of its
responses) and the Java clients' NetworkClient log lines; their sum over the span's length says
how much of it the client was held. Also printed: each broker's CPU in the span (/proc) and the
machine's load average, since other work on the machine slows a broker down.

Run `python bench/quota_side_by_side.py [--kafka 4.4.0[,3.9.2]] [--from 14] [--to 60]` from the
repository root (about 4 minutes with one Kafka, 5.5 with two). Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_response, encode_request
from odradek.protocol.headers import RequestHeader, encode_request_header
from odradek.protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from odradek.testing import kafka_reference
from odradek.testing.broker import BrokerProcess
from odradek.testing.zookeeper import ZooKeeperServer

MiB = 1 << 20
RECORD_SIZE = 10_000
PAYLOAD = b"q" * RECORD_SIZE
PREFILL_TOPIC = "q-prefill"
PREFILL_MARGIN = 1.25  # the consumers must never run dry
SAMPLE_S = 0.25  # how often a client's cumulative bytes are read
FIRST_BURST_S = 5.0  # bursts are looked for after the start's own
START_GRACE_S = 30.0  # the clients run this much longer than --to: their origins differ
BURST_GAP_S = 8.0  # a burst cannot follow another sooner: the window must roll over first
JAVA_PROGRESS = re.compile(r"^([0-9-]+ [0-9:]+):([0-9]+), [0-9]+, ([0-9.]+),")  # ConsumerPerformance
JAVA_THROTTLE = re.compile(r"^\[([0-9-]+ [0-9:]+),([0-9]+)\] WARN .* is throttled for ([0-9]+) ms")


@dataclass(frozen=True)
class Client:
    kind: str  # rdkafka-producer, java-producer, rdkafka-consumer, java-consumer
    quota_mib: int

    @property
    def client_id(self) -> str:
        return f"{self.kind}-{self.quota_mib}m"

    @property
    def topic(self) -> str:
        return PREFILL_TOPIC if self.is_consumer else f"q-{self.client_id}"

    @property
    def is_java(self) -> bool:
        return self.kind.startswith("java")

    @property
    def is_consumer(self) -> bool:
        return self.kind.endswith("consumer")

    @property
    def quota_key(self) -> str:
        return "consumer_byte_rate" if self.is_consumer else "producer_byte_rate"

    @property
    def label(self) -> str:
        return {
            "rdkafka-producer": "librdkafka producer",
            "java-producer": "Java producer (ProducerPerformance)",
            "rdkafka-consumer": "librdkafka consumer",
            "java-consumer": "Java consumer (ConsumerPerformance)",
        }[self.kind]


CLIENTS = tuple(
    Client(kind, mib)
    for kind in ("rdkafka-producer", "java-producer", "rdkafka-consumer", "java-consumer")
    for mib in (1, 4)
)


@dataclass
class Series:
    """What one client got: its cumulative bytes at times (seconds after the clients were started),
    and the throttle times its responses carried: (time, sum ms, count, largest ms) records."""

    points: list[tuple[float, int]] = field(default_factory=list)
    throttles: list[tuple[float, float, int, float]] = field(default_factory=list)

    def origin(self) -> float:
        """When the client got its first bytes: its own start (JVMs and processes started together on
        a loaded machine get going seconds apart)."""
        return next((when for when, got in self.points if got > 0), 0.0)

    def at(self, when: float) -> float:
        """The cumulative bytes at `when`, linear between the two points around it."""
        points = self.points
        for (t1, b1), (t2, b2) in zip(points, points[1:], strict=False):
            if t1 <= when <= t2:
                return b1 + (b2 - b1) * (when - t1) / (t2 - t1) if t2 > t1 else b2
        return float(points[-1][1] if points and when > points[-1][0] else 0)

    def rate(self, start: float, end: float) -> float:
        """MiB/s between `start` and `end`."""
        return (self.at(end) - self.at(start)) / MiB / (end - start)

    def bursts(self, start: float, end: float, quota: float) -> list[float]:
        """The times in [start, end] a burst began: a second delivering at least 2 x the quota after
        one of at most 1.2 x, at least BURST_GAP_S after the one before (with quota.window.num 11, a
        client held back catches up in bursts of up to num - 1 windows once its old samples expire,
        one per ~12 s). The start's own burst is skipped."""
        onsets: list[float] = []
        armed = False
        for when, _ in self.points:
            if when < self.origin() + FIRST_BURST_S or when > end:
                continue
            ahead = self.at(when + 1.0) - self.at(when)
            if (
                armed
                and ahead >= 2 * quota
                and when >= start
                and (not onsets or when - onsets[-1] >= BURST_GAP_S)
            ):
                onsets.append(when)
                armed = False
            elif ahead <= 1.2 * quota:
                armed = True
        return onsets


@dataclass
class Steady:
    """One client's steady state on one broker."""

    span_mib: float  # over the issue's span (--from to --issue-to)
    steady_mib: float  # between its first and last burst in the run's span, or the span's rate
    period_s: float | None  # the bursts' mean period (None: no two bursts, the span's rate)
    onsets: list[float]  # seconds after the client's origin
    origin: float  # when the client got its first bytes, seconds after the clients were started
    throttle_avg: float
    throttle_max: float
    throttled: float  # the throttle times' sum over the span's length
    short_s: float  # how much of the span the run did not cover (the client started late)

    @classmethod
    def of(cls, series: Series, quota_mib: int, args: argparse.Namespace) -> Steady:
        """The spans are seconds after the client's own origin."""
        origin = series.origin()
        start, end = origin + args.start, origin + args.end
        onsets = series.bursts(start, end, quota_mib * MiB)
        span = series.rate(start, origin + args.issue_end)
        if len(onsets) >= 2:
            steady, period = series.rate(onsets[0], onsets[-1]), (onsets[-1] - onsets[0]) / (len(onsets) - 1)
        else:
            steady, period = series.rate(start, end), None
        throttles = [t for t in series.throttles if start <= t[0] <= end]
        total, count = sum(t[1] for t in throttles), sum(t[2] for t in throttles)
        largest = max((t[3] for t in throttles), default=0.0)
        average = total / count if count else 0.0
        relative = [onset - origin for onset in onsets]
        short = max(0.0, end - series.points[-1][0]) if series.points else end
        return cls(
            span, steady, period, relative, origin, average, largest, total / 1000 / (end - start), short
        )


# --- the client processes -----------------------------------------------------------------------


class ThrottleStats:
    """The throttle_time_ms statistics librdkafka reports each second: (time, sum, count, largest)."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.records: list[tuple[float, float, int, float]] = []

    def __call__(self, stats_json: str) -> None:
        at = time.monotonic() - self.t0
        for broker in json.loads(stats_json).get("brokers", {}).values():
            throttle = broker.get("throttle") or {}
            if throttle.get("cnt", 0):
                self.records.append((at, throttle["sum"], throttle["cnt"], throttle.get("max", 0)))

    def result(self) -> dict[str, object]:
        return {"throttles": self.records}


def run_rdkafka_producer(args: argparse.Namespace) -> dict[str, object]:
    stats = ThrottleStats(args.t0)
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "client.id": args.client_id,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 200_000,
            "queue.buffering.max.kbytes": 2048,
            "statistics.interval.ms": 1000,
            "stats_cb": stats,
            "log_level": 3,
        }
    )
    until = args.t0 + args.end + 1.5
    while time.monotonic() < until:
        try:
            producer.produce(args.topic, PAYLOAD)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge()
    producer.flush(5)
    return stats.result()


def run_rdkafka_consumer(args: argparse.Namespace) -> dict[str, object]:
    stats = ThrottleStats(args.t0)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "client.id": args.client_id,
            "group.id": f"group-{args.client_id}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "statistics.interval.ms": 1000,
            "stats_cb": stats,
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(args.topic, 0, 0)])
    received, points, next_point = 0, [(0.0, 0)], SAMPLE_S
    while (at := time.monotonic() - args.t0) < args.end + 1.5:
        if at >= next_point:
            points.append((at, received))
            next_point += SAMPLE_S
        for message in consumer.consume(1000, 0.05):
            if message.error() is None:
                received += len(message.value() or b"")
    consumer.poll(1.0)  # the last statistics
    consumer.close()
    return {"points": points, **stats.result()}


def client_main(args: argparse.Namespace) -> None:
    run = run_rdkafka_consumer if args.client == "rdkafka-consumer" else run_rdkafka_producer
    print(json.dumps(run(args)), flush=True)


# --- the brokers --------------------------------------------------------------------------------


@contextmanager
def odradek_broker() -> Iterator[tuple[str, int]]:
    with tempfile.TemporaryDirectory(prefix="odradek-quota-") as root:
        with BrokerProcess(Path(root) / "data", broker_id=1) as broker:
            yield broker.bootstrap, broker.pid or 0


@contextmanager
def kafka_broker(version: str) -> Iterator[tuple[str, int]]:
    with tempfile.TemporaryDirectory(prefix=f"kafka-quota-{version}-") as root:
        work = Path(root)
        if kafka_reference.is_kraft(version):
            with kafka_reference.KafkaBroker(work / "broker", version) as broker:
                yield broker.bootstrap, broker.pid
        else:
            with ZooKeeperServer(work / "zookeeper") as zookeeper:
                connect = zookeeper.connect_string
                with kafka_reference.KafkaBroker(
                    work / "broker", version, zookeeper_connect=connect
                ) as broker:
                    yield broker.bootstrap, broker.pid


# --- the run ------------------------------------------------------------------------------------


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    names = sorted({client.topic for client in CLIENTS})
    for future in admin.create_topics([NewTopic(name, 1, 1) for name in names]).values():
        future.result(30)


def prefill(bootstrap: str, total_bytes: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "client.id": "prefill", "linger.ms": 5, "batch.size": 1_000_000}
    )
    for _ in range(total_bytes // RECORD_SIZE + 1):
        while True:
            try:
                producer.produce(PREFILL_TOPIC, PAYLOAD)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("the prefill was not all acknowledged")


def set_quotas(bootstrap: str) -> None:
    """One AlterClientQuotas v0 request setting every client's quota; raises on an entry's error."""
    entries = [
        AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntityData("client-id", client.client_id)],
            ops=[AlterClientQuotasRequest.OpData(client.quota_key, float(client.quota_mib * MiB))],
        )
        for client in CLIENTS
    ]
    body = encode_request_header(RequestHeader(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, "bench"))
    body += encode_request(ApiKey.ALTER_CLIENT_QUOTAS, 0, AlterClientQuotasRequest(entries=entries))
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(len(body).to_bytes(4, "big") + body)
        answer = read_frame(sock)
    response = decode_response(ApiKey.ALTER_CLIENT_QUOTAS, 0, answer[4:])  # after the correlation id
    errors = [(e.error_code, e.error_message) for e in response.entries if e.error_code]
    if errors:
        raise RuntimeError(f"AlterClientQuotas failed: {errors}")


def read_frame(sock: socket.socket) -> bytes:
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data[4:]


def cpu_seconds(pid: int) -> float:
    """The user + system CPU seconds of process `pid` (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Watcher(threading.Thread):
    """Reads the producers' topics' high watermarks every SAMPLE_S (their cumulative bytes), and
    the broker's CPU seconds and the machine's load average with them."""

    def __init__(self, bootstrap: str, pid: int, clients: list[Client], t0: float, until: float) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "q-watch", "log_level": 3})
        self.pid, self.clients, self.t0, self.until = pid, clients, t0, until
        self.series = {c: Series([(0.0, 0)]) for c in clients}
        self.cpu: list[tuple[float, float]] = []  # (seconds after the start, the broker's CPU seconds)
        self.load: list[tuple[float, float]] = []
        self.failure: BaseException | None = None

    def cores(self, start: float, end: float) -> float:
        """The broker's CPU (cores) between the samples nearest `start` and `end`."""
        first = min(self.cpu, key=lambda point: abs(point[0] - start))
        last = min(self.cpu, key=lambda point: abs(point[0] - end))
        return (last[1] - first[1]) / (last[0] - first[0])

    def run(self) -> None:
        try:
            next_point = SAMPLE_S
            while next_point <= self.until:
                time.sleep(max(0.0, self.t0 + next_point - time.monotonic()))
                for c in self.clients:
                    high = self.consumer.get_watermark_offsets(TopicPartition(c.topic, 0), timeout=10)[1]
                    self.series[c].points.append((time.monotonic() - self.t0, high * RECORD_SIZE))
                self.cpu.append((time.monotonic() - self.t0, cpu_seconds(self.pid)))
                self.load.append((next_point, os.getloadavg()[0]))
                next_point += SAMPLE_S
        except BaseException as exc:  # noqa: BLE001 - raised by measure()
            self.failure = exc
        finally:
            self.consumer.close()


def java_time(stamp: str, millis: str) -> float:
    """The wall-clock time of a Java client's line (local time, to the millisecond)."""
    return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000


def java_series(text: str, wall_t0: float) -> Series:
    """A Java client's throttle times (its NetworkClient's log lines) and, for ConsumerPerformance,
    its cumulative MiB consumed (its progress lines)."""
    series = Series([(0.0, 0)])
    for line in text.splitlines():
        if (progress := JAVA_PROGRESS.match(line)) is not None:
            at = java_time(progress[1], progress[2]) - wall_t0
            series.points.append((at, int(float(progress[3]) * MiB)))
        elif (match := JAVA_THROTTLE.match(line)) is not None:
            throttle = int(match[3])
            series.throttles.append((java_time(match[1], match[2]) - wall_t0, throttle, 1, throttle))
    return series


def spawn_client(
    client: Client, bootstrap: str, t0: float, args: argparse.Namespace, work: Path
) -> subprocess.Popen:
    out = open(work / f"{client.client_id}.out", "w")  # noqa: SIM115 - closed with the process
    version = args.java_version
    logging = kafka_reference._logging_config(version, work / "java-logging", "WARN", "")
    if client.kind == "java-consumer":
        argv = kafka_reference.java_command(
            version,
            "org.apache.kafka.tools.ConsumerPerformance",
            ["--bootstrap-server", bootstrap, "--topic", client.topic, "--num-records", str(10**9),
             "--timeout", "600000", "--show-detailed-stats", "--reporting-interval", "250",
             "--group", f"group-{client.client_id}", "--command-property", f"client.id={client.client_id}"],
            heap=kafka_reference.TOOL_HEAP,
            logging=logging,
        )  # fmt: skip
    elif client.kind == "java-producer":
        argv = kafka_reference.java_command(
            version,
            "org.apache.kafka.tools.ProducerPerformance",
            ["--topic", client.topic, "--num-records", str(10**9), "--record-size", str(RECORD_SIZE),
             "--throughput", "-1", "--reporting-interval", "5000", "--command-property",
             f"bootstrap.servers={bootstrap}", f"client.id={client.client_id}", "batch.size=200000",
             "linger.ms=5"],
            heap=kafka_reference.TOOL_HEAP,
            logging=logging,
        )  # fmt: skip
    else:
        argv = [sys.executable, __file__, "--client", client.kind, "--bootstrap", bootstrap,
                "--client-id", client.client_id, "--topic", client.topic, "--t0", repr(t0),
                "--to", str(args.end + START_GRACE_S)]  # fmt: skip
    return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, process_group=0)


def stop(processes: dict[Client, subprocess.Popen]) -> None:
    for c, process in processes.items():
        if c.is_java and process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes.values():
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@dataclass
class Run:
    """One broker's run: its clients' steady states, its CPU and the machine's load in the span."""

    clients: dict[Client, Steady]
    cores: float
    load: tuple[float, float]  # the 1-minute load average, least and most
    series: dict[Client, Series]


def measure(bootstrap: str, pid: int, args: argparse.Namespace) -> Run:
    create_topics(bootstrap)
    consumer_bytes = max(c.quota_mib for c in CLIENTS if c.is_consumer) * MiB
    prefill(bootstrap, int(PREFILL_MARGIN * consumer_bytes * (args.end + START_GRACE_S + 11)))
    set_quotas(bootstrap)
    time.sleep(2.0)  # the quotas reach the broker's quota managers
    with tempfile.TemporaryDirectory(prefix="quota-clients-") as root:
        work = Path(root)
        t0, wall_t0 = time.monotonic(), time.time()
        until = args.end + START_GRACE_S
        watcher = Watcher(bootstrap, pid, [c for c in CLIENTS if not c.is_consumer], t0, until + 1.0)
        watcher.start()
        processes = {c: spawn_client(c, bootstrap, t0, args, work) for c in CLIENTS}
        try:
            watcher.join(until + 60)
            if watcher.failure is not None:
                raise watcher.failure
        finally:
            stop(processes)
        series = watcher.series
        for c in CLIENTS:
            text = (work / f"{c.client_id}.out").read_text()
            if c.is_java:
                java = java_series(text, wall_t0)
                if c.is_consumer:
                    series[c] = java
                series[c].throttles = java.throttles
                continue
            if processes[c].returncode:
                raise RuntimeError(f"{c.client_id} exited with {processes[c].returncode}:\n{text[-2000:]}")
            stats = json.loads(text.strip().splitlines()[-1])
            if c.is_consumer:
                series[c] = Series([tuple(p) for p in stats["points"]])
            series[c].throttles = [tuple(t) for t in stats["throttles"]]
    loads = [load for at, load in watcher.load if args.start <= at <= until]
    steady = {c: Steady.of(series[c], c.quota_mib, args) for c in CLIENTS}
    return Run(steady, watcher.cores(args.start, until), (min(loads), max(loads)), series)


def throttle_text(result: Steady) -> str:
    return f"{result.throttle_avg:.0f} / {result.throttle_max:.0f} ({result.throttled:.0%})"


def steady_text(result: Steady) -> str:
    period = f" (bursts every {result.period_s:.1f} s)" if result.period_s is not None else ""
    return f"{result.steady_mib:.2f}{period}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--kafka", default=kafka_reference.KRAFT_VERSION, help="Kafka versions, comma-separated"
    )
    parser.add_argument("--from", dest="start", type=float, default=14.0, help="steady span start, s")
    parser.add_argument("--to", dest="end", type=float, default=60.0, help="steady span end, s")
    parser.add_argument("--issue-to", dest="issue_end", type=float, default=34.0, help="the issue's span end")
    parser.add_argument("--dump", help="write each client's cumulative bytes over time to this JSON file")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--client-id", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--t0", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(args)
        return
    versions = [v for v in args.kafka.split(",") if v]
    args.java_version = kafka_reference.KRAFT_VERSION
    for version in {*versions, args.java_version}:
        reason = kafka_reference.missing(version)
        if reason is not None:
            sys.exit(f"Kafka {version} cannot run here: {reason}")
    runs: dict[str, Run] = {}
    brokers = [*((f"Kafka {v}", lambda v=v: kafka_broker(v)) for v in versions), ("odradek", odradek_broker)]
    for name, broker in brokers:
        started = time.monotonic()
        with broker() as (bootstrap, pid):
            runs[name] = measure(bootstrap, pid, args)
        print(f"{name}: measured in {time.monotonic() - started:.0f} s", flush=True)
        run = runs[name]
        print(f"  broker CPU {run.cores:.2f} cores, {load_text(run)} in the span")
        for c, r in run.clients.items():
            short = f" (the run ended {r.short_s:.1f} s before its span)" if r.short_s > 0.5 else ""
            print(f"  {c.client_id:>20}: first bytes at {r.origin:.1f} s{short}; "
                  f"{args.start:g}-{args.issue_end:g} s {r.span_mib:.2f} MiB/s, "
                  f"steady {steady_text(r)}, throttle avg/max ms {throttle_text(r)}, "
                  f"bursts at {', '.join(f'{o:.1f}' for o in r.onsets) or '-'} s", flush=True)  # fmt: skip
    print_tables(runs, [f"Kafka {v}" for v in versions], args)
    if args.dump:
        points = {n: {c.client_id: s.points for c, s in run.series.items()} for n, run in runs.items()}
        Path(args.dump).write_text(json.dumps(points))


def print_tables(runs: dict[str, Run], kafkas: list[str], args: argparse.Namespace) -> None:
    names = [*kafkas, "odradek"]
    print(f"\nsteady state, MiB/s (quota.window.num 11): from the first to the last burst within "
          f"{args.start:g}-{args.end:g} s after the start, or that span's rate under two bursts")  # fmt: skip
    header = ["client", "quota", *names, *(f"odradek / {k}" for k in kafkas), "odradek / quota"]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for c in CLIENTS:
        ours = runs["odradek"].clients[c].steady_mib
        row = [c.label, str(c.quota_mib), *(steady_text(runs[n].clients[c]) for n in names)]
        row += [f"{ours / runs[k].clients[c].steady_mib:.2f}" for k in kafkas]
        print("| " + " | ".join([*row, f"{ours / c.quota_mib:.2f}"]) + " |")
    print(f"\nthe issue's span ({args.start:g}-{args.issue_end:g} s), MiB/s; throttle_time_ms in "
          f"{args.start:g}-{args.end:g} s: average / largest (their sum over the span's length)")  # fmt: skip
    header = ["client", "quota", *(f"{n} {args.start:g}-{args.issue_end:g} s" for n in names)]
    header += [f"{n} throttle ms" for n in names]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for c in CLIENTS:
        row = [c.label, str(c.quota_mib), *(f"{runs[n].clients[c].span_mib:.2f}" for n in names)]
        row += [throttle_text(runs[n].clients[c]) for n in names]
        print("| " + " | ".join(row) + " |")
    print("\nbroker CPU in the span: " + ", ".join(f"{n} {runs[n].cores:.2f} cores ({load_text(runs[n])})"
                                                  for n in names))  # fmt: skip


def load_text(run: Run) -> str:
    return f"load average {run.load[0]:.1f}-{run.load[1]:.1f}"


if __name__ == "__main__":
    main()
