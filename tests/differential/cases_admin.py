"""Differential cases of administration and security: DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, the ACL APIs, ACL denials (alice, a SASL/PLAIN user without ACLs, and the
same requests once ACLs allow her), SaslHandshake and SaslAuthenticate, client quotas, SCRAM
credentials, DescribeCluster, ApiVersions, ElectLeaders, partition reassignments, log dirs, and the
controller-to-broker APIs with a stale controller epoch."""

from __future__ import annotations

import dataclasses

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages import alter_client_quotas as acq
from odradek.protocol.messages import alter_configs as ac
from odradek.protocol.messages import alter_partition_reassignments as apr
from odradek.protocol.messages import alter_replica_log_dirs as ard
from odradek.protocol.messages import alter_user_scram_credentials as aus
from odradek.protocol.messages import api_versions as av
from odradek.protocol.messages import consumer_group_heartbeat as cgh
from odradek.protocol.messages import create_acls as ca
from odradek.protocol.messages import delete_acls as da
from odradek.protocol.messages import describe_acls as dsa
from odradek.protocol.messages import describe_client_quotas as dcq
from odradek.protocol.messages import describe_cluster as dc
from odradek.protocol.messages import describe_configs as dcf
from odradek.protocol.messages import describe_topic_partitions as dtp
from odradek.protocol.messages import describe_user_scram_credentials as dus
from odradek.protocol.messages import elect_leaders as el
from odradek.protocol.messages import get_telemetry_subscriptions as gts
from odradek.protocol.messages import incremental_alter_configs as iac
from odradek.protocol.messages import leader_and_isr as lai
from odradek.protocol.messages import list_partition_reassignments as lpr
from odradek.protocol.messages import sasl_authenticate as sa
from odradek.protocol.messages import sasl_handshake as sh
from odradek.protocol.messages import stop_replica as sr
from odradek.protocol.messages import update_metadata as um
from tests.differential import cases_data, cases_groups, cases_topics, cases_txn
from tests.differential.build import (
    coordinator,
    create,
    fetch,
    fmt,
    init_producer,
    join,
    list_offsets,
    metadata,
    produce,
    ready,
    topic,
)
from tests.differential.engine import ALICE, ALICE_PASSWORD, UNAUTHENTICATED, Case, Ctx, Step

TOPIC, BROKER = 2, 4  # config resource types
ACL_TOPIC, ACL_GROUP, ACL_CLUSTER = 2, 3, 4  # ACL resource types
LITERAL, ANY_PATTERN = 3, 1
ANY_OP, ALL_OP, READ, WRITE, DESCRIBE = 1, 2, 3, 4, 8
ALLOW, DENY, ANY_PERMISSION = 3, 2, 1
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
BROKER_ID = "1"


def as_alice(step: Step) -> Step:
    return dataclasses.replace(step, user=ALICE)


def describe_configs(
    resource_type: int, name: str, keys: tuple[str, ...] | None, *, version: int = 4, synonyms: bool = False
) -> Step:
    return Step(
        ApiKey.DESCRIBE_CONFIGS,
        version,
        lambda c: dcf.DescribeConfigsRequest(
            resources=[
                dcf.DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=resource_type,
                    resource_name=fmt(name, c),
                    configuration_keys=None if keys is None else list(keys),
                )
            ],
            include_synonyms=synonyms,
        ),
    )


def alter_configs(
    resource_type: int,
    name: str,
    configs: dict[str, str | None],
    *,
    version: int = 2,
    validate_only: bool = False,
) -> Step:
    return Step(
        ApiKey.ALTER_CONFIGS,
        version,
        lambda c: ac.AlterConfigsRequest(
            resources=[
                ac.AlterConfigsRequest.AlterConfigsResource(
                    resource_type=resource_type,
                    resource_name=fmt(name, c),
                    configs=[ac.AlterConfigsRequest.AlterableConfig(k, v) for k, v in configs.items()],
                )
            ],
            validate_only=validate_only,
        ),
    )


