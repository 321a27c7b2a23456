"""Reading a broker's Prometheus `/metrics` in tests: fetch it over HTTP and index its samples."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    """Every sample of the exposition at `url`, by (sample name, labels)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, default: float | None = None, **labels: str) -> float:
    """The sample `name{labels}`; `default` when absent (KeyError without a default)."""
    found = samples.get((name, frozenset(labels.items())))
    if found is None:
        if default is None:
            raise KeyError(f"{name}{labels} not exposed")
        return default
    return found


def scrape_while(url: str, busy: Callable[[], bool]) -> int:
    """Scrape `url` again and again while `busy()` holds; how many scrapes succeeded (any failure
    raises: an empty reply, a 500, a closed connection)."""
    count = 0
    while busy():
        scrape(url)
        count += 1
    return count
