"""The console's charts: a broker sampling its own metrics every 200 ms, confluent-kafka traffic, then
`/charts/data` checked against the broker's `/metrics` (the rates, summed over their intervals, come
back to the counters), the page drawn by uPlot in a headless Chromium, and `odradek console` (no broker
registry) answering the page with its explanation. Also the history's bound and rates on a registry of
the test's own."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from odradek.console.metrics_history import MetricsHistory
from odradek.testing.cluster import eventually
from tests.console.browsing import snapshot, standalone_console, visit

TOPIC, RECORDS, VALUE = "clicks", 200, b"x" * 1000
SAMPLE_MS = 200
CHARTS = 6  # bytes, requests, latency p50 and p99, under-replicated, throttle


@pytest.fixture(scope="module")
def charted(console_broker_at):
    process, base = console_broker_at(**{"console.metrics.sample.ms": str(SAMPLE_MS)})
    producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=b"%d" % i, value=VALUE)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": process.bootstrap, "group.id": "charts", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([TOPIC])
    try:
        consumed = 0

        def all_consumed() -> bool:
            nonlocal consumed
            consumed += len([m for m in consumer.consume(RECORDS, 0.5) if m.error() is None])
            return consumed >= RECORDS

        eventually(all_consumed, 30, "the records consumed")
    finally:
        consumer.close()
    return process, base


def _json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.load(answer)


def _series(data: dict, chart: str) -> dict[str, list]:
    found = next(c for c in data["charts"] if c["id"] == chart)
    return {s["label"]: s["values"] for s in found["series"]}


def _integral(data: dict, values: list) -> float:
    """A rate series summed over its intervals (the first from `start`)."""
    times = [data["start"], *data["time"]]
    steps = [b - a for a, b in zip(times, times[1:], strict=False)]
    return sum((v or 0) * dt for v, dt in zip(values, steps, strict=True))


def _counter(base: str, name: str, **labels: str) -> float:
    with urllib.request.urlopen(base + "/metrics", timeout=30) as answer:
        text = answer.read().decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
        and all(s.labels.get(k) == v for k, v in labels.items())
        and (labels or "topic" not in s.labels)
    )


def test_the_history_shows_the_traffic_as_the_broker_counted_it(charted):
    _, base = charted
    produced = _counter(base, "kafka_server_brokertopicmetrics_bytesin_total")
    assert produced > RECORDS * len(VALUE)

    def caught_up() -> dict | None:
        data = _json(base + "/charts/data")
        bytes_in = _series(data, "bytes")["in"]
        return data if len(data["time"]) >= 3 and _integral(data, bytes_in) >= produced * 0.9 else None

    data = eventually(caught_up, 15, "the history catching up with the produced bytes")
    assert data["interval_ms"] == SAMPLE_MS and data["sample_cost_ms"] > 0
    rates = _series(data, "bytes")
    assert max(rates["in"]) > 0 and max(rates["out"]) > 0
    # the rates, summed over their intervals, come back to the counter (timing jitter aside)
    assert _integral(data, rates["in"]) == pytest.approx(produced, rel=0.1)
    requests = _series(data, "requests")
    assert {"Produce", "Fetch", "Metadata"} <= set(requests)
    produce_requests = _counter(base, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert _integral(data, requests["Produce"]) == pytest.approx(produce_requests, rel=0.1, abs=1.5)
    p50, p99 = _series(data, "latency-p50"), _series(data, "latency-p99")
    produce_p50 = [v for v in p50["Produce"] if v is not None]
    produce_p99 = [v for v in p99["Produce"] if v is not None]
    assert produce_p50 and produce_p99 and max(produce_p99) >= max(produce_p50) > 0
    assert set(_series(data, "under-replicated")["under-replicated"]) == {0}
    assert set(_series(data, "throttle")) == {"Produce", "Fetch"}
    assert all(
        len(values) == len(data["time"]) for c in data["charts"] for values in _series(data, c["id"]).values()
    )


def test_the_page_draws_every_chart(charted, browser, screenshots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _, base = charted
    text = visit(browser, screenshots, base + "/charts", "charts-loading")
    assert f"sampled every {SAMPLE_MS / 1000} s" in text
    WebDriverWait(browser, 15).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, ".uplot")) == CHARTS)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#charts .uplot canvas")) == CHARTS
    titles = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#charts .u-title")]
    assert titles[0] == "Bytes per second" and "Requests per second by API" in titles
    legend = browser.find_element(By.ID, "chart-requests").text
    assert "Produce" in legend and "Fetch" in legend
    status = browser.find_element(By.ID, "charts-status").text
    assert "samples since" in status
    snapshot(browser, screenshots, "charts")
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    try:
        browser.get(base + "/charts")
        WebDriverWait(browser, 15).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, ".uplot")) == CHARTS)
        snapshot(browser, screenshots, "charts-dark")
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_odradek_console_explains_it_has_no_charts(charted, browser, screenshots):
    process, _ = charted
    with standalone_console(process.bootstrap) as url:
        text = visit(browser, screenshots, f"{url}/charts", "charts-standalone")
        assert "Charts need the broker-hosted console" in text
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(f"{url}/charts/data", timeout=30)
        answer.value.close()
        assert answer.value.code == 404


class Counters:
    """A registry's collector whose values the test sets."""

    def __init__(self) -> None:
        self.bytes_in = 0.0
        self.produce = 0.0
        self.under_replicated = 0

    def collect(self):
        family = CounterMetricFamily("kafka_server_brokertopicmetrics_bytesin", "", labels=["topic"])
        family.add_sample(family.name + "_total", {}, self.bytes_in)
        family.add_metric(["t"], self.bytes_in)
        yield family
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "", labels=["request", "version"]
        )
        requests.add_metric(["Produce", "9"], self.produce)
        yield requests
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions", "", self.under_replicated
        )


def test_the_history_keeps_an_hour_of_rates():
    counters = Counters()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(counters)
    now = [0]
    history = MetricsHistory(registry, 1_200_000, lambda: now[0], lambda: 1_700_000_000_000 + now[0])
    history.sample()
    assert not history.samples  # the baseline
    for step in range(1, 6):
        now[0] += 1_200_000
        counters.bytes_in += 1_200_000 * step
        counters.produce += 1200 if step != 4 else 0
        counters.under_replicated = step
        history.sample()
    assert len(history.samples) == 3  # an hour of 20-minute samples
    data = history.charts()
    assert data["time"] == [1_700_000_000 + 1200 * step for step in (3, 4, 5)]
    assert data["start"] == 1_700_000_000 + 1200 * 2
    assert _series(data, "bytes")["in"] == [3000.0, 4000.0, 5000.0]
    assert _series(data, "requests")["Produce"] == [1.0, 0.0, 1.0]  # none in the 4th interval
    assert _series(data, "under-replicated")["under-replicated"] == [3, 4, 5]
