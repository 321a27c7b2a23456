"""A fault harness for replication: a seeded nemesis against a local cluster under an idempotent
acks=all load, and a checker of Kafka's promise afterwards.

The promise: no acknowledged record is lost while one in-sync replica lives, and with unclean leader
election off, a partition that has none is unavailable rather than lossy.

Owns, for one run (`run_chaos`): a `ProxiedCluster` of real brokers (testing/links.py: each
broker's ZooKeeper link and its inbound link go through a TCP proxy of their own on loopback; 3
brokers by default; zookeeper.session.timeout.ms 4000, replica.lag.time.max.ms 3000,
replica.fetch.backoff.ms 200, unclean election off) and one topic (3 partitions, replication factor
3, min.insync.replicas 2); the workload, one confluent-kafka idempotent acks=all producer in a
thread, bootstrapped through the proxies, writing unique values (b"w%08d") round-robin over the
partitions and recording every acknowledgement (value -> partition, offset) and every failure; the
nemesis, which draws from `random.Random(seed)` one fault per cycle among `ChaosSettings.kinds` -
process faults: kill -9 of a random broker, of a random partition's leader, of the controller, or
SIGSTOP of a random broker for longer than replica.lag.time.max.ms and sometimes longer than the
ZooKeeper session; network faults: a random broker cut from ZooKeeper only (its proxy closes the
connection and refuses new ones; half the time within the session, half past it), a random broker
or a partition's leader isolated from everybody else (its inbound proxy cut: other brokers'
fetches, the controller's requests, clients; its own outbound links and its session stay up), or a
slow link (a broker's ZooKeeper or inbound proxy delays every chunk 50-400 ms one way; latency
only: a TCP proxy cannot lose packets, TCP retransmits them, so loss is not covered) - holds it a
bounded random time, heals it (restart, SIGCONT, heal of the proxy) and waits until every ISR is
full again before the next one, so never more than one broker is faulted and an in-sync replica
always lives (with `full_isr_between` off it waits only for every broker to be registered again:
an ISR may be down to one member when the next fault hits it, and the partition must then be
unavailable, not lossy); and the checker, which once everything healed and the replicas caught up
reads every partition from offset 0 and reports lost acknowledged values, values at two offsets,
holes in the offsets, values nobody sent, values read elsewhere than where they were acknowledged,
and replicas whose segment bytes differ. Per fault it also records the unavailability window: the
longest time any partition went from the fault's start to its next acknowledgement; the summary
gives the worst per fault kind.

The result (`ChaosResult`) keeps the seed and the data directory, where each broker's output is
`broker-<id>.out`, so a failing run can be replayed and read. A seed fixes the draws (kinds, holds,
random targets), not the timing: the leader or controller a fault hits is whichever it is then.

Not covered yet (the next step): one-way and partial partitions (a broker's outbound links, one
link between two brokers, clients only), stalled rather than closed connections
(`FaultProxy.stall`), packet loss, clock skew, disk faults, and more than one fault at a time.

Callers: tests/cluster/test_chaos.py (a bounded run), bench/chaos.py (long runs). Not used by the
broker itself.
"""

from __future__ import annotations

import bisect
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.cluster import LocalCluster
from odradek.testing.links import ProxiedCluster
from odradek.testing.proxy import FaultProxy

QUIET = {"log_level": 3}
TOPIC = "chaos"
REPLICATION = 3
PROCESS_KINDS = ("kill-broker", "kill-leader", "kill-controller", "pause-broker")
CUT_KINDS = ("cut-zookeeper", "isolate-broker", "isolate-leader")
SLOW_KINDS = ("slow-zookeeper", "slow-inbound")
NETWORK_KINDS = CUT_KINDS + SLOW_KINDS
FAULT_KINDS = PROCESS_KINDS + NETWORK_KINDS
LEADER_KINDS = ("kill-leader", "isolate-leader")


@dataclass(frozen=True)
class ChaosSettings:
    """What one run does; times in seconds unless named otherwise."""

    seed: int
    cycles: int
    brokers: int = 3
    partitions: int = 3
    session_timeout_ms: int = 4000
    lag_ms: int = 3000
    rate: float = 200.0  # records a second the workload offers
    kill_hold_s: tuple[float, float] = (0.5, 5.0)
    slow_hold_s: tuple[float, float] = (2.0, 6.0)
    delay_ms: tuple[int, int] = (50, 400)  # one-way, per forwarded chunk, on a slowed link
    quiet_s: tuple[float, float] = (0.5, 2.0)
    heal_timeout_s: float = 60.0
    full_isr_between: bool = True  # False: the next fault once every broker is registered again
    message_timeout_ms: int = 120_000
    kinds: tuple[str, ...] = FAULT_KINDS  # what the nemesis draws from


