"""RemoteChannel against an in-test broker stand-in: an asyncio server that speaks Kafka's framing,
decodes each request with odradek's codec and answers with a canned response (a real single-node
broker refuses controller requests from the wire). Proves one request in flight per broker in the
order sent, reconnect and resend after a dropped connection or a timeout, and a clean stop."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from odradek.controller.channel import ControllerIdentity, stop_replica_request, update_metadata_request
from odradek.controller.metadata import BrokerInfo, Endpoint
from odradek.controller.remote_channel import ChannelSettings, RemoteChannel
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import decode_request, encode_response
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.headers import encode_response_header, parse_request_header, response_header_version
from odradek.protocol.messages.leader_and_isr import LeaderAndIsrResponse
from odradek.protocol.messages.stop_replica import StopReplicaResponse
from odradek.protocol.messages.update_metadata import UpdateMetadataResponse
from odradek.server.config import KafkaConfig
from odradek.server.kafka_server import controller_channel

SIZE = struct.Struct(">i")
CANNED = {
    ApiKey.LEADER_AND_ISR: LeaderAndIsrResponse(),
    ApiKey.UPDATE_METADATA: UpdateMetadataResponse(),
    ApiKey.STOP_REPLICA: StopReplicaResponse(),
}
FAST = ChannelSettings(request_timeout_ms=5_000, reconnect_backoff_ms=10, reconnect_backoff_max_ms=40)


@dataclass
class Received:
    connection: int
    api_key: int
    request: Any


# What the stand-in does with a request: "answer", "drop" (close the connection unanswered) or
# "hold" (never answer), given the request and how many times it has been seen.
Behaviour = Callable[[Received, int], str]


def always_answer(received: Received, seen: int) -> str:
    return "answer"


@dataclass
class StandIn:
    """The broker stand-in; `received` lists every decoded request, `closed_by_peer` the
    connections the channel closed."""

    behaviour: Behaviour = always_answer
    answer_delay_s: float = 0.002
    received: list[Received] = field(default_factory=list)
    connections: int = 0
    closed_by_peer: list[int] = field(default_factory=list)
    unanswered: int = 0  # requests read and to be answered, not answered yet
    max_unanswered: int = 0
    server: asyncio.Server | None = None
    handlers: list[asyncio.Task[None]] = field(default_factory=list)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        await self.server.wait_closed()
        await asyncio.gather(*self.handlers)
        self.handlers.clear()
        self.writers.clear()

    def epochs(self, api_key: int | None = None) -> list[int]:
        return [r.request.controller_epoch for r in self.received if api_key in (None, r.api_key)]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection = self.connections
        self.handlers.append(asyncio.current_task())
        self.writers.append(writer)
        answers: asyncio.Queue[tuple[bytes, int, int] | None] = asyncio.Queue()
        responder = asyncio.create_task(self._respond(answers, writer))
        try:
            while True:
                (size,) = SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                header, offset = parse_request_header(frame)
                received = Received(
                    connection,
                    header.api_key,
                    decode_request(header.api_key, header.api_version, frame[offset:]),
                )
                self.received.append(received)
                seen = sum(1 for r in self.received if r.request == received.request)
                action = self.behaviour(received, seen)
                if action == "drop":
                    writer.close()
                    return
                if action == "answer":
                    self.unanswered += 1
                    self.max_unanswered = max(self.max_unanswered, self.unanswered)
                    answers.put_nowait((frame, header.api_key, header.api_version))
        except ConnectionResetError:  # the channel resets a connection whose request timed out
            self.closed_by_peer.append(connection)
        except asyncio.IncompleteReadError:
            if not writer.is_closing():
                self.closed_by_peer.append(connection)
        finally:
            answers.put_nowait(None)
            await responder
            writer.close()

    async def _respond(self, answers: asyncio.Queue[tuple[bytes, int, int] | None], writer) -> None:
        while (item := await answers.get()) is not None:
            frame, api_key, version = item
            await asyncio.sleep(self.answer_delay_s)
            header, _ = parse_request_header(frame)
            body = encode_response_header(header.correlation_id, response_header_version(api_key, version))
            body += b"".join(bytes(c) for c in encode_response(api_key, version, CANNED[api_key]))
            if not writer.is_closing():
                writer.write(SIZE.pack(len(body)) + body)
            self.unanswered -= 1


def broker(port: int, broker_id: int = 1, listener: str = "PLAINTEXT") -> BrokerInfo:
    return BrokerInfo(broker_id, (Endpoint(listener, "127.0.0.1", port),))


def update(epoch: int) -> Any:
    return update_metadata_request(ControllerIdentity(0, epoch), {}, [])


def stop(epoch: int) -> Any:
    return stop_replica_request(ControllerIdentity(0, epoch), {"t": {0: 1}}, delete=False)


async def with_channel(stand_in: StandIn, body, settings: ChannelSettings = FAST) -> None:
    port = await stand_in.start()
    channel = RemoteChannel(0, settings)
    try:
        await channel.add_broker(broker(port))
        await body(channel)
    finally:
        await channel.close()
        await stand_in.stop()


def test_requests_to_one_broker_go_one_at_a_time_in_the_order_sent():
    stand_in = StandIn()

    async def body(channel: RemoteChannel) -> None:
        calls = [
            channel.update_metadata(1, update(i)) if i % 3 else channel.stop_replica(1, stop(i))
            for i in range(30)
        ]
        responses = await asyncio.gather(*calls)
        assert all(r.error_code == ErrorCode.NONE for r in responses)
        assert isinstance(responses[0], StopReplicaResponse)
        assert isinstance(responses[1], UpdateMetadataResponse)

    asyncio.run(with_channel(stand_in, body))
    assert stand_in.epochs() == list(range(30))
    assert stand_in.max_unanswered == 1
    assert stand_in.connections == 1


def test_a_dropped_connection_is_reopened_and_the_request_in_flight_sent_again():
    def drop_first_epoch_2(received: Received, seen: int) -> str:
        return "drop" if received.request.controller_epoch == 2 and seen == 1 else "answer"

    stand_in = StandIn(behaviour=drop_first_epoch_2)

    async def body(channel: RemoteChannel) -> None:
        responses = await asyncio.gather(*(channel.update_metadata(1, update(i)) for i in range(5)))
        assert [r.error_code for r in responses] == [ErrorCode.NONE] * 5

    asyncio.run(with_channel(stand_in, body))
    assert stand_in.epochs() == [0, 1, 2, 2, 3, 4]
    assert [r.connection for r in stand_in.received] == [1, 1, 1, 2, 2, 2]


def test_a_request_not_answered_within_the_timeout_is_sent_again_on_a_new_connection():
    def hold_first_epoch_1(received: Received, seen: int) -> str:
        return "hold" if received.request.controller_epoch == 1 and seen == 1 else "answer"

    stand_in = StandIn(behaviour=hold_first_epoch_1)
    settings = ChannelSettings(request_timeout_ms=200, reconnect_backoff_ms=10)

    async def body(channel: RemoteChannel) -> None:
        responses = await asyncio.gather(*(channel.update_metadata(1, update(i)) for i in range(3)))
        assert [r.error_code for r in responses] == [ErrorCode.NONE] * 3

    asyncio.run(with_channel(stand_in, body, settings))
    assert stand_in.epochs() == [0, 1, 1, 2]
    assert [r.connection for r in stand_in.received] == [1, 1, 2, 2]
    assert 1 in stand_in.closed_by_peer


def test_a_broker_not_listening_yet_is_reached_once_it_listens():
    async def main() -> None:
        stand_in = StandIn()
        port = await stand_in.start()
        await stand_in.stop()  # the port is free again: connecting fails until the stand-in returns
        channel = RemoteChannel(0, FAST)
        await channel.add_broker(broker(port))
        pending = asyncio.ensure_future(channel.update_metadata(1, update(7)))
        await asyncio.sleep(0.1)
        assert not pending.done()
        stand_in.server = await asyncio.start_server(stand_in._serve, "127.0.0.1", port)
        response = await asyncio.wait_for(pending, 10)
        assert response.error_code == ErrorCode.NONE
        assert stand_in.epochs() == [7]
        await channel.close()
        await stand_in.stop()

    asyncio.run(main())


def test_removing_a_broker_fails_its_unanswered_requests_and_closes_its_connection():
    stand_in = StandIn(behaviour=lambda received, seen: "hold")

    async def body(channel: RemoteChannel) -> None:
        in_flight = asyncio.ensure_future(channel.update_metadata(1, update(0)))
        queued = asyncio.ensure_future(channel.update_metadata(1, update(1)))
        while not stand_in.received:
            await asyncio.sleep(0.01)
        await channel.remove_broker(1)
        for call in (in_flight, queued):
            with pytest.raises(KafkaError) as failure:
                await call
            assert failure.value.code == ErrorCode.BROKER_NOT_AVAILABLE
        with pytest.raises(KafkaError) as unknown:
            await channel.update_metadata(1, update(2))
        assert unknown.value.code == ErrorCode.BROKER_NOT_AVAILABLE
        assert channel.reached() == frozenset()
        while not stand_in.closed_by_peer:
            await asyncio.sleep(0.01)
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("controller-to-broker-")]

    asyncio.run(with_channel(stand_in, body))
    assert stand_in.epochs() == [0]
    assert stand_in.closed_by_peer == [1]


def test_close_stops_every_sender():
    async def main() -> None:
        stand_ins = [StandIn(), StandIn()]
        channel = RemoteChannel(0, FAST)
        for broker_id, stand_in in enumerate(stand_ins, start=1):
            await channel.add_broker(broker(await stand_in.start(), broker_id))
        for broker_id in (1, 2):
            assert (await channel.update_metadata(broker_id, update(broker_id))).error_code == ErrorCode.NONE
        await channel.close()
        assert channel.reached() == frozenset()
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("controller-to-broker-")]
        for stand_in in stand_ins:
            while not stand_in.closed_by_peer:
                await asyncio.sleep(0.01)
            await stand_in.stop()
        assert [s.epochs() for s in stand_ins] == [[1], [2]]

    asyncio.run(main())


def test_the_inter_broker_listener_is_used_and_a_new_endpoint_replaces_the_sender():
    async def main() -> None:
        old, new, client_side = StandIn(), StandIn(), StandIn()
        channel = RemoteChannel(0, ChannelSettings(listener_name="INTERNAL", reconnect_backoff_ms=10))
        internal, external = await old.start(), await client_side.start()
        await channel.add_broker(
            BrokerInfo(
                1, (Endpoint("EXTERNAL", "127.0.0.1", external), Endpoint("INTERNAL", "127.0.0.1", internal))
            )
        )
        await channel.update_metadata(1, update(1))
        await channel.add_broker(broker(await new.start(), listener="INTERNAL"))
        await channel.update_metadata(1, update(2))
        await channel.add_broker(broker(external, broker_id=2, listener="EXTERNAL"))
        assert channel.reached() == frozenset({1})
        await channel.close()
        for stand_in in (old, new, client_side):
            await stand_in.stop()
        assert (old.epochs(), new.epochs(), client_side.epochs()) == ([1], [2], [])

    asyncio.run(main())


def test_the_controller_channel_reads_the_listener_and_the_controller_socket_timeout(tmp_path):
    base = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path), "broker.id": "3"}
    config = KafkaConfig(
        {**base, "inter.broker.listener.name": "PLAINTEXT", "controller.socket.timeout.ms": "1234"}
    )
    channel = controller_channel(config)
    assert (channel.controller_id, channel.settings.listener_name) == (3, "PLAINTEXT")
    assert channel.settings.request_timeout_ms == 1234
    assert controller_channel(KafkaConfig(base)).settings.listener_name == "PLAINTEXT"
    named = {
        **base,
        "listeners": "INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
    }
    # the listener the broker registers first for inter-broker traffic (KafkaConfig's rule)
    assert controller_channel(KafkaConfig(named)).settings.listener_name == "INTERNAL"
