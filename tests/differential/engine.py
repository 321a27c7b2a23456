"""The engine of the differential protocol suite (issue 34): a case is a sequence of requests, each a
request dataclass encoded by odradek's codec at an explicit version; `run_case` sends the same
sequence over raw sockets to Apache Kafka and to odradek, decodes both answers with the codec, and
returns their differences, field by field, as lines `step.path: kafka=... odradek=...`.

Owns: `Step` and `Case` (the data the case tables are made of), `Ctx` (what a step's request may read:
the case's own topic, group and transactional id, each unique to the case, and the answers of the
earlier steps on the same broker), the comparison (`to_tree`, `diff`) with the fields named volatile
(VOLATILE: everywhere; VOLATILE_BY_API: in one API's answers) left out, and `warm_up`.

A step's answer is compared unless the step says `compare=False` (a setup step: creating a topic the
case reads, waiting for a group to settle); `retry_on` names error codes that make a step sent again
(on that broker alone) until another answer comes, `until` a condition on the answer. A connection
the broker closes is an answer too (CLOSED), and the next step opens a new one. Steps run as the
super user ANONYMOUS over PLAINTEXT unless `user` names the SASL/PLAIN user (alice holds no ACL).
"""

from __future__ import annotations

import dataclasses
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages.find_coordinator import FindCoordinatorRequest
from odradek.protocol.messages.init_producer_id import InitProducerIdRequest
from odradek.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from odradek.protocol.messages.sasl_handshake import SaslHandshakeRequest
from odradek.protocol.records.batch import LOG_OVERHEAD
from odradek.protocol.records.errors import RecordsError
from odradek.protocol.records.record import iter_batch_records
from tests.server.raw_client import RawClient

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
ALICE, ALICE_PASSWORD = "alice", "alice-secret"
CLOSED = "<connection closed>"
UNAUTHENTICATED = "-"  # a step's user: the SASL listener, no handshake made yet
RETRY_WINDOW_S = 15.0
SOCKET_TIMEOUT_S = 15.0

# Fields whose values differ between any two brokers, whatever the API: ids a broker allocates or
# is given (cluster and topic ids, generated member ids, allocated producer ids, fetch session ids),
# the port each listens on, the throttle time, and free-text error messages (compared only as
# present or absent: Kafka's wording is its own, the error code is the contract).
VOLATILE = frozenset(
    {"throttle_time_ms", "cluster_id", "topic_id", "port", "member_id", "leader", "producer_id", "session_id"}
)
PRESENCE_ONLY = frozenset({"error_message", "batch_index_error_message"})
VOLATILE_BY_API: Mapping[int, frozenset[str]] = {
    ApiKey.PRODUCE: frozenset({"log_append_time_ms"}),
    ApiKey.DESCRIBE_PRODUCERS: frozenset({"last_timestamp", "coordinator_epoch"}),
    ApiKey.DESCRIBE_TRANSACTIONS: frozenset({"transaction_start_time_ms"}),
    ApiKey.DESCRIBE_LOG_DIRS: frozenset({"log_dir", "total_bytes", "usable_bytes", "size"}),
    ApiKey.SASL_AUTHENTICATE: frozenset({"session_lifetime_ms"}),
    ApiKey.DESCRIBE_GROUPS: frozenset({"member_metadata", "member_assignment"}),
}
# Topic configs Kafka 3.9 lists and odradek does not, by design (deviation `unlisted-topic-configs`):
# left out of every config list but in the one case that records the deviation (`strict`).
UNLISTED_CONFIGS = frozenset(
    {"message.format.version", "remote.log.copy.disable", "remote.log.delete.on.disable"}
)
# Lists whose order carries no meaning: sorted by the first of these keys their elements have.
_SORT_KEYS = (
    "name",
    "topic",
    "topic_name",
    "resource_name",
    "group_id",
    "key",
    "api_key",
    "partition_index",
    "index",
    "transactional_id",
)


@dataclass(frozen=True)
class Step:
    api: int
    version: int
    request: Any  # a request dataclass, or a function of the Ctx returning one
    name: str = ""  # saves the answer under this name in the Ctx
    compare: bool = True
    user: str = ""  # "" for ANONYMOUS over PLAINTEXT, a SASL/PLAIN user, or UNAUTHENTICATED
    retry_on: frozenset[int] = frozenset()
    until: Callable[[Any], bool] | None = None
    ignore: frozenset[str] = frozenset()  # field names ignored in this step beyond the volatile ones


