"""Apache Kafka as a fetched reference: its jars, its brokers and its command-line tools, side by side
with odradek (issue 34).

Owns the cache of Kafka's jars (`fetch`, `classpath`), one Kafka broker JVM per `KafkaBroker`, three
per `KafkaCluster`, and the runs of Kafka's own tools by their main classes (`run_tool`). Two versions
are pinned: ZOOKEEPER_VERSION, the last 3.9.x, in ZooKeeper mode (the cluster design odradek follows:
its brokers join a `zookeeper.connect` of the caller's), and KRAFT_VERSION, the newest 4.x, in KRaft
combined mode (each node broker and controller, its storage formatted first with a random cluster id).

The jars are never vendored: `fetch` resolves them with Maven from tools/kafka-reference/pom.xml into a
cache outside the repository, `$ODRADEK_KAFKA_CACHE` or ~/.cache/odradek/kafka, as
`<cache>/kafka-<version>/libs/*.jar`; a version already there is not fetched again. `missing(version)`
says in one line why Kafka cannot run here (no Java, no jars), which is what tests skip with.

A broker's JVM is kept small for tests (KAFKA_HEAP, serial GC, the C1 compiler only); benchmarks
give `jvm_options=SERVER_JVM_OPTIONS`, the heap, collector and JIT bin/kafka-server-start.sh starts
Kafka with. It runs in a process group of its own, with its
config, data and output in a work directory of the caller's. `start()` returns once the listener
accepts connections and a Metadata request lists every broker of the cluster; `stop()` sends SIGTERM
and waits, then SIGKILL.

Callers: tools/kafka_reference.py (the command line), bench/peers.py (KafkaBroker), tests/kafka_reference.
Not used by the broker itself.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from odradek.testing import stop_signals
from odradek.testing.broker import LoopbackProcess, free_port

ZOOKEEPER_VERSION = "3.9.2"  # the newest 3.9.x on Maven Central: the last line with ZooKeeper mode
KRAFT_VERSION = "4.4.0"  # the newest 4.x on Maven Central
VERSIONS = (ZOOKEEPER_VERSION, KRAFT_VERSION)

KAFKA_HEAP = "-Xmx512m"
TOOL_HEAP = "-Xmx256m"
_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
# What Kafka's start scripts run a broker with by default (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS):
# a 1 GiB heap, G1 with 20 ms pause goals, the full JIT; for benchmarks, where the test settings above
# would measure a handicapped Kafka.
SERVER_JVM_OPTIONS = (
    "-Xmx1G",
    "-Xms1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
POM = Path(__file__).resolve().parents[3] / "tools" / "kafka-reference" / "pom.xml"
_COMPLETE = ".complete"  # written once a fetch has copied every jar


class KafkaStartError(RuntimeError):
    """A Kafka broker exited or was not ready in time; the message carries its output tail."""


def cache_root() -> Path:
    return Path(os.environ.get("ODRADEK_KAFKA_CACHE") or Path.home() / ".cache" / "odradek" / "kafka")


def is_kraft(version: str) -> bool:
    """4.x has no ZooKeeper mode; 3.9 runs in it here."""
    return int(version.split(".")[0]) >= 4


def libs_dir(version: str) -> Path:
    return cache_root() / f"kafka-{version}" / "libs"


def is_fetched(version: str) -> bool:
    return (libs_dir(version) / _COMPLETE).exists()


def classpath(version: str) -> str:
    """The JVM classpath of Kafka `version` (a wildcard over its cached jars)."""
    return str(libs_dir(version) / "*")


def missing(version: str) -> str | None:
    """One line saying why Kafka `version` cannot run here, or None when it can."""
    if shutil.which("java") is None:
        return f"Kafka {version} needs Java (17+): none on PATH"
    if not is_fetched(version):
        how = "tools/install-deps.sh" if shutil.which("mvn") else "install Maven, then tools/install-deps.sh"
        return f"Kafka {version} is not fetched into {cache_root()}: {how} fetches it"
    return None


def fetch(version: str) -> Path:
    """Resolve Kafka `version` and its dependencies into the cache (nothing when already there)."""
    target = libs_dir(version)
    if is_fetched(version):
        return target
    if shutil.which("mvn") is None:
        raise RuntimeError(f"fetching Kafka {version} needs Maven (mvn): none on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=target.parent))
    argv = [
        "mvn",
        "-q",
        "-B",
        "-Dstyle.color=never",
        "-f",
        str(POM),
        "dependency:copy-dependencies",
        f"-Dkafka.version={version}",
    ]
    argv += ["-P", "kraft" if is_kraft(version) else "zookeeper", f"-DoutputDirectory={staging}"]
    try:
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
        (staging / _COMPLETE).write_text(version + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def random_cluster_id() -> str:
    """A cluster id as Kafka's Uuid.randomUuid() prints it (22 url-safe base64 characters, never
    starting with '-', which a command line would take for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _logging_config(version: str, work_dir: Path, level: str, target: str) -> list[str]:
    """The system property pointing Kafka's logging at a config written to `work_dir`: log4j 2
    for 4.x, log4j 1 (reload4j) for 3.9; `target` is a file path, or '' for stderr."""
    work_dir.mkdir(parents=True, exist_ok=True)
    if is_kraft(version):
        path = work_dir / "log4j2.properties"
        kind = (
            f"appender.out.type = File\nappender.out.fileName = {target}\n"
            if target
            else ("appender.out.type = Console\nappender.out.target = SYSTEM_ERR\n")
        )
        path.write_text(
            f"{kind}appender.out.name = out\nappender.out.layout.type = PatternLayout\n"
            "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
            f"rootLogger.level = {level}\nrootLogger.appenderRef.out.ref = out\n"
        )
        return [f"-Dlog4j2.configurationFile={path}"]
    path = work_dir / "log4j.properties"
    kind = (
        f"org.apache.log4j.FileAppender\nlog4j.appender.out.File={target}"
        if target
        else ("org.apache.log4j.ConsoleAppender\nlog4j.appender.out.Target=System.err")
    )
    path.write_text(
        f"log4j.rootLogger={level}, out\nlog4j.appender.out={kind}\n"
        "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
    )
    return [f"-Dlog4j.configuration=file:{path}"]


