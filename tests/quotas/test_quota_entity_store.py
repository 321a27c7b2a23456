"""The metadata store's client entity configs (users, clients, users/clients): Kafka's entity names
and sanitized znode names, alterations that keep the keys they do not name, durable in the local
file and in ZooKeeper's `/config/users|clients/...` znodes, every ZooKeeper broker told through
`/config/changes`."""

from __future__ import annotations

import asyncio
import json

import pytest

from odradek.controller.local import METADATA_FILE, LocalMetadataStore
from odradek.controller.store import (
    CLIENT_ID,
    USER,
    client_entity_of,
    client_entity_path,
    sanitize,
)
from tests.controller.zk.test_zk_client import SCHEDULER, on_loop
from tests.controller.zk.test_zk_store import _close, _store


def test_entity_paths_are_kafkas_znode_names():
    assert client_entity_path(((USER, "alice"),)) == ("users", "alice")
    assert client_entity_path(((CLIENT_ID, None),)) == ("clients", "<default>")
    assert client_entity_path(((USER, None), (CLIENT_ID, "app"))) == ("users", "<default>/clients/app")
    assert client_entity_path(((USER, "CN=a b/c*"), (CLIENT_ID, None))) == (
        "users",
        "CN%3Da%20b%2Fc%2A/clients/<default>",
    )
    assert sanitize("<default>") == "%3Cdefault%3E"  # a user named <default> is not the default
    for entity in (((USER, "CN=a b/c~"),), ((USER, "u"), (CLIENT_ID, None)), ((CLIENT_ID, "x.y-z_1"),)):
        assert client_entity_of(*client_entity_path(entity)) == entity


@pytest.mark.parametrize(
    "entity_type,name", [("topics", "t"), ("users", ""), ("users", "a/b"), ("clients", "a/clients/b")]
)
def test_other_names_are_refused(entity_type, name):
    with pytest.raises(ValueError):
        client_entity_of(entity_type, name)


@on_loop
async def test_local_store_keeps_other_keys_and_reads_back(tmp_path):
    store = LocalMetadataStore(tmp_path, SCHEDULER)
    heard: list[tuple[str, str]] = []
    store.watch_client_entity_configs(lambda t, n: heard.append((t, n)))
    await store.alter_client_entity_configs("users", "alice", {"SCRAM-SHA-256": "s"}, ())
    await store.alter_client_entity_configs("users", "alice", {"producer_byte_rate": "1024"}, ())
    await store.alter_client_entity_configs("users", "alice/clients/app", {"consumer_byte_rate": "9"}, ())
    await store.alter_client_entity_configs("clients", "<default>", {"request_percentage": "50"}, ())
    await store.alter_client_entity_configs("clients", "<default>", {}, ["request_percentage"])
    assert heard[0] == ("users", "alice") and len(heard) == 5
    assert store.client_entity_configs("users", "alice") == {
        "SCRAM-SHA-256": "s",
        "producer_byte_rate": "1024",
    }
    with pytest.raises(ValueError):
        await store.alter_client_entity_configs("topics", "t", {"a": "b"}, ())

    document = json.loads((tmp_path / METADATA_FILE).read_text())
    assert document["client_configs"] == {
        "users/alice": {"SCRAM-SHA-256": "s", "producer_byte_rate": "1024"},
        "users/alice/clients/app": {"consumer_byte_rate": "9"},
    }
    reloaded = LocalMetadataStore(tmp_path, SCHEDULER)
    reloaded.load()
    assert dict(reloaded.client_entities()) == {
        ("users", "alice"): {"SCRAM-SHA-256": "s", "producer_byte_rate": "1024"},
        ("users", "alice/clients/app"): {"consumer_byte_rate": "9"},
    }


@on_loop
async def test_zk_client_entities_reach_every_broker(chroot):
    writer, other = await _store(chroot, 1), await _store(chroot, 2)
    heard: list[tuple[str, str]] = []
    other.watch_client_entity_configs(lambda t, n: heard.append((t, n)))
    try:
        await writer.alter_client_entity_configs("users", "alice", {"SCRAM-SHA-512": "s"}, ())
        await writer.alter_client_entity_configs("users", "alice", {"producer_byte_rate": "1024"}, ())
        await writer.alter_client_entity_configs("users", "bob/clients/app", {"consumer_byte_rate": "7"}, ())
        await writer.alter_client_entity_configs("clients", "<default>", {"producer_byte_rate": "5"}, ())
        changes = await writer.zk.config_changes()
        assert await writer.zk.config_change(changes[-2]) == ("users", "bob/clients/app")
        assert await writer.zk.entity_configs("users", "alice") == {
            "SCRAM-SHA-512": "s",
            "producer_byte_rate": "1024",
        }
        async with asyncio.timeout(10):
            while other.client_entity_configs("clients", "<default>") != {"producer_byte_rate": "5"}:
                await asyncio.sleep(0.05)
        assert other.client_entity_configs("users", "bob/clients/app") == {"consumer_byte_rate": "7"}
        assert ("users", "bob/clients/app") in heard

        await writer.alter_client_entity_configs("users", "alice", {}, ["producer_byte_rate"])
        async with asyncio.timeout(10):
            while other.client_entity_configs("users", "alice") != {"SCRAM-SHA-512": "s"}:
                await asyncio.sleep(0.05)

        restarted = await _store(chroot, 3)
        assert dict(restarted.client_entities()) == {
            ("users", "alice"): {"SCRAM-SHA-512": "s"},
            ("users", "bob/clients/app"): {"consumer_byte_rate": "7"},
            ("clients", "<default>"): {"producer_byte_rate": "5"},
        }
        await _close(restarted)
    finally:
        await _close(writer, other)
