"""A fault harness for replication: a seeded nemesis against a local cluster under an idempotent
acks=all load, and a checker of Kafka's promise afterwards.

The promise: no acknowledged record is lost while one in-sync replica lives, and with unclean leader
election off, a partition that has none is unavailable rather than lossy. With it on
(`ChaosSettings.unclean_election`, the topic and the brokers alike) the checker reports what was
lost (acknowledged records missing or elsewhere, group commits gone back) without failing the run.

Owns, for one run (`run_chaos`): a cluster of real brokers (3 by default;
zookeeper.session.timeout.ms 4000, replica.lag.time.max.ms 3000, replica.fetch.backoff.ms 200,
replica.socket.timeout.ms and controller.socket.timeout.ms 2000, request.timeout.ms 4000, unclean
election off: Kafka's defaults of 18 s, 30 s and 30 s scaled down alike, since a connection whose
packets were dropped is noticed only when a request on it times out) and one topic (3
partitions, replication factor 3, min.insync.replicas 2);
the workload, two idempotent acks=all producers in threads of their own writing unique values
round-robin over the partitions (confluent-kafka b"w%08d", kafka-python b"k%08d"; both dial a
broker again at most 1 s after losing it, the Java client's reconnect.backoff.max.ms) and recording
every acknowledgement (value -> partition, offset) and every failure, and a consumer in a group
committing its position twice a second (`GroupReader`; __consumer_offsets has replication factor 3
and min.insync.replicas 2 too); the nemesis, which draws from
`random.Random(seed)` the faults of each cycle among `ChaosSettings.kinds`, with chance `overlap`
a second one on another broker at the same time:
- process faults: kill -9 of a random broker, of a random partition's leader, of the controller
  (half the time started again at once, its old session still registered, which the broker waits
  out itself; otherwise once that registration is gone), or SIGSTOP of a random broker for longer
  than replica.lag.time.max.ms and sometimes longer than the ZooKeeper session;
- host faults, on brokers each in a network namespace of their own on a bridge (testing/netns.py,
  `NamespacedCluster`): a broker's link down (cut from everybody), a partition's leader split from
  the other brokers (it keeps ZooKeeper and the clients), a partial partition (two brokers cut from
  each other only) or a one-way one (one broker's packets to another dropped), a minority split (one
  broker of 3, two of 5, cut from the other brokers and from ZooKeeper, which stays with the
  majority; clients reach both sides), a broker cut from ZooKeeper only (half the time within the
  session, half past it), packet loss of 5-30% both ways on a broker's link, its outbound traffic
  throttled to 128-1024 kbit/s (`tc tbf`), and a full disk (each broker's log dir is a 256 MiB
  tmpfs; the fault fills it to the last page and frees it at the heal);
- proxy faults, on brokers whose ZooKeeper and inbound links pass TCP proxies on loopback
  (testing/links.py, `ProxiedCluster`): a broker cut from ZooKeeper, a broker or a partition's
  leader isolated from everybody else, a slow link (50-400 ms one way). Where namespaces cannot be
  made (not root, no nftables) each host fault runs as its nearest proxy fault, and the result
  says why (`fallback`).
Each fault is held a bounded random time, then healed (restart, SIGCONT, link up and rules
flushed, proxy healed); before the next cycle the harness waits until every ISR is full again
(with `full_isr_between` off only until every broker is registered again: an ISR may be down to one
member when the next fault hits it, and the partition must then be unavailable, not lossy).

Liveness, after every cycle's heal and after the run (`check_liveness`, testing/liveness.py): within
LIVENESS_S (30 s) of the cycle's last heal, every broker is registered, the controller's channel
reaches every live broker and no broker has gone unheard by the current controller (their
/metrics), every broker's Metadata agrees with ZooKeeper (controller, live brokers, each partition's
leader and ISR), every ISR is the whole replica set, and then an acks=all record is accepted by every
partition (b"p%08d" values, checked like the producers'). A failed check is a stuck finding with what
it saw, and the brokers' last lines are kept (`liveness_report`); each fault records how long after
its heal the checks passed (`live_s`).

The checker, once everything healed and the replicas caught up, reads every partition from offset 0
and reports lost acknowledged values, values at two offsets, holes in the offsets, values nobody
sent, values read elsewhere than where they were acknowledged, replicas whose segment bytes
differ, and (after every cycle and at the end) group offsets committed below a commit acknowledged
before: an acknowledged commit lost. Per fault it also records the unavailability window: the
longest gap of any partition between consecutive acknowledgements from the fault's start to the end
of its cycle (the start counting as the first; a partition with none in the cycle counts until its
first one after it), and how much of that gap came after the heal (of both faults, in a cycle with
two); the summary gives the worst of both per fault kind.

The result (`ChaosResult`) keeps the seed and the data directory, where each broker's output is
`broker-<id>.out`, so a failing run can be replayed and read. A seed fixes the draws (kinds, holds,
random targets), not the timing: the leader or controller a fault hits is whichever it is then.

Not covered: clock skew, disk faults other than a full disk (slow or failing devices), a partition
between clients and brokers only, and more than two faults at once.

Callers: tests/cluster/test_chaos.py (a bounded run), bench/chaos.py (long runs). Not used by the
broker itself.
"""

