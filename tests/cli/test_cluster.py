"""`odradek cluster` as a process: usage errors, a three-broker cluster that Kafka clients use through
the bootstrap servers it prints, a SIGTERM that leaves no process behind, and a restart on the same
data dir that finds the topics and records again; a Ctrl-C that says what it waits for and does not
retry the last broker's controlled shutdown, a second Ctrl-C that kills the brokers at once, a kill -9
that takes every process it started with it, and a second run on a data dir in use that is refused."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli import cluster as cluster_command
from odradek.cli.main import build_parser, command_modules
from odradek.testing.broker import BrokerProcess, free_port
from odradek.testing.cluster import eventually
from tests.exit_report import exit_report

BROKERS = 3
UP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 120.0
CLIENT_TIMEOUT_S = 30.0


def cluster_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "odradek", "cluster", *args]


def test_cluster_is_a_registered_command():
    assert "cluster" in [m.COMMAND for m in command_modules()]
    args = build_parser().parse_args(["cluster", "--override", "num.partitions=3"])
    assert (args.brokers, args.base_port, args.data_dir) == (3, 9092, Path("odradek-cluster"))
    assert args.override == [("num.partitions", "3")]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--brokers", "0"], "--brokers"),
        (["--base-port", "70000"], "--base-port"),
        (["--base-port", "65535", "--brokers", "2"], "65535"),
        (["--override", "num.partitions"], "KEY=VALUE"),
        (["--override", "listeners=PLAINTEXT://127.0.0.1:1"], "listeners"),
        (["--override", "num.partitions=lots"], "num.partitions"),
    ],
)
def test_usage_errors_exit_2_in_one_line(tmp_path, args, named):
    result = subprocess.run(
        cluster_argv("--data-dir", str(tmp_path), *args), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, exit_report(result)
    assert named in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert not list(tmp_path.iterdir())  # nothing started


def test_without_zookeeper_says_how_to_install_it(tmp_path):
    env = {**os.environ, "ODRADEK_ZOOKEEPER_CLASSPATH": str(tmp_path / "no-zookeeper.jar")}
    result = subprocess.run(
        cluster_argv("--data-dir", str(tmp_path / "data")),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2, exit_report(result)
    (line,) = result.stderr.splitlines()
    assert "apt-get install zookeeper" in line


class StartedAsAStopCameDuringAFork:
    """The cluster as `_run_until_stopped` starts it, given a SIGTERM whose handler's raise is dropped
    during the start, as Python drops it when the signal lands in a fork's clean-up callbacks."""

    broker_count, data_dir, bootstrap, connect = BROKERS, Path("unused"), "b:9092", "z:2181"

    def start(self, timeout: float) -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, before kill returns
        except cluster_command._Stop:
            pass  # dropped, as in the fork's callback

    def wait_for_controller(self, timeout: float) -> int:
        return 1


@pytest.mark.timeout(30)  # without the fix, the command waits in signal.pause() for a second signal
def test_a_stop_signal_whose_raise_was_dropped_still_stops_the_command(monkeypatch, capsys):
    monkeypatch.setattr(cluster_command, "_STOP_SEEN", [False])
    previous = signal.signal(signal.SIGTERM, cluster_command._raise_stop)
    try:
        assert cluster_command._run_until_stopped(StartedAsAStopCameDuringAFork()) == 0  # type: ignore[arg-type]
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert "bootstrap.servers" not in capsys.readouterr().out  # stopped before announcing itself


def test_a_broker_that_did_not_exit_0_is_named_with_its_status_and_last_line(tmp_path):
    broker = BrokerProcess(tmp_path / "broker-1", broker_id=1, overrides={"num.partitions": "lots"})
    broker.output_path.write_text("a line of the run before\n")
    broker.spawn()
    assert broker.wait(30) == 2, broker.output_tail()
    said = cluster_command._failure(broker, 2)
    where = f"(its output: {broker.output_path})"
    assert said.startswith(f"broker 1 exited with 2 {where}; its last line: odradek:"), said
    assert "num.partitions" in said
    assert cluster_command._failure(broker, -signal.SIGTERM).startswith("broker 1 was killed by SIGTERM")


