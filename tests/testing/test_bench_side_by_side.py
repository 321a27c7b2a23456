"""The side-by-side benchmark's arithmetic (bench/side_by_side.py, bench/latency.py): odradek's ratio
to the reference Kafka and the words for it, and the client-side request count over a window."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from latency import requests_between  # noqa: E402
from side_by_side import Figure, ratio  # noqa: E402

RATE = Figure("produce, MB/s", higher_is_better=True)
TIME = Figure("p99 latency, ms", higher_is_better=False)


def test_a_rate_below_kafka_is_behind_by_the_share_of_kafkas_rate_missing() -> None:
    assert ratio(RATE, {"odradek": 60.0, "kafka-4": 80.0}, "kafka-4") == "0.75x: behind by 25%"
    assert ratio(RATE, {"odradek": 120.0, "kafka-4": 80.0}, "kafka-4") == "1.50x: ahead by 50%"


def test_a_time_above_kafka_is_behind_by_how_much_longer_it_is() -> None:
    assert ratio(TIME, {"odradek": 30.0, "kafka-4": 10.0}, "kafka-4") == "3.00x: behind by 200%"
    assert ratio(TIME, {"odradek": 5.0, "kafka-4": 10.0}, "kafka-4") == "0.50x: ahead by 50%"
    assert ratio(TIME, {"odradek": 8.2, "kafka-4": 2689.0}, "kafka-4") == "0.003x: ahead by 100%"


def test_no_ratio_without_both_figures() -> None:
    assert ratio(TIME, {"odradek": 5.0, "kafka-4": "not run"}, "kafka-4") == "n/a"
    assert ratio(TIME, {"odradek": "failed", "kafka-4": 10.0}, "kafka-4") == "n/a"
    assert ratio(TIME, {"odradek": float("nan"), "kafka-4": 10.0}, "kafka-4") == "n/a"


def test_requests_in_a_window_are_interpolated_between_samples() -> None:
    samples = [(10.0, 100), (11.0, 200), (12.0, 400)]
    assert requests_between(samples, 10.5, 11.5) == 300 - 150
    assert requests_between(samples, 9.0, 13.0) == 300  # held at the outermost samples
    assert requests_between([], 0.0, 1.0) == 0.0


def test_the_ratio_is_to_the_reference_broker_named() -> None:
    cells: dict[str, float | str] = {"odradek": 30.0, "kafka-3.9": 60.0, "kafka-4": 10.0}
    assert ratio(TIME, cells, "kafka-3.9") == "0.50x: ahead by 50%"
    assert ratio(TIME, cells, "kafka-4") == "3.00x: behind by 200%"
