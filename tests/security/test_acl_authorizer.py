"""The ACL authorizer's decisions (security/acl_authorizer.py) over a local ACL store, as Kafka's
AclAuthorizer decides: patterns (literal, prefixed, wildcard), deny over allow, super.users,
allow.everyone.if.no.acl.found, implied operations, host matching; the store's file and its
reload; authorizer.class.name's accepted names."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from odradek.clock import SYSTEM_CLOCK
from odradek.protocol.headers import RequestHeader
from odradek.scheduler import Scheduler
from odradek.security.acl_authorizer import AclAuthorizer, authorizer_for
from odradek.security.acl_store import ACLS_FILE, LocalAclStore
from odradek.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from odradek.security.authorizer import CLUSTER, AclOperation, AllowEverything, Resource, ResourceType
from odradek.security.principal import KafkaPrincipal
from odradek.server.config import ConfigError, KafkaConfig

OP, ALLOW, DENY = AclOperation, AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def ctx(user: str = "alice", host: str = "10.0.0.1") -> SimpleNamespace:
    return SimpleNamespace(
        principal=KafkaPrincipal("User", user), client_host=host, header=RequestHeader(0, 9, 1, "t")
    )


def binding(
    name: str,
    op: AclOperation,
    permission: AclPermissionType = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    kind: PatternType = LITERAL,
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, kind), AccessControlEntry(principal, host, op, permission)
    )


def authorizer(tmp_path: Path, *bindings: AclBinding, super_users=(), allow_if_none=False) -> AclAuthorizer:
    async def build() -> AclAuthorizer:
        store = LocalAclStore(tmp_path, Scheduler(SYSTEM_CLOCK))
        store.load()
        made = AclAuthorizer(super_users, allow_if_none)
        made.attach(store)
        if bindings:
            await store.add(bindings)
        return made

    return asyncio.run(build())


def allowed(auth: AclAuthorizer, op: AclOperation, name: str, resource_type=TOPIC, **who: str) -> bool:
    return auth.authorize(ctx(**who), op, Resource(resource_type, name))  # type: ignore[arg-type]


def test_no_acl_refuses_unless_allow_everyone_if_no_acl_found(tmp_path):
    assert not allowed(authorizer(tmp_path / "a"), OP.READ, "t")
    assert allowed(authorizer(tmp_path / "b", allow_if_none=True), OP.READ, "t")
    # a resource with any ACL is decided by its ACLs, whatever the flag says
    assert not allowed(
        authorizer(tmp_path / "c", binding("t", OP.READ, principal="User:bob"), allow_if_none=True),
        OP.READ,
        "t",
    )


def test_literal_prefixed_and_wildcard_patterns(tmp_path):
    auth = authorizer(
        tmp_path,
        binding("orders", OP.READ),
        binding("logs-", OP.WRITE, kind=PREFIXED),
        binding("*", OP.DESCRIBE, principal="User:*"),
    )
    assert allowed(auth, OP.READ, "orders") and not allowed(auth, OP.READ, "orders2")
    assert allowed(auth, OP.WRITE, "logs-app") and not allowed(auth, OP.WRITE, "log")
    assert allowed(auth, OP.DESCRIBE, "anything", user="bob")


def test_deny_wins_over_allow(tmp_path):
    auth = authorizer(
        tmp_path,
        binding("*", OP.ALL, principal="User:*"),
        binding("secret-", OP.READ, DENY, kind=PREFIXED),
    )
    assert allowed(auth, OP.READ, "public") and allowed(auth, OP.WRITE, "secret-x")
    assert not allowed(auth, OP.READ, "secret-x")
    assert allowed(auth, OP.READ, "secret-x", user="bob")


def test_implied_operations(tmp_path):
    auth = authorizer(
        tmp_path,
        binding("t", OP.WRITE),
        binding("t", OP.ALTER_CONFIGS),
        binding("u", OP.DESCRIBE, DENY),
        binding("u", OP.READ),
    )
    assert allowed(auth, OP.DESCRIBE, "t") and allowed(auth, OP.DESCRIBE_CONFIGS, "t")
    assert not allowed(auth, OP.READ, "t") and not allowed(auth, OP.ALTER, "t")
    # a DENY of DESCRIBE is not undone by an allowed READ
    assert allowed(auth, OP.READ, "u") and not allowed(auth, OP.DESCRIBE, "u")


def test_host_matching(tmp_path):
    auth = authorizer(
        tmp_path, binding("t", OP.READ, host="10.0.0.1"), binding("t", OP.WRITE, DENY, host="10.0.0.2")
    )
    assert allowed(auth, OP.READ, "t", host="10.0.0.1") and not allowed(auth, OP.READ, "t", host="10.0.0.9")


def test_super_users_are_allowed_everything(tmp_path):
    auth = authorizer(
        tmp_path, binding("t", OP.ALL, DENY, principal="User:admin"), super_users={"User:admin"}
    )
    assert allowed(auth, OP.DELETE, "t", user="admin")
    assert auth.authorize(ctx("admin"), OP.CLUSTER_ACTION, CLUSTER)  # type: ignore[arg-type]
    assert not auth.authorize(ctx("alice"), OP.CLUSTER_ACTION, CLUSTER)  # type: ignore[arg-type]


def test_a_change_reaches_the_cached_decisions(tmp_path):
    auth = authorizer(tmp_path, binding("t", OP.READ))
    assert allowed(auth, OP.READ, "t")
    assert auth.store is not None
    asyncio.run(auth.store.remove([binding("t", OP.READ)]))
    assert not allowed(auth, OP.READ, "t")


def test_authorize_by_resource_type(tmp_path):
    ctx_alice = ctx()
    auth = authorizer(tmp_path / "a", binding("t", OP.WRITE))
    assert auth.authorize_by_resource_type(ctx_alice, OP.WRITE, TOPIC)  # type: ignore[arg-type]
    assert not auth.authorize_by_resource_type(ctx("bob"), OP.WRITE, TOPIC)  # type: ignore[arg-type]
    denied = authorizer(tmp_path / "b", binding("t", OP.WRITE), binding("*", OP.WRITE, DENY))
    assert not denied.authorize_by_resource_type(ctx_alice, OP.WRITE, TOPIC)  # type: ignore[arg-type]


def test_the_local_store_keeps_kafkas_entry_json_across_a_reload(tmp_path):
    authorizer(
        tmp_path, binding("logs-", OP.WRITE, kind=PREFIXED), binding("g", OP.READ, resource_type=GROUP)
    )
    document = json.loads((tmp_path / ACLS_FILE).read_text())
    entries = {(r["resourceType"], r["name"], r["patternType"]): r["acls"] for r in document["acls"]}
    assert entries[("Topic", "logs-", "PREFIXED")] == [
        {"host": "*", "operation": "Write", "permissionType": "Allow", "principal": "User:alice"}
    ]
    reloaded = authorizer(tmp_path)
    assert allowed(reloaded, OP.WRITE, "logs-x") and allowed(reloaded, OP.READ, "g", resource_type=GROUP)


def test_filters_match_as_kafkas_do():
    literal, prefixed, wildcard = (
        binding("orders", OP.READ),
        binding("ord", OP.READ, kind=PREFIXED),
        binding("*", OP.WRITE),
    )
    match = AclBindingFilter(TOPIC, "orders", PatternType.MATCH)
    assert [match.matches(b) for b in (literal, prefixed, wildcard)] == [True, True, True]
    exact = AclBindingFilter(TOPIC, "orders", LITERAL)
    assert [exact.matches(b) for b in (literal, prefixed, wildcard)] == [True, False, False]
    by_op = AclBindingFilter(operation=OP.WRITE)
    assert [by_op.matches(b) for b in (literal, prefixed, wildcard)] == [False, False, True]


@pytest.mark.parametrize(
    "name",
    [
        "odradek.security.AclAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    ],
)
def test_authorizer_class_name_accepts_odradeks_and_kafkas_names(name, tmp_path):
    config = KafkaConfig(
        {"authorizer.class.name": name, "super.users": "User:a;User:b", "log.dirs": str(tmp_path)}
    )
    made = authorizer_for(config)
    assert isinstance(made, AclAuthorizer) and made.super_users == {"User:a", "User:b"}
    assert not made.allow_everyone_if_no_acl_found


def test_no_authorizer_allows_everything_and_an_unknown_class_is_refused(tmp_path):
    assert isinstance(authorizer_for(KafkaConfig({"log.dirs": str(tmp_path)})), AllowEverything)
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        KafkaConfig({"authorizer.class.name": "com.example.MyAuthorizer", "log.dirs": str(tmp_path)})