from __future__ import annotations

import bisect
import itertools
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import kafka
import kafka.errors
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.cluster import LocalCluster
from odradek.testing.links import ProxiedCluster
from odradek.testing.liveness import QUIET, broker_tails, produce_to_every_partition, wait_live
from odradek.testing.netns import NamespacedCluster, netns_available
from odradek.testing.proxy import FaultProxy

TOPIC = "chaos"
REPLICATION = 3
PROCESS_KINDS = ("kill-broker", "kill-leader", "kill-controller", "pause-broker")
CUT_KINDS = ("cut-zookeeper", "isolate-broker", "isolate-leader")
SLOW_KINDS = ("slow-zookeeper", "slow-inbound")
PROXY_KINDS = CUT_KINDS + SLOW_KINDS  # need a ProxiedCluster
PEER_KINDS = ("partial-link", "one-way")  # between the target and one other broker
HOST_KINDS = (
    "isolate-host",
    "split-leader",
    "split-minority",
    "zookeeper-only",
    "lossy-link",
    "throttled-link",
    "full-disk",
    *PEER_KINDS,
)
# The Java client's default; librdkafka's (10 s) and kafka-python's (30 s) would measure how long a
# client waits to dial again after a heal rather than how long the cluster takes to serve again.
RECONNECT_BACKOFF_MAX_MS = 1000
GROUP = "chaos-readers"
COMMIT_INTERVAL_S = 0.5
DISK_BYTES = 256 << 20  # each namespaced broker's log dir, a tmpfs the full-disk fault fills
# by the first byte of their values; b"p": the liveness probe's acks=all records, one per partition
PRODUCERS = {b"w": "confluent-kafka", b"k": "kafka-python", b"p": "liveness-probe"}
LIVENESS_S = 30.0  # every liveness check passes within this of a cycle's last heal
LEADER_KINDS = ("kill-leader", "isolate-leader", "split-leader")
KILL_KINDS = ("kill-broker", "kill-leader", "kill-controller")
# Where namespaces cannot be made, each host fault runs as the nearest proxy fault.
PROXY_EQUIVALENT = {
    "isolate-host": "isolate-broker",
    "split-leader": "isolate-leader",
    "split-minority": "isolate-broker",
    "zookeeper-only": "cut-zookeeper",
    "lossy-link": "slow-inbound",
    "throttled-link": "slow-inbound",
    "full-disk": "pause-broker",
    "partial-link": "isolate-broker",
    "one-way": "isolate-broker",
}


@dataclass(frozen=True)
class ChaosSettings:
    """What one run does; times in seconds unless named otherwise."""

    seed: int
    cycles: int
    brokers: int = 3
    partitions: int = 3
    session_timeout_ms: int = 4000
    lag_ms: int = 3000
    socket_timeout_ms: int = 2000  # replica.socket.timeout.ms, controller.socket.timeout.ms
    request_timeout_ms: int = 4000  # the brokers' and the producers' request.timeout.ms
    rate: float = 200.0  # records a second the workload offers
    kill_hold_s: tuple[float, float] = (0.5, 5.0)
    slow_hold_s: tuple[float, float] = (2.0, 6.0)
    delay_ms: tuple[int, int] = (50, 400)  # one-way, per forwarded chunk, on a slowed link
    loss_percent: tuple[int, int] = (5, 30)  # packets dropped on a lossy link, each way
    rate_kbit: tuple[int, int] = (128, 1024)  # a throttled link's outbound rate
    quiet_s: tuple[float, float] = (0.5, 2.0)
    heal_timeout_s: float = 60.0
    full_isr_between: bool = True  # False: the next fault once every broker is registered again
    message_timeout_ms: int = 120_000
    kinds: tuple[str, ...] = PROCESS_KINDS  # what the nemesis draws from
    overlap: float = 0.0  # chance that a cycle also faults a second broker at the same time
    second_producer_rate: float = 50.0  # records a second of a kafka-python producer (0: none)
    unclean_election: bool = False  # unclean.leader.election.enable: loss is then reported, not failed


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
    at_once: bool = False  # a killed broker started again at once, its old session still registered
    peer: int | None = None  # the other end of a partial or one-way partition
    loss_percent: int = 0  # a lossy link's share of dropped packets
    rate_kbit: int = 0  # a throttled link's outbound rate
    window_s: float | None = None  # longest gap between a partition's acknowledgements, see below
    past_heal_s: float | None = None  # how much of such a gap came after the heal
    healed_s: float | None = None  # when the fault was healed, since the run started
    ended_s: float | None = None  # when its cycle ended, since the run started
    acked: int = 0  # acknowledgements so far, at the end of the cycle
    live_s: float | None = None  # from the heal until every liveness check passed


