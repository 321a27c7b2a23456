"""The web console's HTML: server-rendered pages, one stylesheet and one small script inline, no file
or address outside the page (it works without internet access).

Owns the markup of each page (overview, topics, one topic, groups, one group with its lag chart,
the message browser), the lag chart (an inline SVG polyline drawn here), and how bytes are shown:
as text when they are UTF-8, else as hex. Every value from the cluster is HTML-escaped.

Callers: console/app.py.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from html import escape
from urllib.parse import urlencode

from odradek.client import TopicPartition
from odradek.client.group_admin import GroupListing, GroupReport
from odradek.console.reader import ClientQuota, Cluster, Message, ReplicaSizes, Topic

CHART_WIDTH, CHART_HEIGHT = 640, 160
STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
nav{background:#243b53;padding:.6em 1em}nav a{color:#fff;margin-right:1.2em;text-decoration:none}
main{padding:1em}table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccd;padding:.25em .6em;text-align:left;font-size:.9em;vertical-align:top}
th{background:#eef}td.num{text-align:right;font-variant-numeric:tabular-nums}
.warn{color:#b00;font-weight:bold}.hex{font-family:monospace;color:#555}
svg{border:1px solid #ccd;background:#fafbff}form input{margin-right:.8em}
"""
SCRIPT = """
const box = document.getElementById('refresh');
box.checked = localStorage.getItem('odradek-refresh') === 'on';
box.onchange = () => localStorage.setItem('odradek-refresh', box.checked ? 'on' : 'off');
setTimeout(() => { if (box.checked) location.reload(); }, 5000);
"""


def layout(title: str, body: str) -> bytes:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{escape(title)} - odradek</title><style>{STYLE}</style></head><body>"
        "<nav><a href='/'>Cluster</a><a href='/topics'>Topics</a><a href='/groups'>Consumer groups</a>"
        "<a href='/messages'>Messages</a><a href='/quotas'>Quotas</a>"
        "<label style='color:#fff;float:right'><input type='checkbox' id='refresh'> refresh every 5 s</label>"
        f"</nav><main><h1>{escape(title)}</h1>{body}</main><script>{SCRIPT}</script></body></html>"
    ).encode()


def table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Iterable[int] = ()) -> str:
    """Cells are HTML already (escape values with `escape` or `link`)."""
    right = set(numeric)
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f"<td class='num'>{c}</td>" if i in right else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def link(path: str, text: object, **query: object) -> str:
    target = path + ("?" + urlencode(query) if query else "")
    return f"<a href='{escape(target)}'>{escape(str(text))}</a>"


def ids(nodes: Iterable[int]) -> str:
    return escape(", ".join(str(n) for n in nodes))


def overview_page(cluster: Cluster, groups: int) -> bytes:
    brokers = table(
        ["Broker", "Host", "Port", "Rack", "Role"],
        (
            [
                str(b.node_id),
                escape(b.host),
                str(b.port),
                escape(b.rack or "-"),
                "controller" if b.node_id == cluster.controller_id else "",
            ]
            for b in cluster.brokers
        ),
    )
    partitions = sum(len(t.partitions) for t in cluster.topics)
    under = sum(t.under_replicated for t in cluster.topics)
    facts = table(
        [
            "Cluster id",
            "Controller",
            "Brokers",
            "Topics",
            "Partitions",
            "Under-replicated",
            "Consumer groups",
        ],
        [
            [
                escape(cluster.cluster_id or "-"),
                str(cluster.controller_id),
                str(len(cluster.brokers)),
                str(len(cluster.topics)),
                str(partitions),
                _warn(under),
                str(groups),
            ]
        ],
    )
    return layout("Cluster", facts + "<h2>Brokers</h2>" + brokers)