@dataclass
class FaultRecord:
    """One cycle: the fault, its target, how long it was held, and what the workload saw."""

    cycle: int
    kind: str
    broker: int
    partition: int | None
    hold_s: float  # a killed broker also stays down until its ZooKeeper session expired
    started_s: float  # since the run started
    delay_ms: int = 0  # a slowed link's delay
    window_s: float | None = None  # longest time a partition waited for its next acknowledgement
    acked: int = 0  # acknowledgements so far, at the end of the cycle


@dataclass
class ChaosResult:
    """What a run found; `ok` when the promise held and nothing got stuck."""

    seed: int
    data_dir: str
    faults: list[FaultRecord] = field(default_factory=list)
    sent: int = 0
    acked: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    fatal: list[str] = field(default_factory=list)
    read: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    holes: dict[int, list[int]] = field(default_factory=dict)
    unexpected: list[str] = field(default_factory=list)
    misplaced: dict[str, str] = field(default_factory=dict)
    divergent: dict[int, dict[int, int]] = field(default_factory=dict)
    stuck: list[str] = field(default_factory=list)
    unacknowledged_read: int = 0  # sent, never acknowledged, yet written: allowed
    error: str | None = None

    @property
    def ok(self) -> bool:
        findings = (self.lost, self.duplicated, self.holes, self.unexpected, self.misplaced, self.divergent)
        return not any(findings) and not self.stuck and not self.fatal and self.error is None

    def worst_windows(self) -> dict[str, float]:
        """Per fault kind, the longest unavailability window its faults caused."""
        worst: dict[str, float] = {}
        for fault in self.faults:
            if fault.window_s is not None:
                worst[fault.kind] = round(max(worst.get(fault.kind, 0.0), fault.window_s), 1)
        return worst

    def summary(self) -> str:
        return (
            f"seed={self.seed} cycles={len(self.faults)} sent={self.sent} acked={self.acked} "
            f"read={self.read} lost={len(self.lost)} duplicated={len(self.duplicated)} "
            f"holes={sum(len(h) for h in self.holes.values())} unexpected={len(self.unexpected)} "
            f"misplaced={len(self.misplaced)} divergent={sorted(self.divergent)} stuck={len(self.stuck)} "
            f"fatal={len(self.fatal)} failures={self.failures} worst_windows={self.worst_windows()} "
            f"error={self.error} ok={self.ok}"
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


# -- the workload --------------------------------------------------------------------------------


def wait_until(probe: Callable[[], bool], timeout_s: float) -> bool:
    """Whether `probe()` came true within `timeout_s` (polled every 0.2 s)."""
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


class Workload:
    """One idempotent acks=all producer in a thread; every acknowledgement and failure recorded."""

    def __init__(self, bootstrap: str, settings: ChaosSettings) -> None:
        self.settings = settings
        self.config = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": settings.message_timeout_ms,
            "request.timeout.ms": 10_000,
            "error_cb": self._on_error,
            **QUIET,
        }
        self.sent: set[bytes] = set()
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: dict[bytes, str] = {}
        self.fatal: list[str] = []
        self.ack_times: dict[int, list[float]] = {p: [] for p in range(settings.partitions)}
        self.unflushed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop offering records and wait for the outstanding ones to be answered."""
        self._stop.set()
        self._thread.join(self.settings.message_timeout_ms / 1000 + 30)

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal.append(str(err))

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        value = msg.value()
        if err is not None:
            self.failed[value] = err.name()
            return
        self.acked[value] = (msg.partition(), msg.offset())
        self.ack_times[msg.partition()].append(time.monotonic())

    def _run(self) -> None:
        producer = Producer(self.config)
        interval = 1.0 / self.settings.rate
        next_at = time.monotonic()
        index = 0
        while not self._stop.is_set() and not self.fatal:
            value = b"w%08d" % index
            try:
                partition = index % self.settings.partitions
                producer.produce(TOPIC, value=value, partition=partition, on_delivery=self._on_delivery)
            except BufferError:
                producer.poll(0.1)
                continue
            except KafkaException as exc:
                self.fatal.append(str(exc))
                break
            self.sent.add(value)
            index += 1
            next_at = max(next_at + interval, time.monotonic() - 1.0)
            while time.monotonic() < next_at:
                producer.poll(max(0.0, next_at - time.monotonic()))
        self.unflushed = producer.flush(self.settings.message_timeout_ms / 1000 + 10)

    def wait_for_acknowledgements(self, timeout_s: float = 30.0) -> None:
        if not wait_until(lambda: all(self.ack_times.values()), timeout_s):
            raise AssertionError(f"no acknowledgement from some partition within {timeout_s} s")

    def window_after(self, start: float) -> float | None:
        """The longest wait of any partition from `start` to its next acknowledgement; None while
        some partition has had none since."""
        waits = []
        for times in self.ack_times.values():
            found = bisect.bisect_left(times, start)
            if found == len(times):
                return None
            waits.append(times[found] - start)
        return max(waits)


# -- the nemesis ---------------------------------------------------------------------------------


def all_registered(cluster: LocalCluster) -> bool:
    running = all(p.is_running() for p in cluster.brokers.values())
    return running and cluster.live_broker_ids() == sorted(cluster.brokers)


def isr_full(cluster: LocalCluster, partitions: int) -> bool:
    """Every broker registered, and every partition led by a live broker with all its replicas
    in sync."""
    live = sorted(cluster.brokers)
    if not all_registered(cluster):
        return False
    states = [cluster.state(TOPIC, p) or {} for p in range(partitions)]
    return all(len(s.get("isr", ())) == REPLICATION and s.get("leader", -1) in live for s in states)


class Nemesis:
    """Draws, applies and heals one fault at a time, every choice from `random.Random(seed)`."""

    def __init__(self, cluster: ProxiedCluster, settings: ChaosSettings) -> None:
        self.cluster = cluster
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.epoch = time.monotonic()

    def draw(self, cycle: int) -> FaultRecord:
        kind = self.rng.choice(self.settings.kinds)
        partition = self.rng.randrange(self.settings.partitions) if kind in LEADER_KINDS else None
        broker = self._target(kind, partition)
        hold = self._hold(kind)
        delay = self.rng.randint(*self.settings.delay_ms) if kind in SLOW_KINDS else 0
        started = time.monotonic() - self.epoch
        return FaultRecord(cycle, kind, broker, partition, round(hold, 2), round(started, 2), delay)

    def _target(self, kind: str, partition: int | None) -> int:
        fallback = self.rng.choice(sorted(self.cluster.brokers))
        if kind in LEADER_KINDS:
            leader = (self.cluster.state(TOPIC, partition or 0) or {}).get("leader", -1)
            return leader if leader in self.cluster.brokers else fallback
        if kind == "kill-controller":
            controller = self.cluster.controller()
            return controller if controller in self.cluster.brokers else fallback
        return fallback

    def _hold(self, kind: str) -> float:
        """A kill: `kill_hold_s`; a slowed link: `slow_hold_s`; a pause or an isolation: past
        replica.lag.time.max.ms, half the time also past the ZooKeeper session; a ZooKeeper cut:
        half the time within the session (the broker may still dial again too late), half past it."""
        session_s = self.settings.session_timeout_ms / 1000
        if kind in SLOW_KINDS:
            return self.rng.uniform(*self.settings.slow_hold_s)
        if kind == "cut-zookeeper":
            within = self.rng.random() < 0.5
            return self.rng.uniform(session_s * 0.3, session_s * 0.8) if within else self._past_session()
        if kind not in ("pause-broker", "isolate-broker", "isolate-leader"):
            return self.rng.uniform(*self.settings.kill_hold_s)
        lag_s = self.settings.lag_ms / 1000
        if self.rng.random() < 0.5:
            return self.rng.uniform(lag_s * 1.3, min(lag_s * 2, session_s * 0.9))
        return self._past_session()

    def _past_session(self) -> float:
        session_s = self.settings.session_timeout_ms / 1000
        return self.rng.uniform(session_s * 1.3, session_s * 2)

    def apply(self, fault: FaultRecord) -> None:
        """Inject `fault`, hold it, heal it; the broker is running again, and its links are whole,
        when this returns."""
        if fault.kind in NETWORK_KINDS:
            self._apply_to_link(fault)
            return
        process = self.cluster.brokers[fault.broker]
        if fault.kind == "pause-broker":
            process.send_signal(signal.SIGSTOP)
            try:
                time.sleep(fault.hold_s)
            finally:
                process.send_signal(signal.SIGCONT)
            return
        process.kill()
        time.sleep(fault.hold_s)
        self._wait_deregistered(fault.broker)
        process.start()

    def _link(self, fault: FaultRecord) -> FaultProxy:
        """The faulted broker's ZooKeeper link, or its inbound link."""
        zookeeper = fault.kind.endswith("-zookeeper")
        links = self.cluster.zookeeper_links if zookeeper else self.cluster.inbound_links
        return links[fault.broker]

    def _apply_to_link(self, fault: FaultRecord) -> None:
        link = self._link(fault)
        if fault.kind in SLOW_KINDS:
            link.delay_ms = fault.delay_ms
        else:
            link.cut()
        try:
            time.sleep(fault.hold_s)
        finally:
            healed_at = link.forwarded  # none get through while cut
            link.delay_ms = 0
            link.heal()
        if fault.kind == "cut-zookeeper":
            self._wait_reconnected(fault.broker, link, healed_at)

    def _wait_reconnected(self, broker: int, link: FaultProxy, healed_at: int) -> None:
        """Until the broker dialled ZooKeeper again, its registration may be one of a session about to
        expire, and every ISR still look full: the fault is not over before that."""
        timeout_s = self.settings.heal_timeout_s
        if not wait_until(lambda: link.forwarded > healed_at, timeout_s):
            raise AssertionError(
                f"broker {broker} did not reconnect to ZooKeeper {timeout_s} s after the heal"
            )

    def _wait_deregistered(self, broker: int) -> None:
        """A broker restarted while its old session's registration lives would refuse to start
        (Kafka's too): wait for that session to expire."""
        timeout_s = self.settings.session_timeout_ms / 1000 * 3
        if not wait_until(lambda: broker not in self.cluster.live_broker_ids(), timeout_s):
            raise AssertionError(f"broker {broker} still registered {timeout_s} s after its kill -9")

    def healed(self) -> bool:
        """Ready for the next fault: every ISR full, or with `full_isr_between` off every broker
        registered (an ISR may then be down to one member, which the next fault may hit)."""
        if self.settings.full_isr_between:
            return isr_full(self.cluster, self.settings.partitions)
        return all_registered(self.cluster)

    def quiet(self) -> None:
        time.sleep(self.rng.uniform(*self.settings.quiet_s))