@dataclass
class ChaosResult:
    """What a run found; `ok` when the promise held and nothing got stuck."""

    seed: int
    data_dir: str
    network: str = "proxy"  # "netns": brokers in namespaces; "proxy": TCP proxies on loopback
    fallback: str | None = None  # why host faults ran as proxy faults
    faults: list[FaultRecord] = field(default_factory=list)
    sent: int = 0
    acked: int = 0
    acked_by: dict[str, int] = field(default_factory=dict)  # per producer client
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
    group_consumed: int = 0
    group_commits: int = 0
    group_commit_failures: dict[str, int] = field(default_factory=dict)
    commit_regressions: list[str] = field(default_factory=list)  # acknowledged commits lost
    unacknowledged_read: int = 0  # sent, never acknowledged, yet written: allowed
    unclean_election: bool = False  # on: acknowledged data lost is reported, and allowed
    liveness_checks: int = 0  # passed: after each cycle's heal and after the run
    liveness_report: str = ""  # the brokers' last lines when one failed
    error: str | None = None

    @property
    def ok(self) -> bool:
        findings: tuple[Any, ...] = (self.duplicated, self.holes, self.unexpected, self.divergent)
        if not self.unclean_election:  # what an unclean election may cost: acknowledged data
            findings += (self.lost, self.misplaced, self.commit_regressions)
        return not any(findings) and not self.stuck and not self.fatal and self.error is None

    def worst_windows(self) -> dict[str, float]:
        """Per fault kind, the longest unavailability window its faults caused."""
        return self._worst("window_s")

    def worst_past_heal(self) -> dict[str, float]:
        """Per fault kind, the longest a partition stayed unavailable after its fault was healed."""
        return self._worst("past_heal_s")

    def _worst(self, measure: str) -> dict[str, float]:
        worst: dict[str, float] = {}
        for fault in self.faults:
            value = getattr(fault, measure)
            if value is not None:
                worst[fault.kind] = round(max(worst.get(fault.kind, 0.0), value), 1)
        return worst

    def summary(self) -> str:
        return (
            f"seed={self.seed} network={self.network} cycles={len({f.cycle for f in self.faults})} "
            f"faults={len(self.faults)} sent={self.sent} acked={self.acked} {self.acked_by} "
            f"read={self.read} lost={len(self.lost)} duplicated={len(self.duplicated)} "
            f"holes={sum(len(h) for h in self.holes.values())} unexpected={len(self.unexpected)} "
            f"misplaced={len(self.misplaced)} divergent={sorted(self.divergent)} stuck={len(self.stuck)} "
            f"group: consumed={self.group_consumed} commits={self.group_commits} "
            f"commit_failures={self.group_commit_failures} regressions={len(self.commit_regressions)} "
            f"fatal={len(self.fatal)} failures={self.failures} worst_windows={self.worst_windows()} "
            f"worst_past_heal={self.worst_past_heal()} liveness_checks={self.liveness_checks} "
            f"worst_time_to_live={self._worst('live_s')} "
            f"unclean_election={'on: loss allowed' if self.unclean_election else 'off'} "
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
    """Two idempotent acks=all producers in threads of their own, every acknowledgement and failure
    recorded: confluent-kafka (librdkafka) at `rate` writing b"w%08d" values, and kafka-python at
    `second_producer_rate` writing b"k%08d" values, both round-robin over the partitions."""

    def __init__(self, bootstrap: str, settings: ChaosSettings) -> None:
        self.bootstrap = bootstrap
        self.settings = settings
        self.sent: set[bytes] = set()
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: dict[bytes, str] = {}
        self.fatal: list[str] = []
        self.ack_times: dict[int, list[float]] = {p: [] for p in range(settings.partitions)}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run_librdkafka, name="chaos-producer", daemon=True)]
        if settings.second_producer_rate > 0:
            self._threads.append(
                threading.Thread(target=self._run_kafka_python, name="chaos-producer-2", daemon=True)
            )
        self.group = GroupReader(bootstrap, settings)
        self._probes = 0

    def probe(self) -> list[str]:
        """One acks=all record (b"p%08d") to every partition, recorded as the producers' are; why
        each that failed did."""
        with self._lock:
            values = [b"p%08d" % (self._probes + p) for p in range(self.settings.partitions)]
            self._probes += len(values)
            self.sent.update(values)
        answers = produce_to_every_partition(self.bootstrap, TOPIC, values)
        failures = []
        for value in values:
            answer = answers.get(value, "not answered")
            if isinstance(answer, tuple):
                self._acknowledge(value, *answer)
            else:
                self._fail(value, answer)
                failures.append(f"{value.decode()}: {answer}")
        return failures

    def start(self) -> None:
        for thread in self._threads:
            thread.start()
        self.group.start()

    def stop(self) -> None:
        """Stop offering records, wait for the outstanding ones to be answered, stop the group."""
        self._stop.set()
        for thread in self._threads:
            thread.join(self.settings.message_timeout_ms / 1000 + 30)
        self.group.stop()

    @property
    def unanswered(self) -> int:
        return len(self.sent) - len(self.acked) - len(self.failed)

    def _acknowledge(self, value: bytes, partition: int, offset: int) -> None:
        with self._lock:
            self.acked[value] = (partition, offset)
            bisect.insort(self.ack_times[partition], time.monotonic())

    def _fail(self, value: bytes, reason: str) -> None:
        with self._lock:
            self.failed[value] = reason

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal.append(str(err))

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._fail(msg.value(), err.name())
        else:
            self._acknowledge(msg.value(), msg.partition(), msg.offset())

    def _paced(self, rate: float, offer: Callable[[int], bool], wait: Callable[[float], object]) -> None:
        """Call `offer(index)` `rate` times a second until stopped; `wait(s)` serves the producer
        meanwhile; an offer refused (False) is made again with the same index."""
        interval = 1.0 / rate
        next_at = time.monotonic()
        index = 0
        while not self._stop.is_set() and not self.fatal:
            if not offer(index):
                wait(0.1)
                continue
            index += 1
            next_at = max(next_at + interval, time.monotonic() - 1.0)
            while time.monotonic() < next_at:
                wait(max(0.0, next_at - time.monotonic()))

    def _run_librdkafka(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": self.settings.message_timeout_ms,
                "request.timeout.ms": self.settings.request_timeout_ms,
                "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
                "error_cb": self._on_error,
                **QUIET,
            }
        )

        def offer(index: int) -> bool:
            value = b"w%08d" % index
            try:
                partition = index % self.settings.partitions
                producer.produce(TOPIC, value=value, partition=partition, on_delivery=self._on_delivery)
            except BufferError:
                return False
            except KafkaException as exc:
                self.fatal.append(str(exc))
                return False
            self.sent.add(value)
            return True

        self._paced(self.settings.rate, offer, producer.poll)
        producer.flush(self.settings.message_timeout_ms / 1000 + 10)

    def _run_kafka_python(self) -> None:
        producer = kafka.KafkaProducer(
            bootstrap_servers=self.bootstrap.split(","),
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=self.settings.request_timeout_ms,
            reconnect_backoff_max_ms=RECONNECT_BACKOFF_MAX_MS,
            delivery_timeout_ms=self.settings.message_timeout_ms,
        )

        def offer(index: int) -> bool:
            value = b"k%08d" % index
            partition = index % self.settings.partitions
            try:
                future = producer.send(TOPIC, value=value, partition=partition)
            except kafka.errors.KafkaTimeoutError:
                return False
            self.sent.add(value)
            future.add_callback(lambda meta, v=value: self._acknowledge(v, meta.partition, meta.offset))
            future.add_errback(lambda exc, v=value: self._fail(v, type(exc).__name__))
            return True

        self._paced(self.settings.second_producer_rate, offer, time.sleep)
        producer.flush(self.settings.message_timeout_ms / 1000 + 10)
        producer.close(10)

    def wait_for_acknowledgements(self, timeout_s: float = 30.0) -> None:
        if not wait_until(lambda: all(self.ack_times.values()), timeout_s):
            raise AssertionError(f"no acknowledgement from some partition within {timeout_s} s")

    def unavailability(self, start: float, healed: float, end: float) -> tuple[float, float] | None:
        """See `unavailability`."""
        return unavailability(self.ack_times.values(), start, healed, end)


