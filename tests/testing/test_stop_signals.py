"""A stop signal whose handler raises (as `odradek cluster`'s does), sent while ZooKeeper's server is
being spawned: it is raised once the server is owned, which then stops on SIGTERM; and a local
cluster stopped before its ZooKeeper server started stops without naming that server."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from odradek.testing import zookeeper
from odradek.testing.cluster import LocalCluster
from odradek.testing.zookeeper import ZooKeeperServer, zookeeper_classpath
from tests.exit_report import exit_report


class Stop(Exception):
    pass


def raise_stop(signum: int, frame: object) -> None:
    raise Stop


@pytest.fixture(params=["alone", "beside another thread"])
def other_thread(request):
    """With another thread alive, which does not block the stop signals, the kernel gives it the stop."""
    if request.param == "alone":
        yield
        return
    done = threading.Event()
    thread = threading.Thread(target=done.wait)
    thread.start()
    yield
    done.set()
    thread.join()


@pytest.mark.skipif(zookeeper_classpath() is None, reason="no ZooKeeper server here")
def test_a_stop_during_the_spawn_is_raised_once_the_server_is_owned(tmp_path, monkeypatch, other_thread):
    spawn = subprocess.Popen

    def spawn_then_stop(*args, **kwargs):
        child = spawn(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)  # as while Popen waits for the child's exec
        time.sleep(0.1)  # time for another thread to take it; the main thread then checks for signals
        return child

    monkeypatch.setattr(zookeeper.subprocess, "Popen", spawn_then_stop)
    server = ZooKeeperServer(tmp_path / "zookeeper")
    previous = signal.signal(signal.SIGTERM, raise_stop)
    try:
        with pytest.raises(Stop):
            server.start()
    finally:
        signal.signal(signal.SIGTERM, previous)
        monkeypatch.undo()
        assert server.is_running()  # owned: without the hold, the raise came before Popen returned it
        process = server._process
        server.stop()
    # by SIGTERM (its default action this early, else the JVM's exit 143), not the SIGKILL fallback
    assert process is not None and process.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM), exit_report(
        None, server.output_path
    )


def test_a_cluster_stopped_before_its_zookeeper_started_stops_quietly(tmp_path):
    cluster = LocalCluster(tmp_path, 1)
    cluster.zookeeper = ZooKeeperServer(tmp_path / "zookeeper")  # made, its start interrupted
    said: list[str] = []
    assert cluster.stop(announce=said.append) == {}
    assert said == []