# ---------------------------------------------------------------------------------------------
# a running cluster


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def children(pid: int) -> set[int]:
    """The live processes whose parent is `pid` (from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[1] == str(pid) and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "(gone)"


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


class ClusterCommand:
    """One `odradek cluster` process, its stdout and stderr in files, and the processes it started."""

    def __init__(self, data_dir: Path, base_port: int, output_dir: Path, overrides: tuple[str, ...]) -> None:
        self.data_dir = data_dir
        self.stdout_path = output_dir / "cluster.stdout"
        self.stderr_path = output_dir / "cluster.stderr"
        argv = cluster_argv(
            "--brokers", str(BROKERS), "--data-dir", str(data_dir), "--base-port", str(base_port)
        )
        for override in overrides:
            argv += ["--override", override]
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        self.started: set[int] = set()

    def announced(self) -> dict[str, str]:
        """The `key=value` lines printed so far."""
        lines = self.stdout_path.read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def wait_until_up(self) -> dict[str, str]:
        def up() -> dict[str, str] | None:
            if self.process.poll() is not None:
                raise AssertionError(f"exited with {self.process.returncode}\n{self.report()}")
            found = self.announced()
            return found if "controller" in found else None

        found = eventually(up, UP_TIMEOUT_S, "the cluster announced")
        self.started = children(self.process.pid)
        return found

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(STOP_TIMEOUT_S)

    def said(self) -> list[str]:
        return self.stderr_path.read_text().splitlines()

    def report(self) -> str:
        """For an assertion's message: the command's stderr and each broker output's last lines."""
        outputs = [*sorted(self.data_dir.glob("broker-*.out")), self.data_dir / "zookeeper" / "zookeeper.out"]
        started = {pid: command_line(pid) for pid in sorted(self.started | children(self.process.pid))}
        return f"started: {started}\n{exit_report(self.stderr_path.read_text(), *outputs)}"

    def clean_up(self) -> None:
        """Whatever happened: the command and every process it started are gone."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pid in self.started | children(self.process.pid):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def run_cluster(tmp_path: Path) -> Iterator[Callable[..., ClusterCommand]]:
    commands: list[ClusterCommand] = []

    def run(data_dir: Path, base_port: int, *overrides: str) -> ClusterCommand:
        output_dir = tmp_path / f"run-{len(commands)}"
        output_dir.mkdir()
        commands.append(ClusterCommand(data_dir, base_port, output_dir, overrides))
        return commands[-1]

    try:
        yield run
    finally:
        for command in commands:
            command.clean_up()


def produce(bootstrap: str, topic: str, value: bytes, acks: str = "all") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks})
    delivered: list[object] = []
    producer.produce(topic, value, on_delivery=lambda error, message: delivered.append(error))
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    assert delivered == [None]


def consume_first(bootstrap: str, topic: str) -> bytes | None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:

        def first() -> bytes | None:
            message = consumer.poll(0.5)
            return None if message is None or message.error() else message.value()

        return eventually(first, CLIENT_TIMEOUT_S, f"a record of {topic}", interval_s=0)
    finally:
        consumer.close()


def connected_admin(bootstrap: str) -> AdminClient:
    """An AdminClient that has described the cluster: one whose first request was CreateTopics, right
    after the cluster came up, was seen looking up the controller until the request timed out."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.describe_cluster(request_timeout=CLIENT_TIMEOUT_S).result(CLIENT_TIMEOUT_S)
    return admin


def create_topic(admin: AdminClient, topic: str, replication_factor: int) -> None:
    (created,) = admin.create_topics([NewTopic(topic, 1, replication_factor)]).values()
    created.result(CLIENT_TIMEOUT_S)


@pytest.mark.slow
def test_cluster_serves_clients_stops_cleanly_and_comes_back(tmp_path, run_cluster):
    base_port = free_port(count=BROKERS)
    cluster = run_cluster(tmp_path / "data", base_port)
    announced = cluster.wait_until_up()
    bootstrap = announced["bootstrap.servers"]
    assert bootstrap == ",".join(f"127.0.0.1:{base_port + i}" for i in range(BROKERS))
    assert len(cluster.started) == BROKERS + 1, cluster.report()  # the brokers and ZooKeeper

    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_cluster(request_timeout=CLIENT_TIMEOUT_S).result(CLIENT_TIMEOUT_S)
    assert sorted(node.id for node in described.nodes) == [1, 2, 3]
    assert str(described.controller.id) == announced["controller"]
    create_topic(admin, "replicated", BROKERS)
    (topic,) = admin.describe_topics(TopicCollection(["replicated"])).values()
    assert len(topic.result(CLIENT_TIMEOUT_S).partitions[0].replicas) == BROKERS
    create_topic(admin, "single", 1)
    produce(bootstrap, "single", b"kept")
    assert consume_first(bootstrap, "single") == b"kept"

    assert cluster.stop() == 0, cluster.report()
    zookeeper_port = int(announced["zookeeper.connect"].rpartition(":")[2])
    assert not [pid for pid in cluster.started if alive(pid)]
    assert not [port for port in [*range(base_port, base_port + BROKERS), zookeeper_port] if listening(port)]

    again = run_cluster(tmp_path / "data", base_port)
    again.wait_until_up()
    assert {"replicated", "single"} <= set(admin.list_topics(timeout=CLIENT_TIMEOUT_S).topics)
    assert consume_first(bootstrap, "single") == b"kept"
    assert again.stop() == 0, again.report()