def incremental(
    resource_type: int,
    name: str,
    ops: tuple[tuple[str, int, str | None], ...],
    *,
    version: int = 1,
    validate_only: bool = False,
) -> Step:
    return Step(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        version,
        lambda c: iac.IncrementalAlterConfigsRequest(
            resources=[
                iac.IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=resource_type,
                    resource_name=fmt(name, c),
                    configs=[
                        iac.IncrementalAlterConfigsRequest.AlterableConfig(k, op, v) for k, op, v in ops
                    ],
                )
            ],
            validate_only=validate_only,
        ),
    )


TOPIC_KEYS = ("retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes", "min.insync.replicas")


def acl(
    *,
    resource_type: int = ACL_TOPIC,
    name: str = "{topic}",
    principal: str = f"User:{ALICE}",
    operation: int = READ,
    permission: int = ALLOW,
    pattern: int = LITERAL,
    host: str = "*",
) -> object:
    def make(c: Ctx) -> ca.CreateAclsRequest.AclCreation:
        return ca.CreateAclsRequest.AclCreation(
            resource_type=resource_type,
            resource_name=fmt(name, c),
            resource_pattern_type=pattern,
            principal=principal,
            host=host,
            operation=operation,
            permission_type=permission,
        )

    return make


def create_acls(*acls: object, version: int = 3, compare: bool = True) -> Step:
    return Step(
        ApiKey.CREATE_ACLS,
        version,
        lambda c: ca.CreateAclsRequest(creations=[make(c) for make in acls]),  # type: ignore[operator]
        compare=compare,
    )


def describe_acls(
    *,
    name: str | None = "{topic}",
    resource_type: int = ACL_TOPIC,
    version: int = 3,
    pattern: int = ANY_PATTERN,
) -> Step:
    return Step(
        ApiKey.DESCRIBE_ACLS,
        version,
        lambda c: dsa.DescribeAclsRequest(
            resource_type_filter=resource_type,
            resource_name_filter=None if name is None else fmt(name, c),
            pattern_type_filter=pattern,
            operation=ANY_OP,
            permission_type=ANY_PERMISSION,
        ),
    )


def delete_acls(
    *, name: str = "{topic}", resource_type: int = ACL_TOPIC, version: int = 3, operation: int = ANY_OP
) -> Step:
    return Step(
        ApiKey.DELETE_ACLS,
        version,
        lambda c: da.DeleteAclsRequest(
            filters=[
                da.DeleteAclsRequest.DeleteAclsFilter(
                    resource_type_filter=resource_type,
                    resource_name_filter=fmt(name, c),
                    pattern_type_filter=ANY_PATTERN,
                    operation=operation,
                    permission_type=ANY_PERMISSION,
                )
            ]
        ),
    )


def quotas_alter(
    ops: dict[str, float | None],
    *,
    entity: str = "{topic}",
    validate_only: bool = False,
    entity_type: str = "client-id",
) -> Step:
    return Step(
        ApiKey.ALTER_CLIENT_QUOTAS,
        1,
        lambda c: acq.AlterClientQuotasRequest(
            entries=[
                acq.AlterClientQuotasRequest.EntryData(
                    entity=[acq.AlterClientQuotasRequest.EntityData(entity_type, fmt(entity, c))],
                    ops=[
                        acq.AlterClientQuotasRequest.OpData(key=k, value=v or 0.0, remove=v is None)
                        for k, v in ops.items()
                    ],
                )
            ],
            validate_only=validate_only,
        ),
    )


def quotas_describe(
    *, entity: str = "{topic}", match_type: int = 0, entity_type: str = "client-id", strict: bool = True
) -> Step:
    return Step(
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        1,
        lambda c: dcq.DescribeClientQuotasRequest(
            components=[
                dcq.DescribeClientQuotasRequest.ComponentData(entity_type, match_type, fmt(entity, c))
            ],
            strict=strict,
        ),
    )


def scram_upsert(*, user: str = "{topic}", mechanism: int = 1, iterations: int = 8192) -> Step:
    return Step(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        lambda c: aus.AlterUserScramCredentialsRequest(
            upsertions=[
                aus.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                    name=fmt(user, c),
                    mechanism=mechanism,
                    iterations=iterations,
                    salt=b"salt" * 4,
                    salted_password=b"p" * 32,
                )
            ]
        ),
    )


