"""RequestContext: what a handler knows about the request it serves besides its body.

Owns the `RequestContext` value handed to every `handle(ctx, request)`: the parsed request header
(api key, api version, correlation id, client id), the broker as `BrokerServices` (what handlers,
the dispatcher and the metrics may use of it: config, metadata cache and store, admin manager,
controller, replica manager, coordinators, fetch sessions, client quotas, scheduler, authorizer;
server/kafka_server.py's
`KafkaServer` is the one implementation), and the connection the request came
on, as the network layer set it at accept: the client's host, the name of the listener it arrived
on (answers name that listener's endpoints), that listener's security protocol (PLAINTEXT) and the
connection's principal (`KafkaPrincipal`, User:ANONYMOUS on PLAINTEXT). The authorizer and quota
hooks of the request path see it too (security/authorizer.py, server/client_quotas.py).

Callers: the dispatcher builds one per request; handlers read it and never keep it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from odradek.protocol.headers import RequestHeader
from odradek.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from odradek.clock import Clock
    from odradek.controller.admin import AdminManager
    from odradek.controller.controller import Controller
    from odradek.controller.metadata import TopicMetadata
    from odradek.controller.producer_ids import ProducerIdManager
    from odradek.controller.store import MetadataStore
    from odradek.coordinator.coordinator import GroupCoordinator
    from odradek.coordinator.share_coordinator import ShareCoordinator
    from odradek.coordinator.txn_coordinator import TransactionCoordinator
    from odradek.replication.replica_manager import ReplicaManager
    from odradek.replication.txn_verification import TxnVerifier
    from odradek.replication.types import TopicPartition, TxnMarker
    from odradek.scheduler import Scheduler
    from odradek.security.authorizer import Authorizer
    from odradek.server.client_quotas import ClientQuotas
    from odradek.server.config import KafkaConfig
    from odradek.server.control_plane import ControlPlane
    from odradek.server.controller_contact import ControllerContact
    from odradek.server.fetch_session import FetchSessionCache
    from odradek.server.metadata_cache import MetadataCache
    from odradek.server.share_partitions import SharePartitionManager
    from odradek.storage.manager import LogManager


class BrokerServices(Protocol):
    """What the request path and the metrics use of the broker (`KafkaServer` implements it)."""

    broker_id: int
    cluster_id: str
    config: KafkaConfig
    clock: Clock
    scheduler: Scheduler
    store: MetadataStore
    admin: AdminManager
    controller: Controller | None
    control_plane: ControlPlane
    controller_contact: ControllerContact | None  # ZooKeeper mode only
    metadata_cache: MetadataCache
    log_manager: LogManager
    replica_manager: ReplicaManager
    fetch_sessions: FetchSessionCache
    group_coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator
    share_coordinator: ShareCoordinator
    share_partitions: SharePartitionManager
    txn_verifier: TxnVerifier
    producer_id_manager: ProducerIdManager
    authorizer: Authorizer
    quotas: ClientQuotas

    async def wait_for_leaders(self, name: str, partitions: Iterable[int], timeout_s: float) -> bool: ...

    async def wait_for_deletion(self, name: str, timeout_s: float) -> bool: ...

    async def auto_create_topic(self, name: str) -> TopicMetadata | None: ...

    async def write_txn_markers(
        self, marker: TxnMarker, keys: Iterable[TopicPartition], timeout_ms: int
    ) -> dict[TopicPartition, int]: ...


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    broker: BrokerServices
    client_host: str
    listener: str
    security_protocol: str
    principal: KafkaPrincipal

    @property
    def api_version(self) -> int:
        return self.header.api_version
