"""`odradek serve` as a process: configuration errors, graceful shutdown, restart with state."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.cli.main import build_parser, command_modules
from odradek.controller.local import METADATA_FILE
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.create_topics import CreateTopicsRequest
from odradek.protocol.messages.metadata import MetadataRequest
from odradek.testing.broker import BrokerProcess, BrokerStartError, free_port
from tests.exit_report import exit_report
from tests.server.raw_client import RawClient


def serve(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "odradek", "serve", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def test_serve_is_a_registered_command():
    assert "serve" in [m.COMMAND for m in command_modules()]
    args = build_parser().parse_args(["serve", "--override", "a=b", "--override", "c=d"])
    assert args.override == ["a=b", "c=d"]


@pytest.mark.parametrize(
    ("override", "key"),
    [("num.partitions=lots", "num.partitions"), ("listeners=PLAINTEXT:/nohost", "listeners")],
)
def test_bad_config_exits_2_naming_the_key(tmp_path, override, key):
    result = serve("--override", f"log.dirs={tmp_path}", "--override", override)
    assert result.returncode == 2, exit_report(result)
    assert key in result.stderr


def test_missing_config_file_exits_2(tmp_path):
    result = serve("--config", str(tmp_path / "absent.properties"))
    assert result.returncode == 2, exit_report(result)
    assert "absent.properties" in result.stderr


def test_config_file_is_read(tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text("# from a file\nnum.partitions = 3\n")
    broker = BrokerProcess(tmp_path / "data", config_file=properties)
    with broker:
        with RawClient(broker.bootstrap) as client:
            request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic("t", -1, -1)])
            (result,) = client.call(ApiKey.CREATE_TOPICS, 7, request).topics
    assert (result.error_code, result.num_partitions) == (0, 3)


def test_second_broker_on_the_same_log_dir_fails_to_start(tmp_path):
    with BrokerProcess(tmp_path / "data"):
        second = BrokerProcess(tmp_path / "data", output_path=tmp_path / "second.out")
        with pytest.raises(BrokerStartError, match="in use"):
            second.start()
        assert second.returncode == 1, second.output_tail()


def test_broker_id_mismatch_with_meta_properties_fails(tmp_path):
    with BrokerProcess(tmp_path / "data"):
        pass
    other = BrokerProcess(tmp_path / "data", broker_id=5)
    with pytest.raises(BrokerStartError, match="broker.id"):
        other.start()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_shuts_down_cleanly(tmp_path, signum):
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    broker.send_signal(signum)
    assert broker.wait(30) == 0, broker.output_tail()
    assert (Path(tmp_path / "data") / ".kafka_cleanshutdown").exists()
    assert "shut down" in broker.output_tail()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_sent_as_the_broker_is_spawned_is_a_clean_stop(tmp_path, signum):
    """Sent before the interpreter started, held back by the owner's signal mask until serve handles
    it: not a death by the signal's default action (exit status -15 or -2)."""
    broker = BrokerProcess(tmp_path / "data")
    broker.spawn()
    broker.send_signal(signum)
    assert broker.wait(30) == 0, broker.output_tail()
    assert f"stopped by {signal.Signals(signum).name} before it started" in broker.last_output_line()


def test_topics_survive_restart_and_leader_epochs_move_on(tmp_path):
    broker = BrokerProcess(tmp_path / "data", port=free_port())

    def describe():
        with RawClient(broker.bootstrap) as client:
            request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="kept")])
            return client.call(ApiKey.METADATA, 12, request).topics[0]

    broker.start()
    try:
        with RawClient(broker.bootstrap) as client:
            topic = CreateTopicsRequest.CreatableTopic(name="kept", num_partitions=2, replication_factor=1)
            client.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics=[topic]))
        before = describe()
        broker.restart(hard=True)
        after = describe()
    finally:
        broker.stop()
    assert (tmp_path / "data" / METADATA_FILE).exists()
    assert after.topic_id == before.topic_id
    assert [p.partition_index for p in after.partitions] == [0, 1]
    assert after.partitions[0].leader_epoch == before.partitions[0].leader_epoch + 1


def test_an_address_in_use_names_the_listener_and_the_address(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = serve(
            "--override", f"log.dirs={tmp_path}", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"
        )
    assert result.returncode == 1, exit_report(result)
    assert (
        f"Socket server failed to bind to 127.0.0.1:{port} (listener PLAINTEXT): Address already in use."
        in result.stderr
    )