def scram_delete(*, user: str = "{topic}", mechanism: int = 1) -> Step:
    return Step(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        lambda c: aus.AlterUserScramCredentialsRequest(
            deletions=[
                aus.AlterUserScramCredentialsRequest.ScramCredentialDeletion(
                    name=fmt(user, c), mechanism=mechanism
                )
            ]
        ),
    )


def scram_describe(*users: str) -> Step:
    return Step(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        lambda c: dus.DescribeUserScramCredentialsRequest(
            users=[dus.DescribeUserScramCredentialsRequest.UserName(fmt(u, c)) for u in users or ("{topic}",)]
        ),
    )


def elect(
    *, name: str = "{topic}", partitions: tuple[int, ...] = (0,), election_type: int = 0, version: int = 2
) -> Step:
    return Step(
        ApiKey.ELECT_LEADERS,
        version,
        lambda c: el.ElectLeadersRequest(
            election_type=election_type,
            topic_partitions=[el.ElectLeadersRequest.TopicPartitions(fmt(name, c), list(partitions))],
            timeout_ms=10000,
        ),
    )


def reassign(replicas: list[int] | None, *, name: str = "{topic}", partition: int = 0) -> Step:
    return Step(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        0,
        lambda c: apr.AlterPartitionReassignmentsRequest(
            timeout_ms=10000,
            topics=[
                apr.AlterPartitionReassignmentsRequest.ReassignableTopic(
                    fmt(name, c),
                    [apr.AlterPartitionReassignmentsRequest.ReassignablePartition(partition, replicas)],
                )
            ],
        ),
    )


def list_reassignments(*, name: str = "{topic}") -> Step:
    return Step(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        0,
        lambda c: lpr.ListPartitionReassignmentsRequest(
            timeout_ms=10000,
            topics=[
                lpr.ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(fmt(name, c), [0])
            ],
        ),
    )


def move_log_dir(path: str, *, name: str = "{topic}") -> Step:
    return Step(
        ApiKey.ALTER_REPLICA_LOG_DIRS,
        2,
        lambda c: ard.AlterReplicaLogDirsRequest(
            dirs=[
                ard.AlterReplicaLogDirsRequest.AlterReplicaLogDir(
                    path=path,
                    topics=[ard.AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(fmt(name, c), [0])],
                )
            ]
        ),
    )


def describe_cluster(version: int = 1, operations: bool = False) -> Step:
    return Step(
        ApiKey.DESCRIBE_CLUSTER,
        version,
        dc.DescribeClusterRequest(include_cluster_authorized_operations=operations),
        ignore=frozenset({"controller_id"}),
    )


def handshake(mechanism: str, *, user: str = UNAUTHENTICATED, version: int = 1) -> Step:
    return Step(ApiKey.SASL_HANDSHAKE, version, sh.SaslHandshakeRequest(mechanism), user=user)


def authenticate(name: str, password: str, *, user: str = UNAUTHENTICATED, version: int = 2) -> Step:
    return Step(
        ApiKey.SASL_AUTHENTICATE,
        version,
        sa.SaslAuthenticateRequest(f"\x00{name}\x00{password}".encode()),
        user=user,
    )


STALE_EPOCH = 0  # a fresh ZooKeeper cluster's controller epoch is 1


def leader_and_isr(version: int = 5) -> Step:
    return Step(
        ApiKey.LEADER_AND_ISR,
        version,
        lambda c: lai.LeaderAndIsrRequest(
            controller_id=1,
            controller_epoch=STALE_EPOCH,
            broker_epoch=-1,
            topic_states=[
                lai.LeaderAndIsrRequest.LeaderAndIsrTopicState(
                    topic_name=c.topic,
                    partition_states=[
                        lai.LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                            topic_name=c.topic,
                            partition_index=0,
                            controller_epoch=STALE_EPOCH,
                            leader=1,
                            isr=[1],
                            replicas=[1],
                        )
                    ],
                )
            ],
            live_leaders=[lai.LeaderAndIsrRequest.LeaderAndIsrLiveLeader(1, "127.0.0.1", 9)],
        ),
    )


