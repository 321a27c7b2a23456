"""meta.properties: the identity file Kafka keeps at the root of every log dir.

Owns: reading, checking and writing `<log dir>/meta.properties` (`version=1`, `broker.id`,
`cluster.id`), and generating cluster ids in Kafka's form (a random UUID, URL-safe base64, no padding:
22 characters).

Invariants: every log dir of a broker carries the same broker.id and cluster.id; a dir written by
another broker or cluster is refused at start (Kafka's InconsistentBrokerIdException /
InconsistentClusterIdException) with a `MetaPropertiesError` naming broker.id or cluster.id. Files
are written to a temp file, fsynced and renamed.

Callers: the broker at startup, through `ensure_meta_properties`.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

from odradek.durable_file import write_atomically

META_PROPERTIES = "meta.properties"
META_VERSION = "1"


class MetaPropertiesError(RuntimeError):
    """A log dir whose meta.properties belongs to another broker or cluster."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def new_cluster_id() -> str:
    """A random cluster id as Kafka prints them (e.g. `MkU3OEVBNTcwNTJENDM2Qk`-like, 22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def read_meta_properties(log_dir: Path) -> dict[str, str] | None:
    """The key=value pairs of a log dir's meta.properties, or None when it has none."""
    try:
        text = (log_dir / META_PROPERTIES).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def _render(broker_id: int, cluster_id: str) -> bytes:
    lines = ["#", "#Written by odradek", f"version={META_VERSION}", f"broker.id={broker_id}"]
    lines.append(f"cluster.id={cluster_id}")
    return ("\n".join(lines) + "\n").encode("ascii")


def ensure_meta_properties(
    log_dirs: Sequence[Path], broker_id: int, configured_cluster_id: str | None
) -> str:
    """Check the existing meta.properties of every log dir, write the missing ones, return the cluster id."""
    stored = {d: read_meta_properties(d) for d in log_dirs}
    cluster_ids = {props["cluster.id"] for props in stored.values() if props and "cluster.id" in props}
    if len(cluster_ids) > 1:
        raise MetaPropertiesError(
            "cluster.id", f"log dirs belong to different clusters {sorted(cluster_ids)}"
        )
    cluster_id = next(iter(cluster_ids), None) or configured_cluster_id or new_cluster_id()
    if configured_cluster_id is not None and configured_cluster_id != cluster_id:
        raise MetaPropertiesError(
            "cluster.id", f"configured {configured_cluster_id} but the log dirs belong to {cluster_id}"
        )
    for log_dir, props in stored.items():
        if props is None:
            os.makedirs(log_dir, exist_ok=True)
            write_atomically(log_dir / META_PROPERTIES, _render(broker_id, cluster_id))
        elif props.get("broker.id") != str(broker_id):
            raise MetaPropertiesError(
                "broker.id",
                f"configured {broker_id} doesn't match stored broker.id {props.get('broker.id')} "
                f"in {log_dir / META_PROPERTIES}",
            )
    return cluster_id
