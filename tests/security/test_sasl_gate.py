"""The SASL gate in-process, on the socket server alone: a connection that closes before
authenticating leaves nothing behind (its pending handshake deadline does not keep the connection
or its gate alive), and a PLAINTEXT listener of the same server has no gate at all."""

from __future__ import annotations

import asyncio
import gc
import socket
import weakref

from odradek.clock import SYSTEM_CLOCK
from odradek.scheduler import Scheduler
from odradek.server import sasl_authenticator
from odradek.server.limits import ConnectionLimits
from odradek.server.sasl_listener import SaslListener
from odradek.server.socket_server import SocketServer


def _listener() -> SaslListener:
    return SaslListener("SASL_PLAINTEXT", ("PLAIN",), {}, {"PLAIN": 0}, 0, 524288, 600_000, lambda m, u: None)


async def _echo(frame: bytes | bytearray, client: object) -> list[bytes]:
    return [bytes(frame)]


def test_a_connection_closed_before_authenticating_is_not_kept_by_its_deadline(monkeypatch) -> None:
    gates: list[weakref.ref] = []
    real = sasl_authenticator.SaslServerAuthenticator.__init__

    def tracked(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        real(self, *args, **kwargs)
        gates.append(weakref.ref(self))

    monkeypatch.setattr(sasl_authenticator.SaslServerAuthenticator, "__init__", tracked)

    async def scenario() -> None:
        server = SocketServer(_echo, Scheduler(SYSTEM_CLOCK), ConnectionLimits(max_request_size=1 << 20))
        _, sasl_port = await server.bind("SASL_PLAINTEXT", "127.0.0.1", 0, "SASL_PLAINTEXT")
        _, plain_port = await server.bind("PLAINTEXT", "127.0.0.1", 0)
        server.authenticate("SASL_PLAINTEXT", sasl_authenticator.authenticator_for(_listener(), {}))
        server.listen()
        loop = asyncio.get_running_loop()
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", sasl_port))
            sock.close()
        plain = socket.create_connection(("127.0.0.1", plain_port))
        plain.setblocking(False)
        await loop.sock_sendall(plain, b"\x00\x00\x00\x03abc")
        assert await loop.sock_recv(plain, 16) == b"\x00\x00\x00\x03abc"  # no gate: echoed as is
        plain.close()
        while server.connections:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the connections' workers finish
        gc.collect()  # while every handshake deadline (10 minutes) is still pending
        assert len(gates) == 20
        assert all(gate() is None for gate in gates)
        server.close()

    asyncio.run(scenario())
