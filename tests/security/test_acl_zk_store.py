"""ZkAclStore against a real ZooKeeper server: ACLs land in Kafka's znodes (literal and prefixed),
a second broker's store hears each change through the change notifications, two brokers writing one
resource at once both keep their entries (conditional writes), and old notifications are purged."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.controller.zk import znodes
from odradek.controller.zk.client import KafkaZkClient
from odradek.controller.zk.znodes import ZooKeeperConnect
from odradek.security import acl_store
from odradek.security.acl_store import ZkAclStore
from odradek.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from odradek.security.authorizer import AclOperation, ResourceType
from odradek.testing.zookeeper import ZooKeeperServer
from tests.controller.zk.test_zk_client import SCHEDULER, on_loop


@pytest.fixture
def connect(zookeeper: ZooKeeperServer) -> ZooKeeperConnect:
    return ZooKeeperConnect.parse(f"{zookeeper.connect_string}/acl-{uuid.uuid4().hex[:8]}")


async def store(connect: ZooKeeperConnect) -> ZkAclStore:
    client = await KafkaZkClient.connect(
        connect, session_timeout_ms=6000, connection_timeout_ms=10000, scheduler=SCHEDULER
    )
    made = ZkAclStore(client)
    await made.load()
    return made


async def close(*stores: ZkAclStore) -> None:
    for made in stores:
        await made.close()
        await made.zk.close()


def binding(name: str, principal: str, kind: PatternType = PatternType.LITERAL) -> AclBinding:
    entry = AccessControlEntry(principal, "*", AclOperation.READ, AclPermissionType.ALLOW)
    return AclBinding(ResourcePattern(ResourceType.TOPIC, name, kind), entry)


async def heard(made: ZkAclStore, pattern: ResourcePattern, count: int) -> None:
    for _ in range(100):
        if len(made.acls().get(pattern, ())) == count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{pattern} never had {count} entries: {made.acls().get(pattern)}")


@on_loop
async def test_a_change_is_in_kafkas_znodes_and_reaches_the_other_broker(connect):
    first, second = await store(connect), await store(connect)
    try:
        literal, prefixed = (
            binding("orders", "User:alice"),
            binding("logs-", "User:bob", PatternType.PREFIXED),
        )
        await first.add([literal, prefixed])
        await heard(second, literal.pattern, 1)
        await heard(second, prefixed.pattern, 1)
        found = await first.zk.get("/kafka-acl-extended/prefixed/Topic/logs-")
        assert found is not None and znodes.decode_acls(found[0]) == [
            {"principal": "User:bob", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ]
        literal_change = await first.zk.children(znodes.LITERAL_ACL_CHANGES_PATH)
        data = await first.zk.get(f"{znodes.LITERAL_ACL_CHANGES_PATH}/{literal_change[-1]}")
        assert data is not None and data[0] == b"TOPIC:orders"
        await second.remove([literal])
        await heard(first, literal.pattern, 0)
        assert await first.zk.get("/kafka-acl/Topic/orders") is None
    finally:
        await close(first, second)


@on_loop
async def test_two_brokers_writing_one_resource_keep_both_entries(connect):
    first, second = await store(connect), await store(connect)
    try:
        await asyncio.gather(
            *(first.add([binding("shared", f"User:a{i}")]) for i in range(5)),
            *(second.add([binding("shared", f"User:b{i}")]) for i in range(5)),
        )
        pattern = binding("shared", "User:x").pattern
        await heard(first, pattern, 10)
        await heard(second, pattern, 10)
    finally:
        await close(first, second)


@on_loop
async def test_notifications_older_than_the_expiration_are_purged(connect, monkeypatch):
    first, second = await store(connect), await store(connect)
    try:
        await first.add([binding("old", "User:a")])
        await heard(second, binding("old", "User:a").pattern, 1)
        await first.add([binding("new", "User:a")])
        await heard(second, binding("new", "User:a").pattern, 1)
        # now every notification is expired: the next one makes each store look again and purge them
        # all (with no expiration at all, one store could purge a notification before the other read it)
        monkeypatch.setattr(acl_store, "CHANGE_EXPIRATION_MS", 0)
        await first.add([binding("last", "User:a")])
        for _ in range(100):
            if not await first.zk.children(znodes.LITERAL_ACL_CHANGES_PATH):
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the notifications were never purged")
    finally:
        await close(first, second)
