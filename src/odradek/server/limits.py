"""Process limits of a broker: its open-file budget and the connection limits its listeners enforce.

Owns three computations, each a small pure function over numbers the caller passes in (or, for the
`*_for_config` helpers, reads from the process once):
- `raise_open_file_limit()`: at start the broker raises its soft RLIMIT_NOFILE to the hard limit (to
  /proc/sys/fs/nr_open when the hard limit is unlimited) and logs both, as a Kafka deployment does
  with `ulimit -n`.
- `descriptor_budget(open_files, max_connections)`: how the soft limit is shared. PROCESS_RESERVE (64)
  descriptors stay for the process itself (stdio, the event loop's epoll and self-pipe, listening
  sockets, log output, checkpoint and meta.properties temp files, one accepted socket being refused);
  at least a quarter of the rest, never fewer than MIN_STORAGE_FILES (128), stays for storage (segment
  .log files, recovery, cleaner copies); client connections get what is left, or `max.connections` if
  that is smaller, and storage then gets everything the connections do not take. So client
  connections can never take the descriptors checkpoints, segment rolls and recovery need: the
  listeners never accept more than `max_client_connections`. `max_open_files` is the number to give
  the LogManager's cache of open segment files.
- `connection_limits(config)`: the `ConnectionLimits` value server/socket_server.py enforces, from Kafka's
  configs (`socket.request.max.bytes`, `queued.max.requests`, `queued.max.request.bytes`,
  `max.connections` capped by the budget, `max.connections.per.ip` and its overrides with host names
  resolved once here, `max.connection.creation.rate`, `connections.max.idle.ms`).

Also `release_free_memory()`: glibc's malloc_trim(0), which gives freed heap pages back to the
kernel; server/socket_server.py calls it (in a worker thread) after a flood of large receive buffers.

Callers: cli/serve.py (raise_open_file_limit, at start), kafka_server.py (connection_limits, for the
SocketServer; descriptor_budget_for_config(config).max_open_files is the LogManager's budget).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import logging
import resource
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from odradek.server.config import KafkaConfig, parse_connection_overrides

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
PROCESS_RESERVE = 64
MIN_STORAGE_FILES = 128
_NR_OPEN = Path("/proc/sys/fs/nr_open")


@dataclass(frozen=True, slots=True)
class OpenFileLimit:
    """RLIMIT_NOFILE before and after `raise_open_file_limit`."""

    soft_before: int
    soft: int
    hard: int


@dataclass(frozen=True, slots=True)
class DescriptorBudget:
    """How the soft open-file limit is shared between the process, client connections and storage."""

    open_files: int
    process_reserve: int
    max_client_connections: int
    max_open_files: int


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What the listeners enforce (Kafka's defaults: no limit but the request size)."""

    max_request_size: int = 104857600
    max_queued_requests: int = 500
    queued_max_request_bytes: int = -1
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    max_connection_creation_rate: int = INT_MAX
    connections_max_idle_ms: int = 600000

    def max_for_ip(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)


def raise_open_file_limit() -> OpenFileLimit:
    """Raise the soft RLIMIT_NOFILE to the hard limit and log both."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else _nr_open()
    if soft == resource.RLIM_INFINITY or soft >= target:
        limit = OpenFileLimit(soft, soft, hard)
    else:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            limit = OpenFileLimit(soft, target, hard)
        except (ValueError, OSError) as exc:
            log.warning("Could not raise the open file limit from %d to %d: %s", soft, target, exc)
            limit = OpenFileLimit(soft, soft, hard)
    log.info(
        "Open file limit (RLIMIT_NOFILE): soft %d (was %d), hard %s",
        limit.soft,
        limit.soft_before,
        "unlimited" if hard == resource.RLIM_INFINITY else hard,
    )
    return limit


def _nr_open() -> int:
    try:
        return int(_NR_OPEN.read_text())
    except (OSError, ValueError):
        return 1 << 20


def current_open_file_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _nr_open() if soft == resource.RLIM_INFINITY else soft


def descriptor_budget(open_files: int, max_connections: int = INT_MAX) -> DescriptorBudget:
    """Share `open_files` descriptors: PROCESS_RESERVE for the process, the rest between client
    connections (at most `max_connections`) and storage (at least a quarter, at least
    MIN_STORAGE_FILES)."""
    usable = max(open_files - PROCESS_RESERVE, 0)
    storage_floor = min(usable, max(MIN_STORAGE_FILES, usable // 4))
    connections = max(min(max_connections, usable - storage_floor), 0)
    return DescriptorBudget(open_files, PROCESS_RESERVE, connections, usable - connections)


def descriptor_budget_for_config(config: KafkaConfig) -> DescriptorBudget:
    """The budget of this process's current soft limit under the config's `max.connections`."""
    return descriptor_budget(current_open_file_limit(), config["max.connections"])


def connection_limits(config: KafkaConfig) -> ConnectionLimits:
    """The limits the listeners enforce, from the config and this process's descriptor budget."""
    budget = descriptor_budget_for_config(config)
    max_connections = config["max.connections"]
    if budget.max_client_connections < max_connections:
        log.info(
            "Client connections limited to %d (max.connections %d) so that %d of the %d file "
            "descriptors stay for storage and %d for the process",
            budget.max_client_connections,
            max_connections,
            budget.max_open_files,
            budget.open_files,
            budget.process_reserve,
        )
    return ConnectionLimits(
        max_request_size=config.socket_request_max_bytes,
        max_queued_requests=config["queued.max.requests"],
        queued_max_request_bytes=config["queued.max.request.bytes"],
        max_connections=budget.max_client_connections,
        max_connections_per_ip=config["max.connections.per.ip"],
        per_ip_overrides=resolve_overrides(
            parse_connection_overrides(config["max.connections.per.ip.overrides"])
        ),
        max_connection_creation_rate=config["max.connection.creation.rate"],
        connections_max_idle_ms=config["connections.max.idle.ms"],
    )


def resolve_overrides(overrides: dict[str, int]) -> dict[str, int]:
    """Per-ip overrides keyed by IP address: a host name counts for each address it resolves to (as
    Kafka resolves it once, at start); a name that does not resolve is logged and left out."""
    resolved: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as exc:
            log.warning(
                "max.connections.per.ip.overrides: cannot resolve %s (%s), override unused", host, exc
            )
            continue
        for info in infos:
            resolved[normalize_ip(str(info[4][0]))] = count
    return resolved


def normalize_ip(address: str) -> str:
    """An IPv4-mapped IPv6 address (a dual-stack listener's view of an IPv4 client) as plain IPv4."""
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _load_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _load_malloc_trim()


def release_free_memory() -> None:
    """Give the heap's free pages back to the kernel (glibc malloc_trim); a no-op elsewhere."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