@dataclass(frozen=True)
class Case:
    id: str
    steps: tuple[Step, ...]
    deviation: str = ""  # a key of deviations.DEVIATIONS; deviations.EXPECTED holds the exact lines
    fixed: str = ""  # the fix odradek took to match Kafka here (counted in docs/differential.md)
    strict: bool = False  # compare the UNLISTED_CONFIGS too

    @property
    def apis(self) -> set[int]:
        return {step.api for step in self.steps if step.compare}


@dataclass(frozen=True)
class Side:
    name: str
    bootstrap: str
    sasl_bootstrap: str


@dataclass(frozen=True)
class Pair:
    kafka: Side
    odradek: Side


def names_for(case_id: str) -> str:
    return re.sub(r"[^a-zA-Z0-9-]+", "-", case_id).strip("-")[:150]


@dataclass
class Ctx:
    """What a step's request may read: names unique to the case, and the earlier answers."""

    case_id: str
    side: str
    saved: dict[str, Any] = field(default_factory=dict)

    @property
    def stem(self) -> str:
        return names_for(self.case_id)

    @property
    def topic(self) -> str:
        return f"t-{self.stem}"

    @property
    def topic2(self) -> str:
        return f"u-{self.stem}"

    @property
    def group(self) -> str:
        return f"g-{self.stem}"

    @property
    def txn(self) -> str:
        return f"x-{self.stem}"

    def __getitem__(self, name: str) -> Any:
        return self.saved[name]


