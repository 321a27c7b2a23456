"""The source and sink on a real Spark standalone cluster: a master and two workers started from the
installed PySpark's `spark-class` on 127.0.0.1 (1 core, 512 MB each), and a driver that connects to
them through spark:// (tests/spark/cluster_job.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing.broker import free_port
from tests.spark.helpers import consume_all, produce, wait_until

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_JOB = Path(__file__).with_name("cluster_job.py")


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _daemon(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(_spark_class()), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _alive_workers(webui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as response:
            return int(json.load(response).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture
def standalone_master(tmp_path: Path) -> Iterator[str]:
    port, webui = free_port(), free_port()
    master_args = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
    daemons = [
        _daemon([*master_args, "--port", str(port), "--webui-port", str(webui)], tmp_path / "master.log")
    ]
    url = f"spark://127.0.0.1:{port}"
    try:
        for n in (1, 2):
            worker_args = ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1"]
            worker_args += ["--memory", "512m", "--webui-port", str(free_port()), "--work-dir"]
            worker_args += [str(tmp_path / f"worker-{n}"), url]
            daemons.append(_daemon(worker_args, tmp_path / f"worker-{n}.log"))
        wait_until(lambda: _alive_workers(webui) == 2, 120, "two workers registered with the master", 0.5)
        yield url
    finally:
        for daemon in daemons:
            os.killpg(daemon.pid, signal.SIGTERM)
        for daemon in daemons:
            daemon.wait(30)


@pytest.mark.slow
def test_batch_stream_and_write_on_a_standalone_cluster(
    standalone_master, bootstrap, make_topic, tmp_path
) -> None:
    topic, out_topic = make_topic(2, hint="cluster-in"), make_topic(2, hint="cluster-out")
    produced = produce(bootstrap, topic, [(i % 2, b"k%d" % i, b"v%d" % i) for i in range(200)])
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "SPARK_LOCAL_IP": "127.0.0.1"}
    args = [
        standalone_master,
        bootstrap,
        topic,
        out_topic,
        str(tmp_path),
        str(free_port()),
        str(ROOT / "src"),
    ]
    job = subprocess.run(
        [sys.executable, str(CLUSTER_JOB), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert job.returncode == 0, job.stderr[-4000:]
    result = json.loads(job.stdout.strip().splitlines()[-1])

    assert sorted(map(tuple, result["batch"])) == [(r.partition, r.offset) for r in produced]
    placed = result["executors_by_partition"]
    assert sorted(placed) == ["0", "1"], placed
    assert placed["0"] != placed["1"], f"both partitions' tasks ran on executor {placed['0']}"
    assert result["stream_runs"] == [200, 210]
    everything = sorted((r.partition, r.offset) for r in consume_all(bootstrap, topic, 2))
    assert [tuple(row) for row in result["stream_rows"]] == everything
    written = consume_all(bootstrap, out_topic, 2)
    assert sorted(r.value for r in written) == sorted(r.value for r in produced)
