"""Kafka's ZooKeeper layout: every znode path the cluster uses, and its JSON, read and written.

Owns the mapping between odradek's values and the bytes Kafka keeps in ZooKeeper, znode for znode and
field for field, so a person who knows Kafka's ZooKeeper mode reads an odradek cluster with
`zkCli.sh` and finds what they expect:

    /cluster/id                                    {"version":"1","id":"<22-char base64 uuid>"}
    /brokers/ids/<id>             (ephemeral)      the broker's registration (endpoints, rack, ...)
    /brokers/seqid                                 its zkVersion numbers generated broker ids
    /controller                   (ephemeral)      {"version":2,"brokerid":N,"timestamp":"<ms>",...}
    /controller_epoch                              the epoch as a bare decimal
    /brokers/topics/<t>                            assignment: partitions, adding/removing, topic_id
    /brokers/topics/<t>/partitions/<p>/state       leader, leader_epoch, isr, controller_epoch
    /config/{topics,brokers,...}/<name>            {"version":1,"config":{...}}
    /config/changes/config_change_<seq>            {"version":2,"entity_path":"topics/foo"}
    /admin/delete_topics/<t>                       empty marker
    /latest_producer_id_block                      {"version":1,"broker":N,"block_start":..,"block_end":..}
    /kafka-acl/<Type>/<name>                       literal ACLs: {"version":1,"acls":[{principal,...}]}
    /kafka-acl-extended/prefixed/<Type>/<name>     prefixed ACLs, same JSON
    /kafka-acl-changes/acl_changes_<seq>           `TOPIC:foo` (a literal pattern changed)
    /kafka-acl-extended-changes/acl_changes_<seq>  {"version":1,"resourceType":..,"name":..,"patternType":..}

Behaviour: encoders write Kafka's compact JSON (numbers Kafka writes as strings stay strings);
decoders accept every version Kafka has written (a v1 topic znode without topic_id, a v1 controller
znode, a partition state without leader_recovery_state) and raise `ZNodeFormatError` naming the path's
kind on anything else, never guessing. Topic ids are Kafka's string form: the 16 bytes in URL-safe
base64 without padding.

Pure: no ZooKeeper client, no I/O. Callers: the ZooKeeper-backed controller and broker, tools, tests.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# -- paths ------------------------------------------------------------------------------------------

CLUSTER_ID_PATH = "/cluster/id"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
TOPICS_PATH = "/brokers/topics"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS_PATH = "/admin/delete_topics"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
FEATURE_PATH = "/feature"

# The persistent znodes a broker makes sure exist before it registers (Kafka's ZkData.PersistentZkPaths).
PERSISTENT_PATHS = (
    "/consumers",
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    "/admin/delete_topics",
    "/brokers/seqid",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
)

DEFAULT_ENTITY = "<default>"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def entity_config_path(entity_type: str, name: str) -> str:
    """`/config/topics/foo`, `/config/brokers/1`, `/config/brokers/<default>`, ..."""
    return f"{CONFIG_PATH}/{entity_type}/{name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


class ZNodeFormatError(ValueError):
    """A znode's data is not what Kafka writes there."""


# -- zookeeper.connect ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZooKeeperConnect:
    """`zookeeper.connect` parsed: the ensemble's host:port list and the chroot ('' for none)."""

    hosts: str
    chroot: str

    @classmethod
    def parse(cls, value: str) -> ZooKeeperConnect:
        """`host:port[,host:port...][/chroot]`; raises ValueError on an empty host list or a bad chroot."""
        hosts, slash, chroot = value.strip().partition("/")
        servers = [server.strip() for server in hosts.split(",")]
        if not all(servers):
            raise ValueError(f"zookeeper.connect {value!r} names an empty server")
        for server in servers:
            host, colon, port = server.rpartition(":")
            if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"zookeeper.connect server {server!r} is not host:port")
        chroot = (slash + chroot).rstrip("/")
        if "//" in chroot:
            raise ValueError(f"zookeeper.connect chroot {chroot!r} has an empty path element")
        return cls(",".join(servers), chroot)


