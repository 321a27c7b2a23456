"""The cost of ACL checks: the authorizer's CPU per request shape, against a Produce's CPU on a broker.

Two measurements, both in CPU time (process time), never wall time under load:
1. In-process: an `AclAuthorizer` over a local ACL store holding --acls literal topic ACLs (half
   ALLOW, half DENY, for other principals), a tenth as many PREFIXED ones and a wildcard ALLOW for
   the principal; each request shape's checks are timed over many calls: Produce (WRITE on one
   topic, plus WRITE on the transactional id for a transactional one), Fetch (READ on one topic),
   Metadata of 10 topics (DESCRIBE on each), a group's JoinGroup / Heartbeat (READ on the group);
   each cached (the decision cache hit every request after the first pays) and uncached (the
   decision computed from the ACL index: the first request of a principal and resource after a
   change).
2. Broker process: the broker CPU (user + system, /proc/<pid>/stat) per small Produce (acks=1,
   one 100-byte record, pipelined) without an authorizer and with the ACL authorizer (an ALLOW for
   User:ANONYMOUS on the topic among the --acls others), the median of --runs fresh brokers each
   (bench/metrics_overhead.py's method and helpers).
The ratio of (1)'s Produce check to (2)'s Produce cost is the figure issue 26 asks for (aim: under
2%); (2)'s difference shows it end to end.

Run `PYTHONPATH=src python bench/acl_check.py [--acls 1000] [--calls 200000] [--requests 20000]
[--runs 3]`. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from metrics_overhead import TOPIC, frame, per_request_cpu_us, read_frames

from odradek.clock import SYSTEM_CLOCK
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages.create_topics import CreateTopicsRequest
from odradek.protocol.messages.produce import ProduceRequest
from odradek.protocol.records.builder import SimpleRecord, build_batch
from odradek.scheduler import Scheduler
from odradek.security.acl_authorizer import AclAuthorizer
from odradek.security.acl_store import LocalAclStore
from odradek.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from odradek.security.authorizer import AclOperation, Resource, ResourceType
from odradek.security.principal import KafkaPrincipal
from odradek.testing.broker import BrokerProcess

PRINCIPAL = "User:ANONYMOUS"
OP = AclOperation


def bindings(count: int) -> list[AclBinding]:
    """`count` literal topic ACLs of other principals, count/10 prefixed, and the principal's ALLOWs."""
    made = []
    for i in range(count):
        permission = AclPermissionType.ALLOW if i % 2 else AclPermissionType.DENY
        entry = AccessControlEntry(f"User:u{i}", "*", OP.WRITE, permission)
        made.append(AclBinding(ResourcePattern(ResourceType.TOPIC, f"topic-{i}"), entry))
    for i in range(count // 10):
        entry = AccessControlEntry(f"User:u{i}", "*", OP.READ, AclPermissionType.ALLOW)
        made.append(
            AclBinding(ResourcePattern(ResourceType.TOPIC, f"team-{i}-", PatternType.PREFIXED), entry)
        )
    for resource_type in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID):
        entry = AccessControlEntry(PRINCIPAL, "*", OP.ALL, AclPermissionType.ALLOW)
        made.append(AclBinding(ResourcePattern(resource_type, "*"), entry))
    return made


def loaded_authorizer(root: Path, count: int) -> AclAuthorizer:
    async def load() -> AclAuthorizer:
        store = LocalAclStore(root, Scheduler(SYSTEM_CLOCK))
        authorizer = AclAuthorizer((), False)
        authorizer.attach(store)
        await store.add(bindings(count))
        return authorizer

    return asyncio.run(load())


def shapes(authorizer: AclAuthorizer) -> dict[str, Callable[[object], None]]:
    """Each request shape's checks, as the handlers make them."""
    topic = Resource(ResourceType.TOPIC, "orders")
    group = Resource(ResourceType.GROUP, "readers")
    txn = Resource(ResourceType.TRANSACTIONAL_ID, "tx-1")
    metadata_topics = [Resource(ResourceType.TOPIC, f"orders-{i}") for i in range(10)]
    check = authorizer.authorize
    return {
        "Produce (WRITE on 1 topic)": lambda ctx: check(ctx, OP.WRITE, topic),  # type: ignore[arg-type]
        "transactional Produce (+ WRITE on the id)": lambda ctx: (
            check(ctx, OP.WRITE, txn),  # type: ignore[arg-type]
            check(ctx, OP.WRITE, topic),  # type: ignore[arg-type]
        ),
        "Fetch (READ on 1 topic)": lambda ctx: check(ctx, OP.READ, topic),  # type: ignore[arg-type]
        "Metadata (DESCRIBE on 10 topics)": lambda ctx: [
            check(ctx, OP.DESCRIBE, t, False)  # type: ignore[arg-type]
            for t in metadata_topics
        ],
        "Heartbeat (READ on the group)": lambda ctx: check(ctx, OP.READ, group),  # type: ignore[arg-type]
    }