def stop_replica(version: int = 3) -> Step:
    return Step(
        ApiKey.STOP_REPLICA,
        version,
        lambda c: sr.StopReplicaRequest(
            controller_id=1,
            controller_epoch=STALE_EPOCH,
            broker_epoch=-1,
            topic_states=[
                sr.StopReplicaRequest.StopReplicaTopicState(
                    c.topic, [sr.StopReplicaRequest.StopReplicaPartitionState(0, 5, False)]
                )
            ],
        ),
    )


def update_metadata(version: int = 7) -> Step:
    return Step(
        ApiKey.UPDATE_METADATA,
        version,
        lambda c: um.UpdateMetadataRequest(controller_id=1, controller_epoch=STALE_EPOCH, broker_epoch=-1),
    )


def with_topic(*steps: Step) -> tuple[Step, ...]:
    return (topic(), ready(), *steps)


CASES: list[Case] = []

# DescribeConfigs
for v in (0, 1, 2, 3, 4):
    CASES.append(
        Case(
            f"describe-configs/v{v}/topic-keys",
            with_topic(describe_configs(TOPIC, "{topic}", TOPIC_KEYS, version=v)),
        )
    )
CASES += [
    Case("describe-configs/topic-all", with_topic(describe_configs(TOPIC, "{topic}", None))),
    Case(
        "describe-configs/topic-all-strict", with_topic(describe_configs(TOPIC, "{topic}", None)), strict=True
    ),
    Case(
        "describe-configs/topic-synonyms",
        with_topic(describe_configs(TOPIC, "{topic}", ("retention.ms", "max.message.bytes"), synonyms=True)),
    ),
    Case(
        "describe-configs/topic-override",
        (
            create(("{topic}", 1, 1, {"retention.ms": "12345"}), compare=False),
            ready(),
            describe_configs(TOPIC, "{topic}", TOPIC_KEYS),
        ),
    ),
    Case("describe-configs/topic-unknown", (describe_configs(TOPIC, "no-{topic}", TOPIC_KEYS),)),
    Case(
        "describe-configs/topic-unknown-key", with_topic(describe_configs(TOPIC, "{topic}", ("no.such.key",)))
    ),
    Case(
        "describe-configs/broker-keys",
        (
            describe_configs(
                BROKER, BROKER_ID, ("num.partitions", "message.max.bytes", "auto.create.topics.enable")
            ),
        ),
    ),
    Case("describe-configs/broker-other-id", (describe_configs(BROKER, "7", ("num.partitions",)),)),
    Case("describe-configs/broker-bad-id", (describe_configs(BROKER, "one", ("num.partitions",)),)),
    Case("describe-configs/unknown-resource-type", (describe_configs(9, "x", None),)),
    Case(
        "describe-configs/broker-logger-type",
        (describe_configs(8, BROKER_ID, ("kafka.server.no.such.logger",)),),
    ),
]

# AlterConfigs / IncrementalAlterConfigs
for v in (0, 1, 2):
    CASES.append(
        Case(
            f"alter-configs/v{v}/topic",
            with_topic(
                alter_configs(TOPIC, "{topic}", {"retention.ms": "7200000"}, version=v),
                describe_configs(TOPIC, "{topic}", ("retention.ms",)),
            ),
        )
    )
CASES += [
    Case("alter-configs/unknown-topic", (alter_configs(TOPIC, "no-{topic}", {"retention.ms": "1"}),)),
    Case("alter-configs/unknown-key", with_topic(alter_configs(TOPIC, "{topic}", {"no.such.key": "1"}))),
    Case("alter-configs/bad-value", with_topic(alter_configs(TOPIC, "{topic}", {"retention.ms": "often"}))),
    Case("alter-configs/null-value", with_topic(alter_configs(TOPIC, "{topic}", {"retention.ms": None}))),
    Case(
        "alter-configs/validate-only",
        with_topic(
            alter_configs(TOPIC, "{topic}", {"retention.ms": "99"}, validate_only=True),
            describe_configs(TOPIC, "{topic}", ("retention.ms",)),
        ),
    ),
    Case(
        "alter-configs/broker-validate-only",
        (alter_configs(BROKER, BROKER_ID, {"log.cleaner.threads": "2"}, validate_only=True),),
    ),
    Case(
        "alter-configs/broker-static-key",
        (alter_configs(BROKER, BROKER_ID, {"broker.id": "5"}, validate_only=True),),
    ),
    Case(
        "alter-configs/replaces-all",
        (
            create(("{topic}", 1, 1, {"cleanup.policy": "compact"}), compare=False),
            ready(),
            alter_configs(TOPIC, "{topic}", {"retention.ms": "5000"}),
            describe_configs(TOPIC, "{topic}", TOPIC_KEYS),
        ),
    ),
]
for v in (0, 1):
    CASES.append(
        Case(
            f"incremental-alter-configs/v{v}/set",
            with_topic(
                incremental(TOPIC, "{topic}", (("retention.ms", SET, "3600000"),), version=v),
                describe_configs(TOPIC, "{topic}", ("retention.ms",)),
            ),
        )
    )