def unavailability(
    ack_times: Iterable[list[float]], start: float, healed: float, end: float
) -> tuple[float, float] | None:
    """(window, past heal) of a fault whose cycle ran from `start` to `end`, from each partition's
    acknowledgement times (sorted): the window is the longest gap of any partition between
    consecutive acknowledgements (`start` counting as the first), the past heal the longest stretch
    of such a gap after `healed`. A partition with no acknowledgement in the cycle counts until its
    first one after it; None while it has none."""
    window = past_heal = 0.0
    for times in ack_times:
        first, last = bisect.bisect_right(times, start), bisect.bisect_right(times, end)
        if first == last:
            if last == len(times):
                return None
            last += 1
        points = [start, *times[first:last]]
        for before, after in itertools.pairwise(points):
            window = max(window, after - before)
            past_heal = max(past_heal, after - max(before, healed))
    return window, past_heal


class GroupReader:
    """A confluent-kafka consumer in group GROUP reading the topic and committing its position
    synchronously every `COMMIT_INTERVAL_S`, recording each acknowledged commit; `check_committed()`
    reads the group's committed offsets (OffsetFetch through a second consumer that never joins) and
    records every partition whose committed offset is below one acknowledged before the read began:
    an acknowledged commit lost (the only committer moves forward, so nothing else lowers it)."""

    def __init__(self, bootstrap: str, settings: ChaosSettings) -> None:
        self.bootstrap = bootstrap
        self.settings = settings
        self.consumed = 0
        self.commits = 0
        self.commit_failures: Counter[str] = Counter()
        self.acked_commits: dict[int, int] = {}  # partition -> highest acknowledged committed offset
        self.regressions: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-group-reader", daemon=True)

    def _config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
            **QUIET,
        }

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        consumer = Consumer(self._config())
        consumer.subscribe([TOPIC])
        next_commit = time.monotonic() + COMMIT_INTERVAL_S
        try:
            while not self._stop.is_set():
                self.consumed += sum(1 for m in consumer.consume(500, 0.2) if m.error() is None)
                if time.monotonic() >= next_commit:
                    self._commit(consumer)
                    next_commit = time.monotonic() + COMMIT_INTERVAL_S
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer) -> None:
        try:
            committed = consumer.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:  # nothing new consumed: nothing to commit
                self.commit_failures[exc.args[0].name()] += 1
            return
        with self._lock:
            for tp in committed or ():
                if tp.error is None and tp.offset >= 0:
                    best = self.acked_commits.get(tp.partition, -1)
                    self.acked_commits[tp.partition] = max(best, tp.offset)
            self.commits += 1

    def check_committed(self, timeout_s: float = 30.0) -> None:
        """Compare the group's committed offsets with the commits acknowledged before asking."""
        with self._lock:
            floor = dict(self.acked_commits)
        reader = Consumer(self._config())
        try:
            asked = [TopicPartition(TOPIC, p) for p in range(self.settings.partitions)]
            found = reader.committed(asked, timeout=timeout_s)
        except KafkaException as exc:
            self.commit_failures[f"OffsetFetch {exc.args[0].name()}"] += 1
            return
        finally:
            reader.close()
        for tp in found:
            if tp.partition in floor and tp.offset < floor[tp.partition]:
                self.regressions.append(
                    f"partition {tp.partition}: committed {tp.offset}, "
                    f"below {floor[tp.partition]} acknowledged before"
                )


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
    """Draws, applies and heals the faults of each cycle, every choice from `random.Random(seed)`."""

    def __init__(self, cluster: LocalCluster, settings: ChaosSettings) -> None:
        self.cluster = cluster
        self.settings = settings
        self.rng = random.Random(settings.seed)
        # whether a killed broker starts again at once: drawn apart, so a seed's other draws stay
        self.restarts = random.Random(settings.seed + 1)
        self.epoch = time.monotonic()

    def draw(self, cycle: int) -> list[FaultRecord]:
        """The cycle's fault, and with chance `overlap` a second one on another broker."""
        started = round(time.monotonic() - self.epoch, 2)
        first = self._draw_one(cycle, self.rng.choice(self.settings.kinds), started, exclude=None)
        if self.rng.random() >= self.settings.overlap or len(self.cluster.brokers) < 2:
            return [first]
        anywhere = [k for k in self.settings.kinds if k not in LEADER_KINDS and k != "kill-controller"]
        second = self._draw_one(cycle, self.rng.choice(anywhere or ["pause-broker"]), started, first.broker)
        return [first, second]

    def _draw_one(self, cycle: int, kind: str, started: float, exclude: int | None) -> FaultRecord:
        partition = self.rng.randrange(self.settings.partitions) if kind in LEADER_KINDS else None
        broker = self._target(kind, partition, exclude)
        fault = FaultRecord(cycle, kind, broker, partition, round(self._hold(kind), 2), started)
        fault.at_once = kind in KILL_KINDS and self.restarts.random() < 0.5
        if kind in SLOW_KINDS:
            fault.delay_ms = self.rng.randint(*self.settings.delay_ms)
        if kind == "lossy-link":
            fault.loss_percent = self.rng.randint(*self.settings.loss_percent)
        if kind == "throttled-link":
            fault.rate_kbit = self.rng.randint(*self.settings.rate_kbit)
        others = [b for b in sorted(self.cluster.brokers) if b != broker]
        if kind in PEER_KINDS or (kind == "split-minority" and len(self.cluster.brokers) >= 5):
            fault.peer = self.rng.choice(others)  # a split's second minority member, from 5 brokers
        return fault

    def _target(self, kind: str, partition: int | None, exclude: int | None) -> int:
        candidates = [b for b in sorted(self.cluster.brokers) if b != exclude]
        fallback = self.rng.choice(candidates)
        if kind in LEADER_KINDS:
            leader = (self.cluster.state(TOPIC, partition or 0) or {}).get("leader", -1)
            return leader if leader in candidates else fallback
        if kind == "kill-controller":
            controller = self.cluster.controller()
            return controller if controller in candidates else fallback
        return fallback

    def _hold(self, kind: str) -> float:
        """A kill: `kill_hold_s`; a slowed or lossy link: `slow_hold_s`; a pause, an isolation or a
        partition: past replica.lag.time.max.ms, half the time also past the ZooKeeper session; a
        ZooKeeper cut: half the time within the session (the broker may still dial again too
        late), half past it."""
        session_s = self.settings.session_timeout_ms / 1000
        if kind in SLOW_KINDS or kind in ("lossy-link", "throttled-link", "full-disk"):
            return self.rng.uniform(*self.settings.slow_hold_s)
        if kind in ("cut-zookeeper", "zookeeper-only"):
            within = self.rng.random() < 0.5
            return self.rng.uniform(session_s * 0.3, session_s * 0.8) if within else self._past_session()
        if kind in PROCESS_KINDS and kind != "pause-broker":
            return self.rng.uniform(*self.settings.kill_hold_s)
        lag_s = self.settings.lag_ms / 1000
        if self.rng.random() < 0.5:
            return self.rng.uniform(lag_s * 1.3, min(lag_s * 2, session_s * 0.9))
        return self._past_session()

    def _past_session(self) -> float:
        session_s = self.settings.session_timeout_ms / 1000
        return self.rng.uniform(session_s * 1.3, session_s * 2)

    def apply(self, faults: list[FaultRecord]) -> None:
        """Inject the cycle's faults together, heal each when its hold is over (shortest first);
        every broker is running again, and every link whole, when this returns."""
        began = time.monotonic()
        heals: list[tuple[FaultRecord, Callable[[], None]]] = []
        try:
            for fault in faults:
                heals.append((fault, self._inject(fault)))
        finally:
            for fault, heal in sorted(heals, key=lambda pair: pair[0].hold_s):
                time.sleep(max(0.0, began + fault.hold_s - time.monotonic()))
                heal()
                fault.healed_s = round(time.monotonic() - self.epoch, 2)

    def _inject(self, fault: FaultRecord) -> Callable[[], None]:
        """Start `fault`; what heals it."""
        if fault.kind in HOST_KINDS:
            return self._inject_on_host(fault)
        if fault.kind in PROXY_KINDS:
            return self._inject_on_link(fault)
        process = self.cluster.brokers[fault.broker]
        if fault.kind == "pause-broker":
            process.send_signal(signal.SIGSTOP)
            return lambda: process.send_signal(signal.SIGCONT)
        process.kill()

        def restart() -> None:
            if not fault.at_once:  # at once: the broker waits for its old registration to go itself
                self._wait_deregistered(fault.broker)
            process.start()

        return restart

    def _inject_on_host(self, fault: FaultRecord) -> Callable[[], None]:
        assert isinstance(self.cluster, NamespacedCluster)
        cluster = self.cluster
        link = cluster.links[fault.broker]
        others = [b for b in cluster.brokers if b != fault.broker]
        if fault.kind == "isolate-host":
            link.down()
        elif fault.kind == "split-leader":
            link.drop_peers(cluster.addresses(others))
        elif fault.kind == "split-minority":
            return self._split_minority(cluster, fault)
        elif fault.kind == "zookeeper-only":
            link.drop_zookeeper(*cluster.zookeeper_address)
        elif fault.kind == "lossy-link":
            link.lose(fault.loss_percent)
        elif fault.kind == "throttled-link":
            link.throttle(fault.rate_kbit)
        elif fault.kind == "full-disk":
            disk = cluster.disks[fault.broker]
            disk.fill()
            return disk.free
        else:
            assert fault.peer is not None
            link.drop_peers(cluster.addresses([fault.peer]), outbound_only=fault.kind == "one-way")
        return link.heal

    def _split_minority(self, cluster: NamespacedCluster, fault: FaultRecord) -> Callable[[], None]:
        """The target (and the peer, from 5 brokers) cut from the other brokers and from ZooKeeper,
        which sits on the majority's side; clients still reach both sides."""
        minority = [fault.broker] + ([fault.peer] if fault.peer is not None else [])
        majority = [b for b in cluster.brokers if b not in minority]
        for broker in minority:
            cluster.links[broker].drop_peers(cluster.addresses(majority))
            cluster.links[broker].drop_zookeeper(*cluster.zookeeper_address)

        def heal() -> None:
            for broker in minority:
                cluster.links[broker].heal()

        return heal

    def _inject_on_link(self, fault: FaultRecord) -> Callable[[], None]:
        assert isinstance(self.cluster, ProxiedCluster)
        zookeeper = fault.kind.endswith("-zookeeper")
        link = (self.cluster.zookeeper_links if zookeeper else self.cluster.inbound_links)[fault.broker]
        if fault.kind in SLOW_KINDS:
            link.delay_ms = fault.delay_ms
        else:
            link.cut()

        def heal() -> None:
            healed_at = link.forwarded  # none get through while cut
            link.delay_ms = 0
            link.heal()
            if fault.kind == "cut-zookeeper":
                self._wait_reconnected(fault.broker, link, healed_at)

        return heal

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
    result.acked_by = dict(Counter(PRODUCERS[value[:1]] for value in workload.acked))
    result.failures = dict(Counter(workload.failed.values()))
    result.fatal = list(workload.fatal)
    if workload.unanswered:
        result.stuck.append(f"{workload.unanswered} records never answered")
    result.group_consumed, result.group_commits = workload.group.consumed, workload.group.commits


