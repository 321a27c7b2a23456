"""The handler registry: one module per Kafka API, listed in `HANDLER_MODULES`.

Every module `odradek.server.handlers.<name>` defines `API_KEY`, `MIN_VERSION`, `MAX_VERSION`,
`async def handle(ctx, request) -> response | None` (None: send nothing; raising
`odradek.server.socket_server.CloseConnection`: drop the client; raising `KafkaError`: answer with the
error response), and optionally `def error_response(request, version, code) -> response`. Adding a
module name here adds the API: the dispatcher routes to it and ApiVersions advertises its range.

Mode-dependent APIs: a module with `ZK_BROKER_ONLY = True` (Kafka's `"listeners": ["zkBroker"]`: the
controller-to-broker APIs LeaderAndIsr, UpdateMetadata, StopReplica and the broker-to-controller
APIs AlterPartition, ControlledShutdown) is served only by a broker with `zookeeper.connect` set.
`registry(zookeeper_mode)` gives the set of one mode; a single-node broker neither routes nor
advertises these APIs, so a request for one is an unknown API to it and its connection is closed, as
a Kafka broker closes the connection of a request for an API its mode does not enable.

Invariant: a listed module that is not written yet is skipped with a warning, so the broker starts
with whatever exists. Two modules may not claim one API key. Callers: the dispatcher and the
ApiVersions handler, through `registry()` / `registry_for()`.
"""

from __future__ import annotations

import functools
import importlib
import logging
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.server.config import KafkaConfig

log = logging.getLogger(__name__)

HANDLER_MODULES: list[str] = [
    "api_versions",
    "metadata",
    "describe_topic_partitions",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "describe_cluster",
    "elect_leaders",
    "alter_configs",
    "incremental_alter_configs",
    "alter_replica_log_dirs",
    "describe_log_dirs",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "describe_client_quotas",
    "alter_client_quotas",
    # data path
    "produce",
    "fetch",
    "list_offsets",
    "offset_for_leader_epoch",
    "init_producer_id",
    "delete_records",
    "write_txn_markers",
    # transactions
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "txn_offset_commit",
    "describe_transactions",
    "list_transactions",
    "describe_producers",
    # SASL (the exchanges themselves are the SASL gate's: server/sasl_authenticator.py)
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    # consumer groups
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "describe_groups",
    "list_groups",
    "delete_groups",
    "offset_delete",
    # consumer-protocol groups (KIP-848)
    "consumer_group_heartbeat",
    "consumer_group_describe",
    # share groups (KIP-932): membership on the group coordinator
    "share_group_heartbeat",
    "share_group_describe",
    "describe_share_group_offsets",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
    # share groups (KIP-932): the partition leaders' data path
    "share_fetch",
    "share_acknowledge",
    # the share coordinator (inter-broker)
    "initialize_share_group_state",
    "read_share_group_state",
    "write_share_group_state",
    "delete_share_group_state",
    "read_share_group_state_summary",
    # ACLs
    "describe_acls",
    "create_acls",
    "delete_acls",
    # controller to broker (ZooKeeper mode only)
    "leader_and_isr",
    "update_metadata",
    "stop_replica",
    # broker to controller (ZooKeeper mode only)
    "alter_partition",
    "controlled_shutdown",
]


def load_handlers(names: list[str]) -> dict[int, ModuleType]:
    """Import the named handler modules, keyed by API key, skipping the ones that do not exist."""
    handlers: dict[int, ModuleType] = {}
    for name in names:
        qualified = f"{__name__}.{name}"
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as exc:
            if exc.name != qualified:
                raise
            log.warning("Handler module %s is listed but does not exist; its API is not served", name)
            continue
        if module.API_KEY in handlers:
            raise RuntimeError(
                f"{name} and {handlers[module.API_KEY].__name__} both claim API {module.API_KEY}"
            )
        handlers[int(module.API_KEY)] = module
    return handlers


@functools.cache
def _all_handlers() -> dict[int, ModuleType]:
    return load_handlers(HANDLER_MODULES)


@functools.cache
def registry(zookeeper_mode: bool = False) -> dict[int, ModuleType]:
    """The handlers of `HANDLER_MODULES` a broker of this mode serves, loaded once per process."""
    return {
        key: module
        for key, module in _all_handlers().items()
        if zookeeper_mode or not getattr(module, "ZK_BROKER_ONLY", False)
    }


def registry_for(config: KafkaConfig) -> dict[int, ModuleType]:
    """The handlers a broker with `config` serves: ZooKeeper mode when zookeeper.connect is set."""
    return registry(config.zookeeper_connect is not None)