def java_command(
    version: str,
    main_class: str,
    args: Sequence[str],
    *,
    heap: str,
    logging: list[str],
    jvm_options: Sequence[str] | None = None,
) -> list[str]:
    """The JVM's argv: `heap` and the small test JVM's options, or `jvm_options` instead of both."""
    options = list(jvm_options) if jvm_options is not None else [heap, *_JVM_OPTIONS]
    return ["java", *options, *logging, "-cp", classpath(version), main_class, *args]


def run_tool(
    version: str,
    main_class: str,
    args: Sequence[str],
    *,
    input: str | None = None,
    timeout: float = 120.0,
    work_dir: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools by its main class (what bin/kafka-*.sh run), its logging
    at WARN on stderr, and return its exit status and output."""
    config_dir = work_dir or cache_root() / f"kafka-{version}" / "tools-config"
    logging = _logging_config(version, config_dir, "WARN", "")
    return subprocess.run(
        java_command(version, main_class, args, heap=TOOL_HEAP, logging=logging),
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class KafkaBroker(LoopbackProcess):
    """One Kafka broker JVM on `host:port`, with its config, data and output in `work_dir`.

    3.9 joins `zookeeper_connect`; 4.x is a combined broker and controller, formatted with
    `cluster_id` and voting in `quorum_voters` (itself alone when not given)."""

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        version: str = KRAFT_VERSION,
        *,
        broker_id: int = 1,
        port: int | None = None,
        host: str = "127.0.0.1",
        zookeeper_connect: str | None = None,
        controller_port: int | None = None,
        quorum_voters: str | None = None,
        cluster_id: str | None = None,
        expected_brokers: int = 1,
        overrides: Mapping[str, object] | None = None,
        jvm_options: Sequence[str] | None = None,
    ) -> None:
        if not is_kraft(version) and zookeeper_connect is None:
            raise ValueError(f"Kafka {version} runs in ZooKeeper mode here: give zookeeper_connect")
        self.work_dir = Path(work_dir)
        self.version = version
        self.broker_id = broker_id
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.zookeeper_connect = zookeeper_connect
        self.controller_port = controller_port or (free_port(host) if is_kraft(version) else 0)
        self.quorum_voters = quorum_voters or f"{broker_id}@{host}:{self.controller_port}"
        self.cluster_id = cluster_id or random_cluster_id()
        self.expected_brokers = expected_brokers
        self.overrides = dict(overrides or {})
        self.jvm_options = jvm_options
        self._proc = None

    @property
    def output_path(self) -> Path:
        return self.work_dir / "kafka.out"

    def settings(self) -> dict[str, object]:
        """server.properties: Kafka's defaults but for a small test broker on loopback."""
        common: dict[str, object] = {
            "log.dirs": self.work_dir / "data",
            "num.partitions": 1,
            "offsets.topic.replication.factor": min(self.expected_brokers, 3),
            "offsets.topic.num.partitions": 5,
            "transaction.state.log.replication.factor": min(self.expected_brokers, 3),
            "transaction.state.log.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "num.network.threads": 2,
            "num.io.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
            "log.flush.offset.checkpoint.interval.ms": 60000,
        }
        if is_kraft(self.version):
            common |= {
                "process.roles": "broker,controller",
                "node.id": self.broker_id,
                "controller.quorum.voters": self.quorum_voters,
                "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://{self.host}:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            }
        else:
            common |= {
                "broker.id": self.broker_id,
                "zookeeper.connect": self.zookeeper_connect,
                "listeners": f"PLAINTEXT://{self.bootstrap}",
                "zookeeper.session.timeout.ms": 18000,
            }
        return common | self.overrides

    def _write_config(self) -> Path:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        path = self.work_dir / "server.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in self.settings().items()))
        return path

    def _format(self, config: Path) -> None:
        """Format the log dir for KRaft (kafka-storage.sh format), once."""
        if (self.work_dir / "data" / "meta.properties").exists():
            return
        args = ["format", "-t", self.cluster_id, "-c", str(config)]
        done = run_tool(self.version, "kafka.tools.StorageTool", args, work_dir=self.work_dir / "tool")
        if done.returncode != 0:
            raise KafkaStartError(
                f"kafka-storage format failed ({done.returncode}): {done.stdout}{done.stderr}"
            )

    def prepare(self) -> Path:
        """Write the config (and format the storage, for 4.x, once); return the config's path."""
        reason = missing(self.version)
        if reason is not None:
            raise KafkaStartError(reason)
        config = self._write_config()
        if is_kraft(self.version):
            self._format(config)
        return config

    def spawn(self) -> None:
        """`prepare()`, then start the JVM; return at once."""
        config = self.prepare()
        logging = _logging_config(self.version, self.work_dir, "INFO", str(self.work_dir / "server.log"))
        argv = java_command(
            self.version,
            "kafka.Kafka",
            [str(config)],
            heap=KAFKA_HEAP,
            logging=logging,
            jvm_options=self.jvm_options,
        )
        with open(self.output_path, "ab") as out, stop_signals.held():
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, process_group=0
            )

    def start(self, timeout: float = 90.0) -> KafkaBroker:
        self.spawn()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Block until the listener accepts and Metadata lists `expected_brokers` brokers."""
        if self.wait_listening(timeout, lambda: self._brokers_seen() >= self.expected_brokers):
            return
        status = None if self._proc is None else self._proc.poll()
        self.kill()
        raise KafkaStartError(
            f"Kafka {self.version} broker {self.broker_id} on {self.bootstrap} not ready "
            f"(exit status {status}):\n{self.output_tail()}"
        )

    def _brokers_seen(self) -> int:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        try:
            return len(admin.list_topics(timeout=2).brokers)
        except Exception:  # KafkaException: not answering yet
            return 0

    def output_tail(self, lines: int = 40) -> str:
        texts = []
        for path in (self.output_path, self.work_dir / "server.log"):
            try:
                texts += path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                pass
        return "\n".join(texts)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a controlled shutdown), then SIGKILL when it does not exit in time."""
        self._signal_and_wait(signal.SIGTERM, timeout)

    def kill(self) -> None:
        self._signal_and_wait(signal.SIGKILL, 10.0)

    def terminate(self) -> None:
        """SIGTERM without waiting (`stop()` waits)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def _signal_and_wait(self, signum: int, timeout: float) -> None:
        process, self._proc = self._proc, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signum)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class KafkaCluster:
    """`size` Kafka brokers of one version on loopback: 3.9 on a chroot of its own under
    `zookeeper_connect`, 4.x as combined nodes that are all voters of one quorum."""

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        version: str = KRAFT_VERSION,
        size: int = 3,
        *,
        zookeeper_connect: str | None = None,
        host: str = "127.0.0.1",
        overrides: Mapping[str, object] | None = None,
        jvm_options: Sequence[str] | None = None,
    ) -> None:
        self.work_dir = Path(work_dir)
        self.version = version
        ids = range(1, size + 1)
        controller_ports = {node: free_port(host) for node in ids} if is_kraft(version) else {}
        voters = ",".join(f"{node}@{host}:{port}" for node, port in controller_ports.items())
        chroot = f"/kafka-{uuid.uuid4().hex[:12]}"
        cluster_id = random_cluster_id()
        self.brokers = [
            KafkaBroker(
                self.work_dir / f"broker-{node}",
                version,
                broker_id=node,
                host=host,
                zookeeper_connect=None if zookeeper_connect is None else zookeeper_connect + chroot,
                controller_port=controller_ports.get(node),
                quorum_voters=voters or None,
                cluster_id=cluster_id,
                expected_brokers=size,
                overrides=overrides,
                jvm_options=jvm_options,
            )
            for node in ids
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(broker.bootstrap for broker in self.brokers)

    def start(self, timeout: float = 120.0) -> KafkaCluster:
        """Start every broker at once (a KRaft quorum needs a majority to elect), then wait for each."""
        try:
            for broker in self.brokers:
                broker.spawn()
            for broker in self.brokers:
                broker.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to every broker at once (one by one, the last of a quorum would wait for the
        majority gone before it), then wait for each, SIGKILL after `timeout`."""
        for broker in self.brokers:
            broker.terminate()
        for broker in self.brokers:
            broker.stop(timeout)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