def topics_page(cluster: Cluster, sizes: ReplicaSizes) -> bytes:
    """Every topic; its size is that of its partitions' leader replicas (what a consumer reads), on
    disk that of all its replicas (DescribeLogDirs)."""
    rows = (
        [
            link("/topic", t.name, name=t.name) + (" (internal)" if t.internal else ""),
            str(len(t.partitions)),
            str(max((len(p.replicas) for p in t.partitions), default=0)),
            str(sum(max(p.end, 0) for p in t.partitions)),
            _warn(t.under_replicated),
            str(sum(sizes.get((t.name, p.index), {}).get(p.leader, 0) for p in t.partitions)),
            str(sum(sum(sizes.get((t.name, p.index), {}).values()) for p in t.partitions)),
        ]
        for t in cluster.topics
    )
    header = ["Topic", "Partitions", "Replicas", "End offsets (sum)", "Under-replicated"]
    return layout(
        "Topics", table([*header, "Size (bytes)", "On disk, all replicas (bytes)"], rows, (1, 2, 3, 4, 5, 6))
    )


def topic_page(topic: Topic, sizes: ReplicaSizes) -> bytes:
    """The partitions of `topic`, each with the size of its leader replica and of every replica."""
    rows = (
        [
            str(p.index),
            str(p.leader),
            ids(p.replicas),
            ids(p.isr)
            + (" <span class='warn'>under-replicated</span>" if len(p.isr) < len(p.replicas) else ""),
            str(p.start),
            str(p.end),
            _or_dash(sizes.get((topic.name, p.index), {}).get(p.leader)),
            ", ".join(f"{b}: {n}" for b, n in sorted(sizes.get((topic.name, p.index), {}).items())) or "-",
            link("/messages", "browse", topic=topic.name, partition=p.index, offset=max(p.start, 0)),
        ]
        for p in topic.partitions
    )
    header = ["Partition", "Leader", "Replicas", "ISR", "Start offset", "End offset", "Size (bytes)"]
    return layout(
        f"Topic {topic.name}", table([*header, "Replica sizes by broker", ""], rows, (0, 1, 4, 5, 6))
    )


def groups_page(groups: Sequence[GroupListing], lags: dict[str, int | None]) -> bytes:
    rows = (
        [
            link("/group", g.group_id, id=g.group_id),
            escape(g.group_type.capitalize()),
            escape(g.state),
            _or_dash(lags.get(g.group_id)),
        ]
        for g in groups
    )
    return layout("Consumer groups", table(["Group", "Type", "State", "Lag (sum)"], rows, (3,)))


def group_page(group_id: str, report: GroupReport, history: Sequence[tuple[float, int]]) -> bytes:
    """A group's members, lag per partition and total lag; for a group of the consumer protocol
    (KIP-848) also its epochs, and each member's epoch and the target assignment it reconciles to."""
    kip848 = report.consumer_protocol
    member_table = table(
        [
            "Member",
            "Client id",
            "Host",
            "Assigned partitions",
            *(["Epoch", "Target partitions"] if kip848 else []),
        ],
        (
            [
                escape(m.member_id),
                escape(m.client_id),
                escape(m.host),
                escape(", ".join(map(str, m.partitions))),
                *([_or_dash(m.member_epoch), escape(", ".join(map(str, m.target)))] if kip848 else []),
            ]
            for m in sorted(report.members, key=lambda m: m.member_id)
        ),
    )
    offsets = table(
        ["Topic", "Partition", "Committed", "End offset", "Lag", "Member"],
        (
            [
                escape(row.tp.topic),
                str(row.tp.partition),
                _or_dash(row.committed),
                _or_dash(row.log_end_offset),
                _or_dash(row.lag),
                escape(row.consumer_id),
            ]
            for row in report.rows
            if row.tp is not None
        ),
        (1, 2, 3, 4),
    )
    protocol = (
        f"consumer (KIP-848), assignor <b>{escape(report.protocol)}</b>, group epoch {report.group_epoch}, "
        f"target assignment epoch {report.assignment_epoch}"
        if kip848
        else f"classic, assignment strategy <b>{escape(report.protocol or '-')}</b>"
    )
    body = (
        f"<p>State: <b>{escape(report.state)}</b></p><p>Protocol: {protocol}</p>"
        f"<h2>Members</h2>{member_table}"
        f"<h2>Lag per partition</h2>{offsets}<h2>Total lag, last minutes</h2>{lag_chart(history)}"
    )
    return layout(f"Consumer group {group_id}", body)


