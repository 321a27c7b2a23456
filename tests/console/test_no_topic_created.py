"""The console's pages that name a topic (`/topic?name=`, `/messages?topic=`) never create it, even on a
broker that auto-creates topics: a topic that does not exist is said to be missing, and stays missing."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from odradek.client import KafkaClient
from odradek.testing.broker import BrokerProcess, free_port


@pytest.fixture(scope="module")
def console_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    root = tmp_path_factory.mktemp("console-no-topic")
    port = free_port()
    overrides = {"http.listeners": f"http://127.0.0.1:{port}", "auto.create.topics.enable": "true"}
    with BrokerProcess(root / "data", output_path=root / "broker.out", overrides=overrides) as process:
        yield process, f"http://127.0.0.1:{port}"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.parametrize(
    "path, query",
    [("/topic", {"name": "{topic}"}), ("/messages", {"topic": "{topic}", "partition": "0"})],
)
def test_a_page_naming_a_missing_topic_leaves_it_missing(
    console_broker: tuple[BrokerProcess, str], unique_topic: str, path: str, query: dict[str, str]
) -> None:
    broker, base = console_broker
    filled = {k: v.format(topic=unique_topic) for k, v in query.items()}
    status, page = get(f"{base}{path}?{urllib.parse.urlencode(filled)}")
    assert status != 200 and unique_topic in page, page
    with KafkaClient(broker.bootstrap) as client:
        assert unique_topic not in client.metadata(None).topics