CASES += [
    Case(
        "incremental-alter-configs/delete",
        (
            create(("{topic}", 1, 1, {"retention.ms": "1000"}), compare=False),
            ready(),
            incremental(TOPIC, "{topic}", (("retention.ms", DELETE, None),)),
            describe_configs(TOPIC, "{topic}", ("retention.ms",)),
        ),
    ),
    Case(
        "incremental-alter-configs/append-list",
        with_topic(
            incremental(TOPIC, "{topic}", (("cleanup.policy", APPEND, "compact"),)),
            describe_configs(TOPIC, "{topic}", ("cleanup.policy",)),
        ),
    ),
    Case(
        "incremental-alter-configs/subtract-list",
        (
            create(("{topic}", 1, 1, {"cleanup.policy": "compact,delete"}), compare=False),
            ready(),
            incremental(TOPIC, "{topic}", (("cleanup.policy", SUBTRACT, "delete"),)),
            describe_configs(TOPIC, "{topic}", ("cleanup.policy",)),
        ),
    ),
    Case(
        "incremental-alter-configs/append-to-scalar",
        with_topic(incremental(TOPIC, "{topic}", (("retention.ms", APPEND, "5"),))),
    ),
    Case(
        "incremental-alter-configs/bad-operation",
        with_topic(incremental(TOPIC, "{topic}", (("retention.ms", 9, "5"),))),
    ),
    Case(
        "incremental-alter-configs/duplicate-key",
        with_topic(incremental(TOPIC, "{topic}", (("retention.ms", SET, "5"), ("retention.ms", SET, "6")))),
    ),
    Case(
        "incremental-alter-configs/unknown-topic",
        (incremental(TOPIC, "no-{topic}", (("retention.ms", SET, "5"),)),),
    ),
    Case(
        "incremental-alter-configs/unknown-key",
        with_topic(incremental(TOPIC, "{topic}", (("no.such.key", SET, "5"),))),
    ),
    Case(
        "incremental-alter-configs/bad-value",
        with_topic(incremental(TOPIC, "{topic}", (("min.insync.replicas", SET, "zero"),))),
    ),
    Case(
        "incremental-alter-configs/validate-only",
        with_topic(
            incremental(TOPIC, "{topic}", (("retention.ms", SET, "42"),), validate_only=True),
            describe_configs(TOPIC, "{topic}", ("retention.ms",)),
        ),
    ),
    Case(
        "incremental-alter-configs/broker-validate-only",
        (incremental(BROKER, BROKER_ID, (("log.cleaner.threads", SET, "2"),), validate_only=True),),
    ),
]

# ACL APIs
for v in (1, 2, 3):
    CASES.append(
        Case(f"create-acls/v{v}/allow-read", (create_acls(acl(), version=v), describe_acls(version=v)))
    )
