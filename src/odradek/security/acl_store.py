"""ACL storage: where the ACLs of CreateAcls live, and how every broker hears of a change.

Owns `AclStore` (`acls()`: every resource pattern with its entries; `add` / `remove` of bindings;
`watch(callback)`: called after every change this broker made or heard of) and its two homes:
- `ZkAclStore` (cluster): Kafka's znodes. A LITERAL pattern's entries are `/kafka-acl/<Type>/<name>`,
  a PREFIXED one's `/kafka-acl-extended/prefixed/<Type>/<name>`, as `{"version":1,"acls":[...]}`.
  A write reads the znode, merges, and writes conditionally on the zkVersion read (created when
  missing, deleted when left empty), again on a conflict with another broker's write, then creates a
  change notification (`/kafka-acl-changes/acl_changes_<seq>` holding `TOPIC:foo`, or
  `/kafka-acl-extended-changes/acl_changes_<seq>` holding the JSON event). Every broker watches both
  notification parents and re-reads the named resource's znode for each new notification, so a
  change made through one broker applies on all of them at once (Kafka's AclAuthorizer change
  listeners); at each pass the notifications older than 15 minutes are deleted (Kafka's purge of
  obsolete notifications). After a session expiry `load()` reads everything again.
- `LocalAclStore` (single node): `<first log dir>/__acls.json`,
  `{"version":1,"acls":[{"resourceType":"Topic","name":..,"patternType":"LITERAL","acls":[...]}]}`
  with the same entry JSON, written atomically (temp file, fsync, rename) in the metadata-store lane
  before the change shows in `acls()`.

Deliberate deviations: the single node keeps its ACLs in a file of their own next to
`__cluster_metadata.json` rather than inside it.

Callers: the broker (construction, `load()`), the authorizer (reads and watches), the ACL handlers
(writes).
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.controller.zk import znodes
from odradek.durable_file import write_atomically
from odradek.scheduler import Lane, Scheduler
from odradek.security.acls import (
    AccessControlEntry,
    AclBinding,
    PatternType,
    ResourcePattern,
    entry_from_json,
    entry_to_json,
    parse_enum,
    pascal_name,
)
from odradek.security.authorizer import ResourceType
from odradek.storage.errors import KafkaStorageError
from odradek.tasks import cancel_and_wait

if TYPE_CHECKING:
    from odradek.controller.zk.client import KafkaZkClient

log = logging.getLogger(__name__)

ACLS_FILE = "__acls.json"
FORMAT_VERSION = 1
RETRY_AFTER_CONNECTION_LOSS_S = 0.5
CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener changeExpirationMs

Acls = Mapping[ResourcePattern, frozenset[AccessControlEntry]]


def by_pattern(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, set[AccessControlEntry]]:
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, set()).add(binding.entry)
    return grouped


class AclStore(abc.ABC):
    """See the module docstring."""

    def __init__(self) -> None:
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._watchers: list[Callable[[], None]] = []

    def acls(self) -> Acls:
        return self._acls

    def bindings(self) -> list[AclBinding]:
        return [AclBinding(p, e) for p, entries in self._acls.items() for e in entries]

    def watch(self, watcher: Callable[[], None]) -> None:
        self._watchers.append(watcher)

    def _notify(self) -> None:
        for watcher in self._watchers:
            watcher()

    def _set(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        kept = frozenset(entries)
        if kept:
            self._acls[pattern] = kept
        else:
            self._acls.pop(pattern, None)

    @abc.abstractmethod
    async def add(self, bindings: Iterable[AclBinding]) -> None:
        """Store the bindings (already present ones are kept once)."""

    @abc.abstractmethod
    async def remove(self, bindings: Iterable[AclBinding]) -> None:
        """Forget the bindings (absent ones are ignored)."""


class LocalAclStore(AclStore):
    """The ACLs of a one-broker cluster, persisted as JSON (see the module docstring)."""

    def __init__(self, log_dir: Path, scheduler: Scheduler) -> None:
        super().__init__()
        self._path = Path(log_dir) / ACLS_FILE
        self._scheduler = scheduler
        self._lock = asyncio.Lock()

    def load(self) -> None:
        try:
            document = json.loads(self._path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        if document.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self._path}: unsupported ACL file version {document.get('version')}")
        for resource in document["acls"]:
            pattern = ResourcePattern(
                parse_enum(ResourceType, resource["resourceType"]),
                resource["name"],
                parse_enum(PatternType, resource["patternType"]),
            )
            self._set(pattern, (entry_from_json(e) for e in resource["acls"]))

    async def add(self, bindings: Iterable[AclBinding]) -> None:
        await self._change(bindings, lambda old, new: old | new)

    async def remove(self, bindings: Iterable[AclBinding]) -> None:
        await self._change(bindings, lambda old, gone: old - gone)

    async def _change(
        self,
        bindings: Iterable[AclBinding],
        merge: Callable[
            [frozenset[AccessControlEntry], set[AccessControlEntry]], frozenset[AccessControlEntry]
        ],
    ) -> None:
        async with self._lock:
            updated = dict(self._acls)
            for pattern, entries in by_pattern(bindings).items():
                merged = merge(updated.get(pattern, frozenset()), entries)
                if merged:
                    updated[pattern] = merged
                else:
                    updated.pop(pattern, None)
            if updated == self._acls:
                return
            try:
                await self._scheduler.run(Lane.METADATA_STORE, _write_file, self._path, updated)
            except OSError as exc:
                raise KafkaStorageError(f"cannot write {self._path}: {exc}") from exc
            self._acls = updated
        self._notify()


def _write_file(path: Path, acls: Acls) -> None:
    resources = [
        {
            "resourceType": pascal_name(p.resource_type),
            "name": p.name,
            "patternType": p.pattern_type.name,
            "acls": sorted((entry_to_json(e) for e in entries), key=lambda e: sorted(e.items())),
        }
        for p, entries in sorted(acls.items(), key=lambda item: (item[0].resource_type, item[0].name))
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"version": FORMAT_VERSION, "acls": resources}
    write_atomically(path, json.dumps(document, indent=1, sort_keys=True).encode("utf-8"))


class ZkAclStore(AclStore):
    """The ACLs of a cluster, in Kafka's znodes (see the module docstring)."""

    def __init__(self, zk: KafkaZkClient) -> None:
        super().__init__()
        self.zk = zk  # the broker's session
        self._last_change = {False: "", True: ""}  # per store (prefixed or not): last notification seen
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def load(self) -> None:
        """Read every ACL znode and watch both notification parents (again after a session expiry)."""
        for path in znodes.ACL_PATHS:
            await self.zk.ensure_path(path)
        async with self._lock:
            for prefixed in (False, True):
                changes = await self.zk.children(znodes.acl_changes_path(prefixed), self._watcher(prefixed))
                self._last_change[prefixed] = changes[-1] if changes else ""
            self._acls = {}
            for prefixed in (False, True):
                root = znodes.acl_root(prefixed)
                for type_name in await self.zk.children(root):
                    for name in await self.zk.children(f"{root}/{type_name}"):
                        pattern = _pattern(
                            type_name, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL
                        )
                        self._set(pattern, (await self._read(pattern))[0])
        self._notify()

    async def close(self) -> None:
        await cancel_and_wait(*self._tasks)

    def _watcher(self, prefixed: bool) -> Callable[[], None]:
        def spawn() -> None:
            task = asyncio.get_running_loop().create_task(self._on_changes(prefixed))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        return spawn

    async def _on_changes(self, prefixed: bool) -> None:
        """Re-read the resource of each new notification (Kafka's AclChangeNotificationHandler)."""
        from kazoo.exceptions import ConnectionLoss, SessionExpiredError

        while True:
            try:
                async with self._lock:
                    changed = await self._read_new_changes(prefixed)
                break
            except ConnectionLoss:
                await asyncio.sleep(RETRY_AFTER_CONNECTION_LOSS_S)
            except SessionExpiredError:
                return  # the broker reloads the store in the new session
            except (znodes.ZNodeFormatError, ValueError):
                log.exception("Reading an ACL change notification failed")
                return
        if changed:
            self._notify()

    async def _read_new_changes(self, prefixed: bool) -> bool:
        parent = znodes.acl_changes_path(prefixed)
        changed = False
        for child in await self.zk.children(parent, self._watcher(prefixed)):
            found = await self.zk.get(f"{parent}/{child}")
            if found is None:
                continue
            await self._purge_if_expired(f"{parent}/{child}", found[1].ctime)
            if child <= self._last_change[prefixed]:
                continue
            self._last_change[prefixed] = child
            type_name, name, pattern_type = znodes.decode_acl_change(found[0], prefixed)
            pattern = _pattern(type_name, name, parse_enum(PatternType, pattern_type))
            self._set(pattern, (await self._read(pattern))[0])
            log.info("Processed ACL change notification for %s", pattern)
            changed = True
        return changed

    async def _purge_if_expired(self, path: str, created_ms: int) -> None:
        """Delete a notification older than CHANGE_EXPIRATION_MS (any broker may; one wins)."""
        if time.time() * 1000 - created_ms < CHANGE_EXPIRATION_MS:
            return
        from kazoo.exceptions import NoNodeError

        try:
            await self.zk.delete(path)
        except NoNodeError:
            pass

    async def _read(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        """The pattern's entries and zkVersion (-1: no znode)."""
        found = await self.zk.get(_path(pattern))
        if found is None:
            return frozenset(), -1
        return frozenset(entry_from_json(e) for e in znodes.decode_acls(found[0])), found[1].version

    async def add(self, bindings: Iterable[AclBinding]) -> None:
        for pattern, entries in by_pattern(bindings).items():
            await self._update(pattern, lambda old, new=entries: old | new)
        self._notify()

    async def remove(self, bindings: Iterable[AclBinding]) -> None:
        for pattern, entries in by_pattern(bindings).items():
            await self._update(pattern, lambda old, gone=entries: old - gone)
        self._notify()

    async def _update(
        self,
        pattern: ResourcePattern,
        merge: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> None:
        """Read, merge and write the pattern's znode conditionally on its zkVersion, until no other
        broker wrote it meanwhile; then the change notification."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        while True:
            old, version = await self._read(pattern)
            new = merge(old)
            if new == old:
                self._set(pattern, new)
                return
            try:
                await self._write(pattern, new, version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
        self._set(pattern, new)
        data = znodes.encode_acl_change(pattern.resource_type.name, pattern.name, pattern.pattern_type.name)
        prefixed = pattern.pattern_type == PatternType.PREFIXED
        await self.zk.create(
            f"{znodes.acl_changes_path(prefixed)}/{znodes.ACL_CHANGE_PREFIX}", data, sequence=True
        )

    async def _write(
        self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry], version: int
    ) -> None:
        path = _path(pattern)
        if not entries:
            await self.zk.delete(path, version)
            return
        data = znodes.encode_acls([entry_to_json(e) for e in sorted(entries, key=str)])
        if version < 0:
            await self.zk.create(path, data)
        else:
            await self.zk.set(path, data, version)


def _pattern(type_name: str, name: str, pattern_type: PatternType) -> ResourcePattern:
    return ResourcePattern(parse_enum(ResourceType, type_name), name, pattern_type)


def _path(pattern: ResourcePattern) -> str:
    prefixed = pattern.pattern_type == PatternType.PREFIXED
    return znodes.acl_path(pascal_name(pattern.resource_type), pattern.name, prefixed)