def lag_chart(history: Sequence[tuple[float, int]]) -> str:
    """An SVG line of (time, lag) samples, time left to right, 0 at the bottom."""
    if not history:
        return "<p>No samples yet.</p>"
    start, end = history[0][0], max(history[-1][0], history[0][0] + 1)
    top = max(max(lag for _, lag in history), 1)
    points = " ".join(
        f"{(t - start) / (end - start) * (CHART_WIDTH - 20) + 10:.1f},"
        f"{CHART_HEIGHT - 10 - lag / top * (CHART_HEIGHT - 20):.1f}"
        for t, lag in history
    )
    span = f"{int(end - start)} s"
    return (
        f"<svg id='lag-chart' width='{CHART_WIDTH}' height='{CHART_HEIGHT}' role='img' "
        f"aria-label='total lag over the last {span}'>"
        f"<polyline fill='none' stroke='#d9480f' stroke-width='2' points='{points}'/>"
        f"<text x='12' y='16' font-size='12'>max {top}</text>"
        f"<text x='12' y='{CHART_HEIGHT - 14}' font-size='12'>0 ({len(history)} samples over {span})</text>"
        "</svg>"
    )


def messages_page(form: dict[str, str], messages: Sequence[Message] | None, error: str | None) -> bytes:
    fields = "".join(
        f"<label>{label} <input name='{name}' value='{escape(form.get(name, ''))}' size='{size}'></label>"
        for label, name, size in (
            ("Topic", "topic", 24),
            ("Partition", "partition", 4),
            ("From offset", "offset", 8),
            ("or from time (ISO, UTC)", "time", 20),
            ("Limit", "limit", 4),
        )
    )
    body = f"<form method='get' action='/messages'>{fields}<button>Show</button></form>"
    if error is not None:
        body += f"<p class='warn'>{escape(error)}</p>"
    if messages is not None:
        rows = (
            [
                str(m.offset),
                escape(_time(m.timestamp)),
                show_bytes(m.key),
                show_bytes(m.value),
                "<br>".join(f"{escape(k)}: {show_bytes(v)}" for k, v in m.headers),
            ]
            for m in messages
        )
        body += f"<p>{len(messages)} records</p>" + table(
            ["Offset", "Timestamp", "Key", "Value", "Headers"], rows, (0,)
        )
    return layout("Messages", body)


def show_bytes(data: bytes | None) -> str:
    """Text when UTF-8, hex otherwise; `null` for a missing key or value."""
    if data is None:
        return "<i>null</i>"
    try:
        return escape(data.decode("utf-8"))
    except UnicodeDecodeError:
        return f"<span class='hex'>0x{data.hex()}</span>"


def _time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")


def _or_dash(value: float | None) -> str:
    return "-" if value is None else str(value)


def _warn(count: int) -> str:
    return f"<span class='warn'>{count}</span>" if count else "0"


def _partitions(partitions: Sequence[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in partitions)


QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")


def quotas_page(quotas: Sequence[ClientQuota]) -> bytes:
    """The client quotas: one row per entity (user, client id; `<default>` for a default)."""

    def name(entity: dict[str, str | None], kind: str) -> str:
        if kind not in entity:
            return ""
        value = entity[kind]
        return "&lt;default&gt;" if value is None else escape(value)

    rows = [
        [name(q.entity, "user"), name(q.entity, "client-id")]
        + [_or_dash(_number(q.values.get(key))) for key in QUOTA_KEYS]
        for q in quotas
    ]
    body = table(["User", "Client id", *QUOTA_KEYS], rows, (2, 3, 4, 5))
    if not quotas:
        body = (
            "<p>No client quotas are set (odradek configs --alter --add-config producer_byte_rate=N ...).</p>"
        )
    return layout("Client quotas", body)


def _number(value: float | None) -> int | float | None:
    return int(value) if value is not None and value.is_integer() else value