CASES += [
    Case("create-acls/deny-write", (create_acls(acl(operation=WRITE, permission=DENY)), describe_acls())),
    Case("create-acls/prefixed", (create_acls(acl(pattern=4)), describe_acls())),
    Case(
        "create-acls/group",
        (
            create_acls(acl(resource_type=ACL_GROUP, name="{group}")),
            describe_acls(resource_type=ACL_GROUP, name="{group}"),
        ),
    ),
    Case(
        "create-acls/cluster-bad-name",
        (create_acls(acl(resource_type=ACL_CLUSTER, name="not-the-cluster", operation=DESCRIBE)),),
    ),
    Case("create-acls/bad-principal", (create_acls(acl(principal="alice")),)),
    Case("create-acls/any-operation", (create_acls(acl(operation=ANY_OP)),)),
    Case("create-acls/unknown-resource-type", (create_acls(acl(resource_type=1)),)),
    Case("create-acls/match-pattern", (create_acls(acl(pattern=2)),)),
    Case("create-acls/two-at-once", (create_acls(acl(), acl(operation=WRITE)), describe_acls())),
    Case("describe-acls/none", (describe_acls(),)),
    Case("describe-acls/literal-filter", (create_acls(acl(), compare=False), describe_acls(pattern=LITERAL))),
    Case(
        "delete-acls/matching",
        (create_acls(acl(), acl(operation=WRITE), compare=False), delete_acls(), describe_acls()),
    ),
    Case(
        "delete-acls/one-operation",
        (
            create_acls(acl(), acl(operation=WRITE), compare=False),
            delete_acls(operation=WRITE),
            describe_acls(),
        ),
    ),
    Case("delete-acls/nothing-matches", (delete_acls(),)),
    Case("delete-acls/v1", (create_acls(acl(), compare=False), delete_acls(version=1))),
]

# ACL denials: alice holds no ACL
DENIED: list[tuple[str, Step]] = [
    ("metadata", metadata("{topic}")),
    ("metadata-auto-create", metadata("no-{topic}", auto=True)),
    ("produce", produce()),
    ("fetch", fetch()),
    ("list-offsets", list_offsets(-1)),
    ("create-topics", create(("{topic2}", 1, 1))),
    ("delete-topics", cases_topics.delete("{topic}")),
    ("create-partitions", cases_topics.partitions(3)),
    ("delete-records", cases_data.delete_records(0)),
    ("describe-log-dirs", cases_data.log_dirs()),
    ("describe-producers", cases_data.producers()),
    ("offset-for-leader-epoch", cases_data.leader_epoch(0)),
    ("find-coordinator", coordinator(compare=True)),
    ("join-group", join(step_name="j")),
    ("offset-commit", cases_groups.commit()),
    ("offset-fetch", cases_groups.fetch_offsets()),
    ("describe-groups", cases_groups.describe()),
    ("list-groups", cases_groups.list_groups(("Stable",))),
    ("delete-groups", cases_groups.delete_groups()),
    ("offset-delete", cases_groups.offset_delete()),
    ("heartbeat", cases_groups.heartbeat(member="")),
    ("init-producer-transactional", init_producer("{txn}")),
    ("init-producer-idempotent", init_producer()),
    ("describe-transactions", cases_txn.describe_txn()),
    ("list-transactions", cases_txn.list_txn(("Ongoing",))),
    ("describe-configs", describe_configs(TOPIC, "{topic}", ("retention.ms",))),
    ("describe-broker-configs", describe_configs(BROKER, BROKER_ID, ("num.partitions",))),
    ("alter-configs", alter_configs(TOPIC, "{topic}", {"retention.ms": "1"})),
    ("incremental-alter-configs", incremental(TOPIC, "{topic}", (("retention.ms", SET, "5"),))),
    ("create-acls", create_acls(acl())),
    ("describe-acls", describe_acls()),
    ("delete-acls", delete_acls()),
    ("describe-client-quotas", quotas_describe()),
    ("alter-client-quotas", quotas_alter({"producer_byte_rate": 1024.0})),
    ("describe-scram", scram_describe()),
    ("alter-scram", scram_upsert()),
    ("elect-leaders", elect()),
    ("alter-reassignments", reassign([1])),
    ("list-reassignments", list_reassignments()),
    ("describe-cluster", describe_cluster(operations=True)),
]
for label, step in DENIED:
    CASES.append(Case(f"acl-denied/{label}", with_topic(as_alice(step))))