def check(cluster: LocalCluster, settings: ChaosSettings, workload: Workload, result: ChaosResult) -> None:
    """Wait for the replicas to settle, read everything back, fill the findings of `result`."""
    settle(cluster, settings, result)
    reads = {}
    for p in range(settings.partitions):
        leader = (cluster.state(TOPIC, p) or {}).get("leader", -1)
        process = cluster.brokers.get(leader)
        reads[p] = read_partition(process.bootstrap if process else cluster.bootstrap, p)
    check_reads(result, workload, reads)
    workload.group.check_committed()
    result.group_commit_failures = dict(workload.group.commit_failures)
    result.commit_regressions = list(workload.group.regressions)


# -- one run -------------------------------------------------------------------------------------


def network_for(kinds: tuple[str, ...]) -> tuple[str, tuple[str, ...], str | None]:
    """Which cluster `kinds` need ("netns" or "proxy") and the kinds to run on it: host faults
    become their nearest proxy faults where namespaces cannot be made (the third item says why)."""
    if any(k in HOST_KINDS for k in kinds) and any(k in PROXY_KINDS for k in kinds):
        raise ValueError("host faults (namespaces) and proxy faults do not mix in one run")
    if not any(k in HOST_KINDS for k in kinds):
        return "proxy", kinds, None
    unavailable = netns_available()
    if unavailable is None:
        return "netns", kinds, None
    return "proxy", tuple(dict.fromkeys(PROXY_EQUIVALENT.get(k, k) for k in kinds)), unavailable