# -- the checker ---------------------------------------------------------------------------------


def segment_bytes(cluster: LocalCluster, broker_id: int, partition: int) -> bytes:
    directory = cluster.data_dir / f"broker-{broker_id}" / f"{TOPIC}-{partition}"
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def replica_sizes(cluster: LocalCluster, partition: int) -> dict[int, int] | None:
    """None when every broker holds the same bytes for `partition`; else each one's size."""
    holders = [
        b
        for b in sorted(cluster.brokers)
        if (cluster.data_dir / f"broker-{b}" / f"{TOPIC}-{partition}").is_dir()
    ]
    copies = {b: segment_bytes(cluster, b, partition) for b in holders}
    if len(copies) == REPLICATION and len(set(copies.values())) == 1:
        return None
    return {b: len(data) for b, data in copies.items()}


def read_partition(bootstrap: str, partition: int, timeout_s: float = 60.0) -> list[tuple[int, bytes]]:
    """Every (offset, value) of `partition` from offset 0 up to its high watermark, from the leader."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "chaos-checker", "enable.auto.commit": False, **QUIET}
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=timeout_s)
        consumer.assign([TopicPartition(TOPIC, partition, 0)])
        read: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while (read[-1][0] if read else -1) < high - 1 and time.monotonic() < deadline:
            read += [(m.offset(), m.value()) for m in consumer.consume(1000, 1.0) if m.error() is None]
        return read
    finally:
        consumer.close()


def check_reads(result: ChaosResult, workload: Workload, reads: dict[int, list[tuple[int, bytes]]]) -> None:
    """Fill the read-side findings of `result` from every partition's records."""
    where: dict[bytes, list[tuple[int, int]]] = {}
    for partition, records in reads.items():
        offsets = {offset for offset, _ in records}
        top = max(offsets, default=-1)
        missing = [o for o in range(top + 1) if o not in offsets]
        if missing:
            result.holes[partition] = missing
        for offset, value in records:
            where.setdefault(value, []).append((partition, offset))
    result.read = sum(len(records) for records in reads.values())
    result.duplicated = {v.decode(): places for v, places in where.items() if len(places) > 1}
    result.unexpected = sorted(v.decode() for v in where if v not in workload.sent)
    result.lost = sorted(v.decode() for v in workload.acked if v not in where)
    result.misplaced = {
        v.decode(): f"acknowledged at {at}, read at {where[v]}"
        for v, at in workload.acked.items()
        if v in where and at[1] is not None and where[v][0] != at  # None: acknowledged without an offset
    }
    result.unacknowledged_read = sum(1 for v in where if v in workload.sent and v not in workload.acked)