# ... and allowed once an ACL says so
CASES += [
    Case("acl-allowed/fetch", with_topic(create_acls(acl(), compare=False), as_alice(fetch()))),
    Case(
        "acl-allowed/produce",
        with_topic(create_acls(acl(operation=WRITE), compare=False), as_alice(produce())),
    ),
    Case(
        "acl-allowed/describe-via-read",
        with_topic(create_acls(acl(), compare=False), as_alice(metadata("{topic}"))),
    ),
    Case(
        "acl-allowed/deny-wins",
        with_topic(
            create_acls(acl(operation=ALL_OP), acl(operation=WRITE, permission=DENY), compare=False),
            as_alice(produce()),
            as_alice(fetch()),
        ),
    ),
    Case(
        "acl-allowed/prefixed",
        with_topic(
            create_acls(acl(name="t-", pattern=4, operation=DESCRIBE), compare=False),
            as_alice(list_offsets(-1)),
        ),
    ),
    Case(
        "acl-allowed/group-read",
        with_topic(
            create_acls(acl(resource_type=ACL_GROUP, name="{group}"), compare=False), as_alice(coordinator())
        ),
    ),
    Case(
        "acl-allowed/commit-needs-topic-read",
        with_topic(
            create_acls(acl(resource_type=ACL_GROUP, name="{group}"), compare=False),
            as_alice(coordinator(compare=False)),
            as_alice(cases_groups.commit()),
        ),
    ),
]

# SASL on the SASL_PLAINTEXT listener
for v in (0, 1):
    CASES.append(Case(f"sasl-handshake/v{v}/plain", (handshake("PLAIN", version=v),)))
CASES += [
    Case("sasl-handshake/unknown-mechanism", (handshake("SCRAM-SHA-256"),)),
    Case("sasl-handshake/on-plaintext", (handshake("PLAIN", user=""),)),
    Case("sasl-handshake/twice", (handshake("PLAIN"), handshake("PLAIN"))),
    Case(
        "sasl-authenticate/ok", (handshake("PLAIN"), authenticate(ALICE, ALICE_PASSWORD), metadata("{topic}"))
    ),
    Case("sasl-authenticate/v1", (handshake("PLAIN"), authenticate(ALICE, ALICE_PASSWORD, version=1))),
    Case("sasl-authenticate/bad-password", (handshake("PLAIN"), authenticate(ALICE, "wrong"))),
    Case("sasl-authenticate/unknown-user", (handshake("PLAIN"), authenticate("mallory", "x"))),
    Case("sasl-authenticate/without-handshake", (authenticate(ALICE, ALICE_PASSWORD),)),
    Case(
        "sasl/metadata-before-auth",
        (Step(ApiKey.METADATA, 12, metadata("{topic}").request, user=UNAUTHENTICATED),),
    ),
    Case(
        "sasl/api-versions-before-auth",
        (
            Step(
                ApiKey.API_VERSIONS,
                3,
                av.ApiVersionsRequest("odradek-diff", "1.0"),
                user=UNAUTHENTICATED,
                ignore=frozenset(
                    {
                        "api_keys",
                        "supported_features",
                        "finalized_features",
                        "finalized_features_epoch",
                        "zk_migration_ready",
                    }
                ),
            ),
        ),
    ),
]

# Client quotas
CASES += [
    Case("client-quotas/set-and-describe", (quotas_alter({"producer_byte_rate": 1024.0}), quotas_describe())),
    Case("client-quotas/describe-none", (quotas_describe(),)),
    Case(
        "client-quotas/remove",
        (
            quotas_alter({"consumer_byte_rate": 2048.0}),
            quotas_alter({"consumer_byte_rate": None}),
            quotas_describe(),
        ),
    ),
    Case(
        "client-quotas/validate-only",
        (quotas_alter({"producer_byte_rate": 1024.0}, validate_only=True), quotas_describe()),
    ),
    Case("client-quotas/unknown-key", (quotas_alter({"no_such_rate": 5.0}),)),
    Case("client-quotas/negative", (quotas_alter({"producer_byte_rate": -5.0}),)),
    Case("client-quotas/bad-entity-type", (quotas_alter({"producer_byte_rate": 5.0}, entity_type="team"),)),
    Case(
        "client-quotas/user-entity",
        (quotas_alter({"request_percentage": 50.0}, entity_type="user"), quotas_describe(entity_type="user")),
    ),
    Case("client-quotas/describe-bad-type", (quotas_describe(entity_type="team"),)),
]