def make_cluster(
    data_dir: Path, settings: ChaosSettings, network: str, zookeeper_connect: str | None
) -> LocalCluster:
    """Brokers in namespaces of their own ("netns", with a ZooKeeper server of their own), or behind
    TCP proxies on loopback ("proxy")."""
    overrides = {
        "offsets.topic.replication.factor": REPLICATION,
        "offsets.topic.num.partitions": settings.partitions,
        "min.insync.replicas": 2,  # __consumer_offsets' too: a commit is acknowledged by two replicas
        "replica.lag.time.max.ms": settings.lag_ms,
        "replica.fetch.backoff.ms": 200,
        "replica.socket.timeout.ms": settings.socket_timeout_ms,
        "controller.socket.timeout.ms": settings.socket_timeout_ms,
        "request.timeout.ms": settings.request_timeout_ms,
        "unclean.leader.election.enable": str(settings.unclean_election).lower(),
    }
    if network == "netns":
        return NamespacedCluster(
            data_dir,
            settings.brokers,
            disk_bytes=DISK_BYTES,
            session_timeout_ms=settings.session_timeout_ms,
            overrides=overrides,
            metrics=True,
        )
    return ProxiedCluster(
        data_dir,
        settings.brokers,
        zookeeper_connect=zookeeper_connect,
        session_timeout_ms=settings.session_timeout_ms,
        overrides=overrides,
        metrics=True,
    )


