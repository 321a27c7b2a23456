"""The console's broker pages in a real headless Chromium against a writable single broker: the
brokers with the controller, the log dir's size against the partitions' segment files on disk, no
under-replicated or offline partitions; a broker's configs with their sources; a dynamic config set
for the broker and as the cluster-wide default, then removed, each checked with confluent_kafka's
AdminClient; a static config refused. And, without a broker, that no form is drawn read-only."""

from __future__ import annotations

import jinja2
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
from markupsafe import Markup

from odradek.console import broker_pages
from odradek.console.filters import FILTERS
from odradek.console.reader import Broker, Partition, Topic
from odradek.testing.cluster import eventually
from tests.console.browsing import snapshot, submit, visit

TOPIC = "ledger"
DYNAMIC, DYNAMIC_DEFAULT = "log.cleaner.threads", "log.cleaner.backoff.ms"


@pytest.fixture(scope="module")
def writable(console_broker_at):
    process, base = console_broker_at(**{"console.read.only": "false"})
    producer = Producer({"bootstrap.servers": process.bootstrap})
    for i in range(5):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"entry %d" % i, partition=0)
    assert producer.flush(30) == 0
    return process, base


def _broker_config(bootstrap: str, name: str, broker: str = "0") -> tuple[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource("broker", broker)]).values()
    entry = future.result(timeout=30)[name]
    return entry.value, ConfigSource(entry.source).name


def test_the_brokers_page_shows_the_controller_log_dir_and_no_partition_trouble(
    writable, browser, screenshots
):
    process, base = writable
    data_dir = process.data_dir.resolve()

    def on_disk() -> int:
        return sum(f.stat().st_size for f in data_dir.glob("*-*/*.log"))

    def page_matches() -> str | None:
        text = visit(browser, screenshots, base + "/brokers", "brokers-list")
        size = on_disk()
        return text if size > 0 and f"0 {data_dir} {size} " in text else None

    text = eventually(page_matches, 15, "the log dir's size equal to its segment files")
    assert f"0 127.0.0.1:{process.port} - controller configs" in text
    partitions = len(list(data_dir.glob("*-*/")))
    assert f"0 {data_dir} {on_disk()} {partitions} 0 " in text
    assert "Under-replicated partitions\nnone\nOffline partitions\nnone" in text
    assert "There is no broker 7 in the cluster." in visit(
        browser, screenshots, base + "/broker?id=7", "brokers-unknown"
    )


def test_a_broker_page_shows_sources_and_edits_dynamic_configs(writable, browser, screenshots):
    process, base = writable
    url = base + "/broker?id=0"
    text = visit(browser, screenshots, url, "brokers-configs")
    assert f"http.listeners {base} STATIC_BROKER_CONFIG read-only" in text
    assert f"{DYNAMIC} 1 DEFAULT_CONFIG dynamic DEFAULT_CONFIG: {DYNAMIC}=1" in text
    assert _broker_config(process.bootstrap, DYNAMIC) == ("1", "DEFAULT_CONFIG")

    dynamic = visit(browser, screenshots, url + "&dynamic=1", "brokers-configs-dynamic")
    assert f"{DYNAMIC} 1 DEFAULT_CONFIG dynamic" in dynamic and "http.listeners" not in dynamic

    # set for this broker, from the config's edit link (which fills in its name and value)
    browser.get(url + f"&edit={DYNAMIC}")
    text = submit(browser, "#set-config", value="2")
    assert f"Set {DYNAMIC}=2 for broker 0." in text
    assert f"{DYNAMIC} 2 DYNAMIC_BROKER_CONFIG dynamic" in text
    assert _broker_config(process.bootstrap, DYNAMIC) == ("2", "DYNAMIC_BROKER_CONFIG")

    # set as the cluster-wide default
    text = submit(browser, "#set-config", name=DYNAMIC_DEFAULT, value="20000", scope="default")
    assert f"Set {DYNAMIC_DEFAULT}=20000 for the cluster-wide default." in text
    assert f"Cluster-wide dynamic defaults\nName Value\n{DYNAMIC_DEFAULT} 20000" in text
    assert _broker_config(process.bootstrap, DYNAMIC_DEFAULT) == ("20000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    visit(browser, screenshots, url, "brokers-configs-set")

    # remove both overrides
    text = submit(browser, f"form.remove[data-name='{DYNAMIC}']")
    assert f"Removed {DYNAMIC} from broker 0." in text
    assert f"{DYNAMIC} 1 DEFAULT_CONFIG dynamic" in text
    assert _broker_config(process.bootstrap, DYNAMIC) == ("1", "DEFAULT_CONFIG")
    text = submit(browser, f"form.remove-default[data-name='{DYNAMIC_DEFAULT}']")
    assert f"Removed {DYNAMIC_DEFAULT} from the cluster-wide default." in text
    assert "Cluster-wide dynamic defaults\nnone" in text
    assert _broker_config(process.bootstrap, DYNAMIC_DEFAULT)[1] == "DEFAULT_CONFIG"

    # a static config cannot be set dynamically
    text = submit(browser, "#set-config", name="num.io.threads", value="3", scope="broker")
    assert "Refused: " in text and "num.io.threads" in text
    snapshot(browser, screenshots, "brokers-configs-refused")
    assert _broker_config(process.bootstrap, "num.io.threads")[0] != "3"


def _render(template: str, **context: object) -> str:
    templates = jinja2.Environment(
        loader=jinja2.PackageLoader("odradek.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    templates.filters.update(FILTERS)
    templates.globals["static"] = lambda name: "/static/" + name
    base = {
        "nav": (),
        "path": "/",
        "session": None,
        "csrf_token": "",
        "csrf_field": "csrf_token",
        "csrf_input": Markup(""),
        "flashes": [],
        "login": False,
        "title": "t",
    }
    return templates.get_template(template).render(**base, **context)


def test_no_form_is_drawn_read_only():
    row = broker_pages.ConfigRow(DYNAMIC, "2", "DYNAMIC_BROKER_CONFIG", True, False, ())
    html = _render(
        "brokers/broker.html",
        read_only=True,
        broker=Broker(0, "127.0.0.1", 9092, None),
        configs=[row],
        dynamic_only=False,
        defaults=[row],
        dynamic_names=[DYNAMIC],
        scopes=broker_pages.SCOPES,
        edit_name="",
        edit_value="",
        edit_scope="broker",
    )
    assert DYNAMIC in html and "<form" not in html


def test_partitions_without_a_full_isr_or_a_leader_are_listed():
    topics = [
        Topic("b", False, (Partition(0, 1, (1, 2, 3), (1, 2, 3)), Partition(1, -1, (2, 3), (3,)))),
        Topic("a", False, (Partition(0, 2, (1, 2), (2,)),)),
    ]
    under_replicated, offline = broker_pages.partition_issues(topics)
    assert [(i.topic, i.partition, i.missing) for i in under_replicated] == [("a", 0, (1,)), ("b", 1, (2,))]
    assert [(i.topic, i.partition) for i in offline] == [("b", 1)]
    assert broker_pages.partition_issues([Topic("c", False, (Partition(0, 1, (1,), (1,)),))]) == ([], [])
    under_replicated, offline = broker_pages.partition_issues(topics)
    html = _render(
        "brokers/list.html",
        read_only=False,
        rows=[],
        controller_id=-1,
        under_replicated=under_replicated,
        offline=offline,
    )
    assert "No controller is known." in html
    assert html.count('href="/topic?name=b"') == 2 and html.count('href="/topic?name=a"') == 1
    assert '<td class="num">none</td>' in html and "none</p>" not in html