# SCRAM credentials
CASES += [
    Case("scram/upsert-and-describe", (scram_upsert(), scram_describe())),
    Case("scram/describe-unknown", (scram_describe(),)),
    Case("scram/upsert-too-few-iterations", (scram_upsert(iterations=100),)),
    Case("scram/upsert-too-many-iterations", (scram_upsert(iterations=20000),)),
    Case("scram/upsert-unknown-mechanism", (scram_upsert(mechanism=0),)),
    Case("scram/delete", (scram_upsert(), scram_delete(), scram_describe())),
    Case("scram/delete-unknown", (scram_delete(),)),
    Case("scram/upsert-empty-user", (scram_upsert(user=""),)),
    Case("scram/both-mechanisms", (scram_upsert(), scram_upsert(mechanism=2), scram_describe())),
]

# Cluster, versions, leaders, reassignments, log dirs
CASES += [
    Case("describe-cluster/v0", (describe_cluster(0),)),
    Case("describe-cluster/v1", (describe_cluster(1),)),
    Case("describe-cluster/operations", (describe_cluster(1, operations=True),)),
    Case("elect-leaders/preferred-not-needed", with_topic(elect())),
    Case("elect-leaders/unclean", with_topic(elect(election_type=1))),
    Case("elect-leaders/unknown-topic", (elect(name="no-{topic}"),)),
    Case("elect-leaders/v0", with_topic(elect(version=0))),
    Case("elect-leaders/v1", with_topic(elect(version=1))),
    Case("reassign/same-replicas", with_topic(reassign([1]), list_reassignments())),
    Case("reassign/unknown-broker", with_topic(reassign([2]))),
    Case("reassign/duplicate-replica", with_topic(reassign([1, 1]))),
    Case("reassign/empty-replicas", with_topic(reassign([]))),
    Case("reassign/cancel-none", with_topic(reassign(None))),
    Case("reassign/unknown-topic", (reassign([1], name="no-{topic}"),)),
    Case("list-reassignments/none", with_topic(list_reassignments())),
    Case("list-reassignments/unknown-topic", (list_reassignments(name="no-{topic}"),)),
    Case("alter-log-dirs/unknown-dir", with_topic(move_log_dir("/no/such/dir"))),
    Case("alter-log-dirs/unknown-topic", (move_log_dir("/no/such/dir", name="no-{topic}"),)),
    Case("controller/leader-and-isr-stale-epoch", with_topic(leader_and_isr())),
    Case("controller/stop-replica-stale-epoch", with_topic(stop_replica())),
    Case("controller/update-metadata-stale-epoch", (update_metadata(),)),
]

# ApiVersions: the answer's error code and shape (the API ranges are compared by a case of their own)
VERSION_FIELDS = frozenset(
    {"supported_features", "finalized_features", "finalized_features_epoch", "zk_migration_ready"}
)
for v in (0, 1, 2, 3):
    CASES.append(
        Case(
            f"api-versions/v{v}/ranges",
            (
                Step(
                    ApiKey.API_VERSIONS,
                    v,
                    av.ApiVersionsRequest("odradek-diff", "1.0") if v >= 3 else av.ApiVersionsRequest(),
                    ignore=VERSION_FIELDS,
                ),
            ),
        )
    )
CASES += [
    Case(
        "api-versions/bad-client-name",
        (Step(ApiKey.API_VERSIONS, 3, av.ApiVersionsRequest("bad name!", "1.0"), ignore=VERSION_FIELDS),),
    ),
]

# APIs one broker serves and the other does not (their version ranges are the api-versions cases)
CASES += [
    Case(
        "unserved/describe-topic-partitions",
        with_topic(
            Step(
                ApiKey.DESCRIBE_TOPIC_PARTITIONS,
                0,
                lambda c: dtp.DescribeTopicPartitionsRequest(
                    topics=[dtp.DescribeTopicPartitionsRequest.TopicRequest(c.topic)]
                ),
            )
        ),
    ),
    Case(
        "unserved/consumer-group-heartbeat",
        (
            Step(
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                0,
                lambda c: cgh.ConsumerGroupHeartbeatRequest(
                    group_id=c.group,
                    rebalance_timeout_ms=30000,
                    subscribed_topic_names=[c.topic],
                    server_assignor="range",
                ),
            ),
        ),
    ),
    Case(
        "unserved/get-telemetry-subscriptions",
        (Step(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, gts.GetTelemetrySubscriptionsRequest()),),
    ),
]