def create_topic(cluster: LocalCluster, settings: ChaosSettings) -> None:
    config = {
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": str(settings.unclean_election).lower(),
    }
    topic = NewTopic(TOPIC, num_partitions=settings.partitions, replication_factor=REPLICATION, config=config)
    client = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    client.create_topics([topic], operation_timeout=30)[TOPIC].result(30)
    if not wait_until(lambda: isr_full(cluster, settings.partitions), 30):
        raise AssertionError(f"topic {TOPIC} never had full ISRs")


def note_unavailability(faults: Sequence[FaultRecord], workload: Workload, epoch: float) -> None:
    """The window and past-heal stretch of one cycle's faults (they start together), from their
    start to the end of the cycle (now, the first time; a later call, for a partition that had no
    acknowledgement by then, keeps that end); past the heal means past the last of their heals."""
    for fault in faults:
        if fault.ended_s is None:
            fault.ended_s = time.monotonic() - epoch
    healed = epoch + max(f.healed_s if f.healed_s is not None else f.started_s + f.hold_s for f in faults)
    start, end = epoch + faults[0].started_s, epoch + faults[0].ended_s
    found = workload.unavailability(start, healed, end)
    for fault in faults if found is not None else ():
        fault.window_s, fault.past_heal_s = (round(value, 3) for value in found)


