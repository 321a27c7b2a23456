"""The pipeline's data generator: web-activity events keyed by user id.

Owns the event format and its deterministic generation. An event is a JSON object
`{"event_id", "user_id", "event_type", "page", "ts"}` where `ts` is the event time in epoch
milliseconds; the record key is the user id (so a user's events stay in one partition, in order) and
the record timestamp is the event time. Event types are page_view (most), click, add_to_cart and
purchase.

Invariants: the same (seed, count, users, start_ms, step_ms) always gives the same events; event
times never decrease (`start_ms + i * step_ms` plus a jitter smaller than `step_ms`).

Callers: odradek.pipeline.__main__, tests, benchmarks.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass

from odradek.client import KafkaClient
from odradek.client.producer import Producer

EVENT_TYPES = (
    "page_view",
    "page_view",
    "page_view",
    "page_view",
    "click",
    "click",
    "add_to_cart",
    "purchase",
)
PAGES = ("/", "/search", "/products", "/products/{n}", "/cart", "/checkout", "/help")


@dataclass(frozen=True, slots=True)
class WebEvent:
    event_id: str
    user_id: str
    event_type: str
    page: str
    ts: int

    def key(self) -> bytes:
        return self.user_id.encode()

    def value(self) -> bytes:
        return json.dumps(
            {
                "event_id": self.event_id,
                "user_id": self.user_id,
                "event_type": self.event_type,
                "page": self.page,
                "ts": self.ts,
            },
            separators=(",", ":"),
        ).encode()


def generate_events(
    count: int, *, users: int, start_ms: int, step_ms: int, seed: int = 7
) -> Iterator[WebEvent]:
    """`count` events, one every `step_ms` from `start_ms`, from `users` distinct users."""
    rng = random.Random(seed)
    for i in range(count):
        page = rng.choice(PAGES).format(n=rng.randrange(100))
        yield WebEvent(
            event_id=f"e{seed}-{i}",
            user_id=f"user-{rng.randrange(users):04d}",
            event_type=rng.choice(EVENT_TYPES),
            page=page,
            ts=start_ms + i * step_ms + rng.randrange(max(step_ms, 1)),
        )


def publish(client: KafkaClient, topic: str, events: Iterator[WebEvent]) -> dict[int, int]:
    """Produce events keyed by user id (record timestamp = event time); return records per partition."""
    producer = Producer(client)
    counts: dict[int, int] = {}
    for event in events:
        tp = producer.send(topic, event.value(), key=event.key(), timestamp_ms=event.ts)
        counts[tp.partition] = counts.get(tp.partition, 0) + 1
    producer.flush()
    return dict(sorted(counts.items()))