# -- JSON helpers -----------------------------------------------------------------------------------


def _dump(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _load(data: bytes | None, kind: str) -> dict[str, Any]:
    try:
        value = json.loads(data or b"")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ZNodeFormatError(f"{kind} znode is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ZNodeFormatError(f"{kind} znode is not a JSON object")
    return value


def _int(value: Any, kind: str, name: str) -> int:
    """An integer Kafka writes either as a number or as a decimal string."""
    if isinstance(value, bool):
        raise ZNodeFormatError(f"{kind} znode: {name} is not an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ZNodeFormatError(f"{kind} znode: {name} is not an integer") from None


def _int_list(value: Any, kind: str, name: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ZNodeFormatError(f"{kind} znode: {name} is not a list")
    return tuple(_int(item, kind, name) for item in value)


def _str_map(value: Any, kind: str, name: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ZNodeFormatError(f"{kind} znode: {name} is not an object of strings")
    return dict(value)


def uuid_to_kafka(value: uuid.UUID) -> str:
    """Kafka's string form of a Uuid: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def uuid_from_kafka(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError):
        raise ZNodeFormatError(f"{text!r} is not a Kafka uuid") from None
    if len(raw) != 16:
        raise ZNodeFormatError(f"{text!r} is not a Kafka uuid")
    return uuid.UUID(bytes=raw)


# -- cluster and brokers ----------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    value = _load(data, "cluster id")
    cluster_id = value.get("id")
    if not isinstance(cluster_id, str) or not cluster_id:
        raise ZNodeFormatError("cluster id znode has no id")
    return cluster_id


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """`/brokers/ids/<id>`: what a live broker announces. `endpoints` are `(listener, host, port)`;
    `security_protocols` maps each listener name to its security protocol."""

    broker_id: int
    endpoints: tuple[tuple[str, str, int], ...]
    security_protocols: Mapping[str, str]
    rack: str | None = None
    timestamp_ms: int = 0
    features: Mapping[str, Any] = field(default_factory=dict)


REGISTRATION_VERSION = 5


def encode_broker_registration(broker: BrokerRegistration) -> bytes:
    plaintext = next(
        ((h, p) for name, h, p in broker.endpoints if broker.security_protocols.get(name) == "PLAINTEXT"),
        (None, -1),
    )
    value: dict[str, Any] = {
        "features": dict(broker.features),
        "listener_security_protocol_map": dict(broker.security_protocols),
        "endpoints": [f"{name}://{_host_for_url(host)}:{port}" for name, host, port in broker.endpoints],
        "jmx_port": -1,
        "port": plaintext[1],
        "host": plaintext[0],
        "version": REGISTRATION_VERSION,
        "timestamp": str(broker.timestamp_ms),
    }
    if broker.rack is not None:
        value["rack"] = broker.rack
    return _dump(value)


def decode_broker_registration(broker_id: int, data: bytes) -> BrokerRegistration:
    kind = "broker registration"
    value = _load(data, kind)
    endpoints = value.get("endpoints")
    if not isinstance(endpoints, list):
        raise ZNodeFormatError(f"{kind} znode of broker {broker_id} has no endpoints list")
    protocols = _str_map(
        value.get("listener_security_protocol_map", {}), kind, "listener_security_protocol_map"
    )
    rack = value.get("rack")
    return BrokerRegistration(
        broker_id,
        tuple(_parse_endpoint(endpoint, kind) for endpoint in endpoints),
        protocols,
        rack if isinstance(rack, str) else None,
        _int(value.get("timestamp", 0), kind, "timestamp"),
        value.get("features") or {},
    )


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _parse_endpoint(text: Any, kind: str) -> tuple[str, str, int]:
    if not isinstance(text, str) or "://" not in text:
        raise ZNodeFormatError(f"{kind} znode: endpoint {text!r} is not LISTENER://host:port")
    listener, _, address = text.partition("://")
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit():
        raise ZNodeFormatError(f"{kind} znode: endpoint {text!r} is not LISTENER://host:port")
    return listener, host.strip("[]"), int(port)


# -- controller -------------------------------------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump(
        {"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms), "kraftControllerEpoch": -1}
    )


def decode_controller(data: bytes) -> int:
    """The controller's broker id (-1 for a KRaft controller in a migration, which odradek never is)."""
    value = _load(data, "controller")
    return _int(value.get("brokerid"), "controller", "brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode().strip())
    except (ValueError, UnicodeDecodeError):
        raise ZNodeFormatError(f"controller epoch znode holds {data!r}, not a number") from None


# -- topics and partition state ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """`/brokers/topics/<t>`: replicas per partition (preferred leader first), reassignment in
    progress, and the topic id (None only in a version-1/2 znode written before topic ids)."""

    partitions: Mapping[int, tuple[int, ...]]
    topic_id: uuid.UUID | None
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


TOPIC_VERSION = 3


def encode_topic_assignment(topic: TopicAssignment) -> bytes:
    value: dict[str, Any] = {
        "version": TOPIC_VERSION,
        "partitions": _replica_map_to_json(topic.partitions),
        "adding_replicas": _replica_map_to_json(topic.adding_replicas),
        "removing_replicas": _replica_map_to_json(topic.removing_replicas),
    }
    if topic.topic_id is not None:
        value["topic_id"] = uuid_to_kafka(topic.topic_id)
    return _dump(value)


def decode_topic_assignment(data: bytes) -> TopicAssignment:
    kind = "topic"
    value = _load(data, kind)
    topic_id = value.get("topic_id")
    return TopicAssignment(
        _replica_map_from_json(value.get("partitions"), kind, "partitions"),
        uuid_from_kafka(topic_id) if isinstance(topic_id, str) else None,
        _replica_map_from_json(value.get("adding_replicas", {}), kind, "adding_replicas"),
        _replica_map_from_json(value.get("removing_replicas", {}), kind, "removing_replicas"),
    )


def _replica_map_to_json(replicas: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    return {str(index): list(brokers) for index, brokers in sorted(replicas.items())}


def _replica_map_from_json(value: Any, kind: str, name: str) -> dict[int, tuple[int, ...]]:
    if not isinstance(value, dict):
        raise ZNodeFormatError(f"{kind} znode: {name} is not an object")
    return {_int(index, kind, name): _int_list(brokers, kind, name) for index, brokers in value.items()}


@dataclass(frozen=True, slots=True)
class LeaderAndIsrZNode:
    """`.../partitions/<p>/state`. The znode's zkVersion (not stored here) is the partition epoch."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = 0


PARTITION_STATE_VERSION = 1


def encode_partition_state(state: LeaderAndIsrZNode) -> bytes:
    return _dump(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": PARTITION_STATE_VERSION,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            "leader_recovery_state": state.leader_recovery_state,
        }
    )


def decode_partition_state(data: bytes) -> LeaderAndIsrZNode:
    kind = "partition state"
    value = _load(data, kind)
    return LeaderAndIsrZNode(
        _int(value.get("leader"), kind, "leader"),
        _int(value.get("leader_epoch"), kind, "leader_epoch"),
        _int_list(value.get("isr"), kind, "isr"),
        _int(value.get("controller_epoch"), kind, "controller_epoch"),
        _int(value.get("leader_recovery_state", 0), kind, "leader_recovery_state"),
    )


# -- configs and change notifications --------------------------------------------------------------


def encode_entity_config(configs: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(configs)})


def decode_entity_config(data: bytes) -> dict[str, str]:
    kind = "config"
    return _str_map(_load(data, kind).get("config", {}), kind, "config")


def encode_config_change(entity_type: str, name: str) -> bytes:
    return _dump({"version": 2, "entity_path": f"{entity_type}/{name}"})


def decode_config_change(data: bytes) -> tuple[str, str]:
    """The (entity type, name) a `/config/changes` notification points at."""
    path = _load(data, "config change").get("entity_path")
    if not isinstance(path, str) or "/" not in path:
        raise ZNodeFormatError(f"config change znode: entity_path {path!r} is not type/name")
    entity_type, _, name = path.partition("/")
    return entity_type, name


# -- producer id blocks -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """`/latest_producer_id_block`: the last block of producer ids claimed, both ends inclusive."""

    broker_id: int
    block_start: int
    block_end: int


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dump(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    kind = "producer id block"
    value = _load(data, kind)
    return ProducerIdBlock(
        _int(value.get("broker"), kind, "broker"),
        _int(value.get("block_start"), kind, "block_start"),
        _int(value.get("block_end"), kind, "block_end"),
    )


# -- ACLs (Kafka's ZkAclStore and ZkAclChangeStore) -------------------------------------------------

LITERAL_ACL_PATH = "/kafka-acl"
PREFIXED_ACL_PATH = "/kafka-acl-extended/prefixed"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_PATHS = (LITERAL_ACL_PATH, PREFIXED_ACL_PATH, LITERAL_ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH)


def acl_root(prefixed: bool) -> str:
    return PREFIXED_ACL_PATH if prefixed else LITERAL_ACL_PATH


def acl_path(resource_type: str, name: str, prefixed: bool) -> str:
    """`/kafka-acl/Topic/foo` (literal) or `/kafka-acl-extended/prefixed/Topic/foo`; the type is
    Kafka's PascalCase name."""
    return f"{acl_root(prefixed)}/{resource_type}/{name}"


def acl_changes_path(prefixed: bool) -> str:
    return EXTENDED_ACL_CHANGES_PATH if prefixed else LITERAL_ACL_CHANGES_PATH


def encode_acls(entries: Sequence[Mapping[str, str]]) -> bytes:
    """A resource znode: `{"version":1,"acls":[{"principal","permissionType","operation","host"}]}`."""
    return _dump({"version": 1, "acls": [dict(e) for e in entries]})


def decode_acls(data: bytes) -> list[dict[str, str]]:
    kind = "acl"
    acls = _load(data, kind).get("acls", [])
    if not isinstance(acls, list):
        raise ZNodeFormatError(f"acl znode: acls {acls!r} is not a list")
    return [_str_map(entry, kind, "acls") for entry in acls]


def encode_acl_change(resource_type: str, name: str, pattern_type: str) -> bytes:
    """A change notification: literal patterns `TOPIC:foo` (Kafka's legacy form) under
    `/kafka-acl-changes`, others `{"version":1,"resourceType","name","patternType"}` under
    `/kafka-acl-extended-changes`; types and pattern types in Kafka's enum names (TOPIC, PREFIXED)."""
    if pattern_type == "LITERAL":
        return f"{resource_type}:{name}".encode()
    return _dump({"version": 1, "resourceType": resource_type, "name": name, "patternType": pattern_type})


def decode_acl_change(data: bytes, prefixed: bool) -> tuple[str, str, str]:
    """The (resource type, name, pattern type) a notification of either store names."""
    if not prefixed:
        resource_type, sep, name = data.decode("utf-8", "replace").partition(":")
        if not sep:
            raise ZNodeFormatError(f"acl change znode: {data!r} is not ResourceType:ResourceName")
        return resource_type, name, "LITERAL"
    value = _load(data, "acl change")
    parts = tuple(value.get(k) for k in ("resourceType", "name", "patternType"))
    if not all(isinstance(p, str) for p in parts):
        raise ZNodeFormatError(f"acl change znode: {value!r} lacks resourceType, name or patternType")
    return parts  # type: ignore[return-value]