def run_faults(
    nemesis: Nemesis, workload: Workload, result: ChaosResult, on_cycle: Callable[[FaultRecord], None]
) -> None:
    """The cycles: draw, apply and heal the faults, wait until healed, record what the workload saw."""
    settings = nemesis.settings
    for cycle in range(settings.cycles):
        faults = nemesis.draw(cycle)
        nemesis.apply(faults)
        result.faults += faults
        healed = wait_until(lambda: nemesis.healed(), settings.heal_timeout_s)
        what = ", ".join(f"{f.kind} of {f.broker}" for f in faults)
        if healed:
            workload.group.check_committed()
            healed_at = nemesis.epoch + max(f.healed_s or 0.0 for f in faults)
            healed = check_liveness(nemesis.cluster, workload, result, healed_at, f"cycle {cycle} ({what})")
            for fault in faults:
                fault.live_s = round(time.monotonic() - healed_at, 2)
        else:
            result.stuck.append(f"cycle {cycle} ({what}): not healed")
        note_unavailability(faults, workload, nemesis.epoch)
        for fault in faults:
            fault.acked = len(workload.acked)
            on_cycle(fault)
        if not healed:
            return
        nemesis.quiet()


def check_liveness(
    cluster: LocalCluster, workload: Workload, result: ChaosResult, healed_at: float, when: str
) -> bool:
    """Every liveness check (testing/liveness.py) passing by `healed_at` + LIVENESS_S, then an
    acks=all record accepted by every partition; what failed is recorded as stuck, with the brokers'
    last lines."""
    deadline = max(healed_at + LIVENESS_S, time.monotonic())
    findings = wait_live(cluster, TOPIC, workload.settings.partitions, deadline)
    if not findings:
        findings = [f"acks=all {failure}" for failure in workload.probe()]
    elif time.monotonic() > healed_at + LIVENESS_S:
        findings.insert(0, f"not live {LIVENESS_S:g} s after the heal")
    if findings:
        result.stuck.append(f"{when}: {'; '.join(findings)}")
        result.liveness_report = broker_tails(cluster)
        return False
    result.liveness_checks += 1
    return True


def run_chaos(
    data_dir: str | os.PathLike[str],
    settings: ChaosSettings,
    *,
    zookeeper_connect: str | None = None,
    on_cycle: Callable[[FaultRecord], None] = lambda _fault: None,
) -> ChaosResult:
    """One run on a fresh cluster in `data_dir`; the cluster is closed whatever happens. Host faults
    need network namespaces: where they cannot be made, the run says why (`result.fallback`) and
    runs the nearest proxy faults instead; a namespaced cluster starts its own ZooKeeper server."""
    network, kinds, unavailable = network_for(settings.kinds)
    settings = replace(settings, kinds=kinds)
    result = ChaosResult(
        seed=settings.seed,
        data_dir=str(data_dir),
        network=network,
        unclean_election=settings.unclean_election,
    )
    if unavailable is not None:
        result.fallback = f"network namespaces unavailable ({unavailable}): host faults run through proxies"
    cluster = make_cluster(Path(data_dir), settings, network, zookeeper_connect)
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
        if result.error is None and not result.stuck:
            check_liveness(cluster, workload, result, time.monotonic(), "after the run")
        collect(workload, result)
        if result.error is None:
            check(cluster, settings, workload, result)
        for cycle in sorted({f.cycle for f in result.faults if f.window_s is None}):
            note_unavailability([f for f in result.faults if f.cycle == cycle], workload, nemesis.epoch)
    finally:
        cluster.close()
    return result
