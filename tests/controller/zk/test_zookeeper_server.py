"""The real ZooKeeper server the cluster tests run: it starts, serves kazoo, keeps ephemeral znodes only
for their session, and survives a restart with its data."""

from __future__ import annotations

from kazoo.client import KazooClient

from odradek.controller.zk import znodes
from odradek.testing.zookeeper import ZooKeeperServer, four_letter_word


def _client(server: ZooKeeperServer) -> KazooClient:
    client = KazooClient(hosts=server.connect_string, timeout=5.0)
    client.start(timeout=10)
    return client


def _close(*clients: KazooClient) -> None:
    """Stop each session and free kazoo's wake-up sockets (stop() alone leaves them open)."""
    for client in clients:
        client.stop()
        client.close()


def test_ephemeral_registration_lives_with_its_session(zookeeper):
    assert four_letter_word(zookeeper.host, zookeeper.port, "ruok") == "imok"
    owner, watcher = _client(zookeeper), _client(zookeeper)
    try:
        owner.ensure_path(znodes.BROKER_IDS_PATH)
        owner.create(znodes.broker_path(1), b"{}", ephemeral=True)
        assert watcher.get_children(znodes.BROKER_IDS_PATH) == ["1"]
        owner.stop()
        assert watcher.get_children(znodes.BROKER_IDS_PATH) == []
    finally:
        _close(owner, watcher)


def test_persistent_data_survives_a_restart(tmp_path):
    server = ZooKeeperServer(tmp_path / "zk").start()
    try:
        client = _client(server)
        client.create(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(4))
        _close(client)
        server.kill()
        server.start()
        client = _client(server)
        data, _ = client.get(znodes.CONTROLLER_EPOCH_PATH)
        _close(client)
        assert znodes.decode_controller_epoch(data) == 4
    finally:
        server.stop()