def settle(cluster: LocalCluster, settings: ChaosSettings, result: ChaosResult) -> None:
    """Wait for full ISRs and byte-identical replicas; what never came is recorded as stuck or
    divergent."""
    if not wait_until(lambda: isr_full(cluster, settings.partitions), settings.heal_timeout_s):
        states = {p: cluster.state(TOPIC, p) for p in range(settings.partitions)}
        result.stuck.append(f"ISR not full after the run: {states}")
    for p in range(settings.partitions):
        if not wait_until(lambda p=p: replica_sizes(cluster, p) is None, settings.heal_timeout_s):
            result.divergent[p] = replica_sizes(cluster, p) or {}


def collect(workload: Workload, result: ChaosResult) -> None:
    """Stop the workload and record what it sent and what it was answered."""
    workload.stop()
    result.sent, result.acked = len(workload.sent), len(workload.acked)
    result.failures = dict(Counter(workload.failed.values()))
    result.fatal = list(workload.fatal)
    if workload.unflushed:
        result.stuck.append(f"{workload.unflushed} records never answered")


def check(cluster: LocalCluster, settings: ChaosSettings, workload: Workload, result: ChaosResult) -> None:
    """Wait for the replicas to settle, read everything back, fill the findings of `result`."""
    settle(cluster, settings, result)
    reads = {}
    for p in range(settings.partitions):
        leader = (cluster.state(TOPIC, p) or {}).get("leader", -1)
        process = cluster.brokers.get(leader)
        reads[p] = read_partition(process.bootstrap if process else cluster.bootstrap, p)
    check_reads(result, workload, reads)