class _Connections:
    """One raw connection per user on one broker, opened on first use, reopened after a close."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self.open: dict[str, RawClient] = {}

    def get(self, user: str) -> RawClient:
        client = self.open.get(user)
        if client is None:
            if user == UNAUTHENTICATED:
                client = RawClient(self.side.sasl_bootstrap, timeout=SOCKET_TIMEOUT_S)
            elif user:
                client = RawClient(self.side.sasl_bootstrap, timeout=SOCKET_TIMEOUT_S)
                login(client, user, ALICE_PASSWORD if user == ALICE else ADMIN_PASSWORD)
            else:
                client = RawClient(self.side.bootstrap, timeout=SOCKET_TIMEOUT_S)
            self.open[user] = client
        return client

    def drop(self, user: str) -> None:
        client = self.open.pop(user, None)
        if client is not None:
            client.close()

    def close(self) -> None:
        for user in list(self.open):
            self.drop(user)


def login(client: RawClient, user: str, password: str) -> None:
    handshake = client.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN"))
    assert handshake.error_code == 0, handshake
    token = f"\x00{user}\x00{password}".encode()
    answer = client.call(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(token))
    assert answer.error_code == 0, answer


def _error_codes(tree: Any) -> Iterable[int]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key.endswith("error_code") and isinstance(value, int):
                yield value
            else:
                yield from _error_codes(value)
    elif isinstance(tree, list):
        for item in tree:
            yield from _error_codes(item)


def _send(connections: _Connections, step: Step, ctx: Ctx) -> Any:
    request = step.request(ctx) if callable(step.request) else step.request
    client = connections.get(step.user)
    try:
        return client.call(step.api, step.version, request)
    except (ConnectionError, OSError):
        connections.drop(step.user)
        return CLOSED


def _run_step(connections: _Connections, step: Step, ctx: Ctx) -> Any:
    deadline = time.monotonic() + RETRY_WINDOW_S
    while True:
        answer = _send(connections, step, ctx)
        again = answer is not CLOSED and (
            (step.retry_on and set(_error_codes(to_tree(answer))) & step.retry_on)
            or (step.until is not None and not step.until(answer))
        )
        if not again or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def run_side(side: Side, case: Case) -> list[Any]:
    ctx = Ctx(case.id, side.name)
    connections = _Connections(side)
    answers = []
    try:
        for step in case.steps:
            answer = _run_step(connections, step, ctx)
            if step.name:
                ctx.saved[step.name] = answer
            answers.append(answer)
    finally:
        connections.close()
    return answers


def run_case(pair: Pair, case: Case) -> list[str]:
    """The difference lines between Kafka's and odradek's answers to `case` ([] when alike)."""
    kafka = run_side(pair.kafka, case)
    odradek = run_side(pair.odradek, case)
    lines: list[str] = []
    for index, (step, ours, theirs) in enumerate(zip(case.steps, odradek, kafka, strict=True)):
        if not step.compare:
            continue
        ignored = VOLATILE | VOLATILE_BY_API.get(step.api, frozenset()) | step.ignore
        prefix = f"{index}:{ApiKey(step.api).name.lower()}"
        skipped = frozenset() if case.strict else UNLISTED_CONFIGS
        theirs_tree, ours_tree = (
            normalize(to_tree(theirs), ignored, skipped),
            normalize(to_tree(ours), ignored, skipped),
        )
        lines += diff(theirs_tree, ours_tree, prefix)
    return lines


def to_tree(value: Any) -> Any:
    """A decoded message as plain data: dicts, lists, ints, strings, bytes."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: batches(getattr(value, f.name))
            if f.name == "records"
            else to_tree(getattr(value, f.name))
            for f in dataclasses.fields(value)
        }
    if isinstance(value, (list, tuple)):
        return [to_tree(item) for item in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def batches(value: Any) -> Any:
    """A records field as its batches, each header (but the CRC, which covers the volatile producer
    id) and its records, so that a difference is named field by field."""
    if not isinstance(value, (bytes, bytearray, memoryview)) or not value:
        return to_tree(value)
    data = bytes(value)
    try:
        decoded: list[Any] = [
            {
                **{k: v for k, v in header._asdict().items() if k != "crc"},
                "records": [to_tree(record) for record in records],
            }
            for header, records in iter_batch_records(data)
        ]
    except RecordsError:
        return data
    whole = sum(batch["batch_length"] + LOG_OVERHEAD for batch in decoded)
    if whole < len(data):  # a batch cut by the size limits: its length is compared
        decoded.append({"partial_batch_bytes": len(data) - whole})
    return decoded


def normalize(tree: Any, ignored: frozenset[str], unlisted: frozenset[str] = frozenset()) -> Any:
    if isinstance(tree, dict):
        out = {}
        for key, value in tree.items():
            if key in ignored:
                continue
            if key in PRESENCE_ONLY:
                out[key] = "<absent>" if value is None or value == "" else "<present>"
            else:
                out[key] = normalize(value, ignored, unlisted)
        return out
    if isinstance(tree, list):
        items = [normalize(item, ignored, unlisted) for item in tree]
        items = [item for item in items if not (isinstance(item, dict) and item.get("name") in unlisted)]
        if items and all(isinstance(item, dict) for item in items):
            if all("headers" in item for item in items):  # a batch's records: their order is theirs
                return items
            for key in _SORT_KEYS:
                if all(key in item for item in items):
                    keyed = {f"[{key}={item[key]!r}]": item for item in items}
                    if len(keyed) == len(items):
                        return keyed  # compared element by element, a missing one named
                    return sorted(items, key=repr)  # a key shared by several (ACLs of one resource)
            if all("principal" in item for item in items):  # a resource's ACLs: a set
                return sorted(items, key=repr)
        return items
    return tree


def _show(value: Any) -> str:
    if isinstance(value, bytes) and len(value) > 24:
        return f"<{len(value)} bytes {value[:24].hex()}...>"
    return repr(value)  # whole: a recorded line must not depend on where a cut falls


def diff(kafka: Any, odradek: Any, path: str) -> list[str]:
    if isinstance(kafka, dict) and isinstance(odradek, dict):
        lines = []
        for key in kafka.keys() | odradek.keys():
            step = f"{path}{key}" if key.startswith("[") else f"{path}.{key}"
            lines += diff(kafka.get(key, "<missing>"), odradek.get(key, "<missing>"), step)
        return sorted(lines)
    if isinstance(kafka, list) and isinstance(odradek, list):
        if len(kafka) != len(odradek):
            return [f"{path}: kafka={_show(kafka)} odradek={_show(odradek)}"]
        lines = []
        for index, (theirs, ours) in enumerate(zip(kafka, odradek, strict=True)):
            lines += diff(theirs, ours, f"{path}[{index}]")
        return lines
    if kafka != odradek:
        return [f"{path}: kafka={_show(kafka)} odradek={_show(odradek)}"]
    return []


def warm_up(pair: Pair) -> None:
    """Create __consumer_offsets and __transaction_state on both brokers before the first case, and
    have Kafka's broker fetch its first block of producer ids (until then its InitProducerId answers
    COORDINATOR_LOAD_IN_PROGRESS)."""
    for side in (pair.kafka, pair.odradek):
        with RawClient(side.bootstrap, timeout=SOCKET_TIMEOUT_S) as client:
            deadline = time.monotonic() + 90.0
            while client.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(None, 60000)).error_code:
                assert time.monotonic() < deadline, f"{side.name}: no producer id"
                time.sleep(0.2)
            for key_type in (0, 1):
                deadline = time.monotonic() + 90.0
                while True:
                    answer = client.call(ApiKey.FIND_COORDINATOR, 4, _coordinator(key_type))
                    codes = {c.error_code for c in answer.coordinators}
                    if codes == {0}:
                        break
                    assert time.monotonic() < deadline, f"{side.name}: no coordinator: {answer}"
                    time.sleep(0.2)


def _coordinator(key_type: int) -> FindCoordinatorRequest:
    return FindCoordinatorRequest(key_type=key_type, coordinator_keys=["warm-up"])
