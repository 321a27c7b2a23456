"""LocalMetadataStore's dynamic broker configs: durable in the metadata file, read back on load,
watchers told after the write, an emptied entity dropped from the file."""

from __future__ import annotations

import json
import uuid

from odradek.clock import SYSTEM_CLOCK
from odradek.controller.local import METADATA_FILE, LocalMetadataStore
from odradek.controller.store import DEFAULT_BROKER_ENTITY, StoredTopic
from odradek.scheduler import Scheduler
from tests.controller.zk.test_zk_client import on_loop

SCHEDULER = Scheduler(SYSTEM_CLOCK)  # lanes only: these tests register no timers


@on_loop
async def test_broker_configs_are_stored_and_read_back(tmp_path):
    store = LocalMetadataStore(tmp_path, SCHEDULER)
    heard: list[tuple[str, dict]] = []
    store.watch_broker_configs(lambda entity: heard.append((entity, dict(store.broker_configs(entity)))))
    await store.create_topic(StoredTopic("t", uuid.uuid4(), {0: (0,)}))
    await store.set_broker_configs(DEFAULT_BROKER_ENTITY, {"log.retention.ms": "60000"})
    await store.set_broker_configs("0", {"log.segment.bytes": "2048"})
    assert heard == [
        (DEFAULT_BROKER_ENTITY, {"log.retention.ms": "60000"}),
        ("0", {"log.segment.bytes": "2048"}),
    ]
    document = json.loads((tmp_path / METADATA_FILE).read_text())
    assert document["broker_configs"] == {
        "<default>": {"log.retention.ms": "60000"},
        "0": {"log.segment.bytes": "2048"},
    }

    reloaded = LocalMetadataStore(tmp_path, SCHEDULER)
    reloaded.load()
    assert reloaded.broker_configs(DEFAULT_BROKER_ENTITY) == {"log.retention.ms": "60000"}
    assert reloaded.broker_configs("0") == {"log.segment.bytes": "2048"}
    assert set(reloaded.topics()) == {"t"}


@on_loop
async def test_emptied_entity_leaves_the_file(tmp_path):
    store = LocalMetadataStore(tmp_path, SCHEDULER)
    await store.set_broker_configs("0", {"log.segment.bytes": "2048"})
    await store.set_broker_configs("0", {})
    assert store.broker_configs("0") == {}
    assert "broker_configs" not in json.loads((tmp_path / METADATA_FILE).read_text())


@on_loop
async def test_group_configs_are_stored_and_read_back(tmp_path):
    store = LocalMetadataStore(tmp_path, SCHEDULER)
    await store.set_group_configs("g", {"share.auto.offset.reset": "earliest"})
    await store.set_broker_configs("0", {"log.segment.bytes": "2048"})  # keeps the group configs
    document = json.loads((tmp_path / METADATA_FILE).read_text())
    assert document["group_configs"] == {"g": {"share.auto.offset.reset": "earliest"}}
    reloaded = LocalMetadataStore(tmp_path, SCHEDULER)
    reloaded.load()
    assert reloaded.group_configs("g") == {"share.auto.offset.reset": "earliest"}
    await reloaded.set_group_configs("g", {})
    assert "group_configs" not in json.loads((tmp_path / METADATA_FILE).read_text())