@pytest.mark.slow
def test_replicated_topic_round_trip(tmp_path, run_cluster):
    cluster = run_cluster(tmp_path / "data", free_port(count=BROKERS))
    bootstrap = cluster.wait_until_up()["bootstrap.servers"]
    create_topic(connected_admin(bootstrap), "replicated", BROKERS)
    produce(bootstrap, "replicated", b"copied", acks="1")
    assert consume_first(bootstrap, "replicated") == b"copied"
    assert cluster.stop() == 0, cluster.report()


# ---------------------------------------------------------------------------------------------
# stopping, killing, and a data dir in use


def brokers_of(cluster: ClusterCommand) -> dict[int, int]:
    """broker id -> pid of the brokers the command started (their command lines name the id)."""
    found = {}
    for pid in cluster.started:
        for arg in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
            if arg.startswith(b"broker.id="):
                found[int(arg.partition(b"=")[2])] = pid
    return found


@pytest.mark.slow
def test_ctrl_c_says_what_it_waits_for_and_the_last_broker_does_not_retry(tmp_path, run_cluster):
    backoff = "controlled.shutdown.retry.backoff.ms=60000"  # a retry would outlast the wait below
    cluster = run_cluster(tmp_path / "data", free_port(count=BROKERS), backoff)
    bootstrap = cluster.wait_until_up()["bootstrap.servers"]
    create_topic(connected_admin(bootstrap), "replicated", BROKERS)
    cluster.process.send_signal(signal.SIGINT)
    assert cluster.process.wait(30) == 0, cluster.report()
    said = cluster.said()
    for broker_id in range(1, BROKERS + 1):
        assert any(line.startswith(f"odradek cluster: stopping broker {broker_id} (pid") for line in said), (
            said
        )
    assert any(line.startswith("odradek cluster: stopping ZooKeeper") for line in said), said
    last = (tmp_path / "data" / f"broker-{BROKERS}.out").read_text()
    assert f"Controlled shutdown of broker {BROKERS}: no other live broker, no retry" in last
    assert not [pid for pid in cluster.started if alive(pid)]


@pytest.mark.slow
def test_a_second_ctrl_c_kills_the_brokers_at_once(tmp_path, run_cluster):
    cluster = run_cluster(tmp_path / "data", free_port(count=BROKERS))
    cluster.wait_until_up()
    stuck = brokers_of(cluster)[1]
    os.kill(stuck, signal.SIGSTOP)  # its graceful stop would wait for the command's stop timeout
    cluster.process.send_signal(signal.SIGINT)
    eventually(lambda: any("stopping broker 1" in line for line in cluster.said()), 30, "broker 1's stop")
    cluster.process.send_signal(signal.SIGINT)
    assert cluster.process.wait(15) == 1, cluster.report()
    assert any("stopping at once" in line for line in cluster.said()), cluster.said()
    assert not [pid for pid in cluster.started if alive(pid)]


def spawned_broker(cluster: ClusterCommand, broker_id: int) -> int | None:
    """The pid of the command's broker `broker_id` once it is spawned (its command line names it)."""
    for pid in children(cluster.process.pid):
        try:
            if f"broker.id={broker_id}".encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return pid
        except OSError:
            continue
    return None


@pytest.mark.slow
def test_a_stop_as_the_first_broker_is_spawned_is_a_clean_stop(tmp_path, run_cluster):
    """The stop reaches broker 1 while its interpreter starts, before `odradek serve` handles signals:
    it is held back until it does, and the broker exits 0 (it once died of SIGTERM's default action,
    exit status -15, and the command exited 1)."""
    cluster = run_cluster(tmp_path / "data", free_port(count=BROKERS))
    eventually(lambda: spawned_broker(cluster, 1), 60, "broker 1 spawned", interval_s=0.005)
    assert cluster.stop() == 0, cluster.report()
    assert any(line.startswith("odradek cluster: stopping broker 1 (pid") for line in cluster.said())
    last = (tmp_path / "data" / "broker-1.out").read_text().splitlines()[-1]
    assert "stopped by SIGTERM before it started" in last or "shut down" in last, cluster.report()


@pytest.mark.slow
def test_kill_9_takes_every_process_with_it_and_a_directory_in_use_is_refused(tmp_path, run_cluster):
    base_port = free_port(count=BROKERS)
    first = run_cluster(tmp_path / "data", base_port)
    first.wait_until_up()
    assert len(first.started) == BROKERS + 1, first.report()

    second = run_cluster(tmp_path / "data", base_port)
    assert second.process.wait(60) == 1, second.report()
    (line,) = second.said()
    assert "in use" in line and f"pid {first.process.pid}" in line
    assert all(alive(pid) for pid in first.started)

    first.process.kill()
    first.process.wait()
    eventually(lambda: not [pid for pid in first.started if alive(pid)], 10, "no process of the killed run")

    third = run_cluster(tmp_path / "data", base_port)  # the directory is free again
    eventually(lambda: any("did not stop gracefully" in line for line in third.said()), 30, "the warning")
    assert third.stop() == 0, third.report()