# -- one run -------------------------------------------------------------------------------------


def make_cluster(data_dir: Path, settings: ChaosSettings, zookeeper_connect: str | None) -> ProxiedCluster:
    return ProxiedCluster(
        data_dir,
        settings.brokers,
        zookeeper_connect=zookeeper_connect,
        session_timeout_ms=settings.session_timeout_ms,
        overrides={
            "replica.lag.time.max.ms": settings.lag_ms,
            "replica.fetch.backoff.ms": 200,
            "unclean.leader.election.enable": "false",
        },
    )


def create_topic(cluster: LocalCluster, settings: ChaosSettings) -> None:
    config = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
    topic = NewTopic(TOPIC, num_partitions=settings.partitions, replication_factor=REPLICATION, config=config)
    client = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    client.create_topics([topic], operation_timeout=30)[TOPIC].result(30)
    if not wait_until(lambda: isr_full(cluster, settings.partitions), 30):
        raise AssertionError(f"topic {TOPIC} never had full ISRs")


def run_faults(
    nemesis: Nemesis, workload: Workload, result: ChaosResult, on_cycle: Callable[[FaultRecord], None]
) -> None:
    """The cycles: draw, apply and heal a fault, wait for full ISRs, record what the workload saw."""
    settings = nemesis.settings
    for cycle in range(settings.cycles):
        fault = nemesis.draw(cycle)
        nemesis.apply(fault)
        result.faults.append(fault)
        healed = wait_until(lambda: nemesis.healed(), settings.heal_timeout_s)
        fault.window_s = workload.window_after(nemesis.epoch + fault.started_s)
        fault.acked = len(workload.acked)
        on_cycle(fault)
        if not healed:
            result.stuck.append(f"cycle {cycle} ({fault.kind} of {fault.broker}): not healed")
            return
        nemesis.quiet()


def run_chaos(
    data_dir: str | os.PathLike[str],
    settings: ChaosSettings,
    *,
    zookeeper_connect: str | None = None,
    on_cycle: Callable[[FaultRecord], None] = lambda _fault: None,
) -> ChaosResult:
    """One run on a fresh cluster in `data_dir`; the cluster is closed whatever happens."""
    result = ChaosResult(seed=settings.seed, data_dir=str(data_dir))
    cluster = make_cluster(Path(data_dir), settings, zookeeper_connect)
    try:
        cluster.start()
        cluster.wait_for_controller()
        create_topic(cluster, settings)
        workload = Workload(cluster.bootstrap, settings)
        workload.start()
        workload.wait_for_acknowledgements()
        nemesis = Nemesis(cluster, settings)
        try:
            run_faults(nemesis, workload, result, on_cycle)
        except Exception as exc:  # a broker that never came back is a finding, not a harness crash
            result.error = f"{type(exc).__name__}: {exc}"
        collect(workload, result)
        if result.error is None:
            check(cluster, settings, workload, result)
        for fault in (f for f in result.faults if f.window_s is None):
            fault.window_s = workload.window_after(nemesis.epoch + fault.started_s)
    finally:
        cluster.close()
    return result
