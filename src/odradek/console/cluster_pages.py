"""The console's cluster pages: the overview (`/`: cluster id, controller, brokers and counts), the
topic list (`/topics`) and a topic's partitions (`/topic?name=`), each with sizes from every
broker's DescribeLogDirs.

Callers: console/web.py (AREAS).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from odradek.console.reader import ClusterReader, Partition, ReplicaSizes, Topic
from odradek.console.web import NotFound, page

routes = web.RouteTableDef()


@dataclass(frozen=True)
class TopicRow:
    """A topic as the topic list shows it."""

    topic: Topic
    replicas: int  # the replication factor (the most replicas of a partition)
    end_offsets: int
    size: int  # bytes of the partitions' leader replicas: what a consumer reads
    on_disk: int  # bytes of every replica

    @classmethod
    def of(cls, topic: Topic, sizes: ReplicaSizes) -> TopicRow:
        by_partition = [sizes.get((topic.name, p.index), {}) for p in topic.partitions]
        return cls(
            topic,
            max((len(p.replicas) for p in topic.partitions), default=0),
            sum(max(p.end, 0) for p in topic.partitions),
            sum(s.get(p.leader, 0) for p, s in zip(topic.partitions, by_partition, strict=True)),
            sum(sum(s.values()) for s in by_partition),
        )


@dataclass(frozen=True)
class PartitionRow:
    """A partition as a topic's page shows it."""

    partition: Partition
    size: int | None  # its leader replica's bytes
    replica_sizes: str  # "broker: bytes, ..."


def setup(app: web.Application) -> None:
    app.router.add_routes(routes)


@routes.get("/")
async def overview(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    cluster = await ctx.run(ClusterReader.cluster, offsets=False)
    groups = await ctx.run(ClusterReader.groups)
    return ctx.render(
        "cluster/overview.html",
        title="Cluster",
        cluster=cluster,
        partitions=sum(len(t.partitions) for t in cluster.topics),
        under_replicated=sum(t.under_replicated for t in cluster.topics),
        groups=len(groups),
    )


@routes.get("/topics")
async def topics(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    cluster = await ctx.run(ClusterReader.cluster)
    sizes = await ctx.run(ClusterReader.replica_sizes)
    rows = [TopicRow.of(t, sizes) for t in cluster.topics]
    return ctx.render("cluster/topics.html", title="Topics", rows=rows)


@routes.get("/topic")
async def topic(request: web.Request) -> web.StreamResponse:
    ctx = page(request)
    name = request.query.get("name", "")
    cluster = await ctx.run(ClusterReader.cluster)
    found = next((t for t in cluster.topics if t.name == name), None)
    if found is None:
        raise NotFound(f"There is no topic named {name!r}.")
    sizes = await ctx.run(ClusterReader.replica_sizes)
    rows = [
        PartitionRow(
            p,
            sizes.get((name, p.index), {}).get(p.leader),
            ", ".join(f"{b}: {n}" for b, n in sorted(sizes.get((name, p.index), {}).items())) or "-",
        )
        for p in found.partitions
    ]
    return ctx.render("cluster/topic.html", title=f"Topic {name}", topic=found, rows=rows)