def cpu_us_per_call(
    shape: Callable[[object], None], ctx: object, calls: int, clear: Callable[[], None]
) -> float:
    start = time.process_time()
    for _ in range(calls):
        clear()
        shape(ctx)
    return (time.process_time() - start) / calls * 1e6


def in_process(count: int, calls: int) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory() as root:
        authorizer = loaded_authorizer(Path(root), count)
    ctx = SimpleNamespace(
        principal=KafkaPrincipal("User", "ANONYMOUS"),
        client_host="127.0.0.1",
        header=RequestHeader(ApiKey.PRODUCE, 9, 1, "bench"),
    )
    baseline = cpu_us_per_call(lambda _ctx: None, ctx, calls, lambda: None)
    results = {}
    for name, shape in shapes(authorizer).items():
        cached = cpu_us_per_call(shape, ctx, calls, lambda: None) - baseline
        uncached = cpu_us_per_call(shape, ctx, calls // 10, authorizer._decisions.clear) - baseline
        results[name] = (cached, uncached)
    return results


def produce_cpu_us(requests: int, acls: int | None) -> float:
    """Broker CPU per small Produce: no authorizer (`acls` None), or the ACL authorizer over an ACL
    file of `bindings(acls)` written in the log dir before the broker starts."""
    with tempfile.TemporaryDirectory() as root:
        data = Path(root) / "data"
        overrides: dict[str, object] = {}
        if acls is not None:
            loaded_authorizer(data, acls)
            overrides["authorizer.class.name"] = "odradek.security.AclAuthorizer"
        with (
            BrokerProcess(data, overrides=overrides) as broker,
            socket.create_connection((broker.host, broker.port)) as sock,
        ):
            assert broker.pid is not None
            topic = CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)
            sock.sendall(
                frame(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(topics=[topic], timeout_ms=10000), 1)
            )
            read_frames(sock, 1)
            data_entry = ProduceRequest.PartitionProduceData(
                index=0, records=build_batch([SimpleRecord(bytes(100))])
            )
            produce = ProduceRequest(
                acks=1,
                timeout_ms=10000,
                topic_data=[ProduceRequest.TopicProduceData(TOPIC, partition_data=[data_entry])],
            )
            produce_frame = frame(ApiKey.PRODUCE, 9, produce, 2)
            per_request_cpu_us(sock, broker.pid, produce_frame, requests // 10)  # warm-up
            return per_request_cpu_us(sock, broker.pid, produce_frame, requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--acls", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    checks = in_process(args.acls, args.calls)
    print(f"authorize() CPU per request shape, {args.acls} literal + {args.acls // 10} prefixed ACLs:")
    for name, (cached, uncached) in checks.items():
        print(f"  {name:45s} cached {cached:6.2f} us   uncached {uncached:6.2f} us")
    plain = [produce_cpu_us(args.requests, None) for _ in range(args.runs)]
    secured = [produce_cpu_us(args.requests, args.acls) for _ in range(args.runs)]
    produce = statistics.median(plain)
    print(f"broker CPU per Produce (acks=1, 1 record), median of {args.runs} runs:")
    print(f"  no authorizer {produce:7.1f} us   runs: {', '.join(f'{r:.1f}' for r in plain)}")
    runs = ", ".join(f"{r:.1f}" for r in secured)
    print(f"  ACL authorizer {statistics.median(secured):6.1f} us   runs: {runs}")
    check = checks["Produce (WRITE on 1 topic)"][0]
    print(f"the Produce check (cached) is {check / produce * 100:.2f}% of a Produce's broker CPU")


if __name__ == "__main__":
    main()
