"""Suite-wide fixtures and markers.

Owns: the order of the tests (the files with slow or Spark tests first, see `_long_files_first`);
a line for each failure as it happens, and for each test slower than SLOW_TEST_REPORT_S, so a run
stopped before its summary (CI's time limit) still says what failed and what took its time;
the `compat` marker (applied to every test under tests/compat, which runs real Kafka clients
against real broker processes); `unique_topic`, a topic name no other test uses, so tests sharing
one broker never see each other's data (Kafka's legal characters [a-zA-Z0-9._-], at most 249, and
no '.', so names never collide with '_' in metric names); and `zookeeper`, one real ZooKeeper
server per test module that asks for it (cluster and ZooKeeper tests take a chroot each on it); and
`start_cluster(**overrides)`, which starts a `LocalCluster` of three brokers on that server (a chroot
of its own, zookeeper.session.timeout.ms CLUSTER_SESSION_TIMEOUT_MS so a killed broker's session
expires in seconds), hands it over once every broker's metadata names the controller and every
broker, and kills whatever it started when the test ends, pass or fail.
"""

from __future__ import annotations

import gc
import re
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.testing.cluster import LocalCluster
from odradek.testing.zookeeper import ZooKeeperServer

# kafka-python 3.x loads its schemas with importlib.resources.{read,open}_text, deprecated in 3.11;
# the suite turns warnings into errors, so import it once here with only that warning silenced.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="(read|open)_text is deprecated", category=DeprecationWarning)
    import kafka  # noqa: F401

_COMPAT_DIR = Path(__file__).parent / "compat"
_ILLEGAL_TOPIC_CHARS = re.compile(r"[^a-zA-Z0-9_-]+")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _COMPAT_DIR in Path(item.fspath).parents:
            item.add_marker(pytest.mark.compat)
    _long_files_first(items)


def _long_files_first(items: list[pytest.Item]) -> None:
    """The files holding a slow or Spark test run first, each file's tests still together and in
    order: `make test` hands whole files to two workers (pytest-xdist, --dist loadfile, in this order
    with --no-loadscope-reorder), and a long file started last would leave one worker running it
    alone."""
    long_files = {item.path for item in items if item.get_closest_marker("slow") or "spark" in item.keywords}
    items.sort(key=lambda item: item.path not in long_files)


SLOW_TEST_REPORT_S = 60.0
_SUITE_STARTED = time.monotonic()
_PRINTS = [True]


def pytest_configure(config: pytest.Config) -> None:
    _PRINTS[0] = not hasattr(config, "workerinput")  # an xdist worker's reports reach its controller


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """In the process that prints (xdist's controller, or the only one): a failure or a slow phase
    at once, with the time since the suite started."""
    if not _PRINTS[0]:
        return
    if report.failed or report.duration >= SLOW_TEST_REPORT_S:
        _print_now(f"{report.outcome.upper()} ({report.when}, {report.duration:.0f} s) {report.nodeid}")
        if report.failed:
            _print_now(f"    {_why(report)}")


def _print_now(line: str) -> None:
    elapsed = time.monotonic() - _SUITE_STARTED
    print(f"\n[{elapsed:6.0f} s] {line}", flush=True)


def _why(report: pytest.TestReport) -> str:
    """The failure's message (pytest's crash line), else the last line of its report (a crashed
    xdist worker's report is text only)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return f"{crash.path}:{crash.lineno}: {crash.message}"[:600]
    lines = [line for line in report.longreprtext.splitlines() if line.strip()]
    return lines[-1][:600] if lines else ""


def topic_name(hint: str) -> str:
    """A fresh topic name that starts with a readable `hint`."""
    stem = _ILLEGAL_TOPIC_CHARS.sub("-", hint).strip("-")[:60] or "topic"
    return f"{stem}-{uuid.uuid4().hex[:10]}"


FULL_COLLECTION_EVERY = 200
_TESTS_RUN = [0]


@pytest.fixture(autouse=True, scope="session")
def _garbage_collected_on_the_main_thread() -> Iterator[None]:
    """librdkafka clients (confluent-kafka) end up in reference cycles; when the cyclic collector
    happens to run on one of librdkafka's own threads (a delivery or admin callback allocating), it
    destroys a client from inside librdkafka, which aborts or crashes the whole test process
    (confluent-kafka-python's own tests disable the collector for this). The suite runs with the
    collector off and collects between tests, on the main thread (a full collection every
    FULL_COLLECTION_EVERY tests, for cycles that outlived the test that made them)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture(autouse=True)
def _collect_after_each_test() -> Iterator[None]:
    """The cycles a test made are young: collecting the two young generations is enough, and costs
    little (a full collection per test would triple the suite's time)."""
    yield
    _TESTS_RUN[0] += 1
    gc.collect(2 if _TESTS_RUN[0] % FULL_COLLECTION_EVERY == 0 else 1)


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    return topic_name(request.node.name)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zk")) as server:
        yield server


CLUSTER_SESSION_TIMEOUT_MS = 4000


@pytest.fixture
def start_cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    started: list[LocalCluster] = []

    def start(**overrides: object) -> LocalCluster:
        made = LocalCluster(
            tmp_path / f"cluster-{len(started)}",
            3,
            zookeeper_connect=zookeeper.connect_string,
            session_timeout_ms=CLUSTER_SESSION_TIMEOUT_MS,
            overrides=overrides,
        )
        started.append(made)
        made.start()
        made.wait_for_controller()
        return made

    try:
        yield start
    finally:
        for made in started:
            made.close()
