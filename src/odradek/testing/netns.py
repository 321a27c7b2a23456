"""A local cluster whose brokers each run in a network namespace of their own, on a bridge, so a test
can cut, split and degrade the real network between them: links down, partial and one-way
partitions, a broker cut from ZooKeeper only, and packet loss.

Owns, per cluster: a Linux bridge in the caller's namespace carrying the cluster's subnet
(10.231.<n>.0/24, `n` free on this machine; the bridge holds .1), the ZooKeeper server the cluster
starts on the bridge's address, and per broker a namespace with a veth pair (the namespace's end
`eth0` at 10.231.<n>.<10 + id>, the other end on the bridge) and an nftables table `chaos` inside the
namespace whose rules are the broker's current network faults. Each broker listens on port 9092 of
its own address, which it also advertises; clients (the test, in the caller's namespace) reach it
across the bridge as other brokers do, so every byte between processes crosses a real link.

Faults (`HostLink`), each on one broker's namespace and undone by `heal()`:
- `down()`: its veth set down: the broker is cut from everybody (ZooKeeper, brokers, clients);
- `drop_peers(addresses, outbound_only)`: packets to (and, unless `outbound_only`, from) the given
  addresses dropped: a partition between it and some brokers, or a one-way one;
- `drop_zookeeper()`: packets to and from the ZooKeeper server's port dropped: cut from ZooKeeper
  only, clients and brokers still reach it;
- `lose(percent)`: that share of the packets on its link dropped at random, both ways (real loss:
  TCP retransmits, delays grow; no `tc netem` is needed);
- `throttle(rate_kbit)`: its outbound traffic shaped to that rate by a token bucket (`tc tbf`,
  packets queued up to 400 ms, dropped beyond): a slow link whose delay grows with the load.
With `disk_bytes`, each broker's log dir is a tmpfs of that size (`SmallDisk`), which `fill()` fills
to the last page (a hidden file beside the partition directories, which the broker skips) and
`free()` empties again: a full disk on one broker; `close()` copies each disk's logs to
`broker-<id>-logs` beside it before unmounting, so a failed run can still be read.

Needs root (namespaces, mounts), iproute2 and nftables (`netns_available()` says whether this
machine can; the fault harness falls back to the TCP proxies of testing/links.py otherwise).
`close()` stops the processes, then unmounts every disk and deletes every namespace, link and the
bridge it made; a run that died leaves names with its subnet number, which the next run on that
number deletes first.

Callers: the fault harness (testing/chaos.py). Not used by the broker itself.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from odradek.testing.broker import BrokerProcess
from odradek.testing.cluster import LocalCluster
from odradek.testing.zookeeper import ZooKeeperServer

METRICS_PORT = 9080  # /metrics, with `metrics`
BROKER_PORT = 9092
SUBNET_PREFIX = "10.231"
NFT_TABLE = "chaos"


def run(
    argv: list[str], *, script: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run `argv` (with `script` on its stdin); raises with its message on failure when `check`."""
    done = subprocess.run(argv, input=script, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}" + (f"\n{script}" if script else ""))
    return done


def run_ip(*args: str, namespace: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`ip` with `args` (inside `namespace` when given)."""
    return run(["ip", *(["-n", namespace] if namespace else []), *args], check=check)


def nft(namespace: str, script: str) -> None:
    """Apply an nft `script` inside `namespace`."""
    run(["ip", "netns", "exec", namespace, "nft", "-f", "-"], script=script)


def tc(namespace: str, *args: str, check: bool = True) -> None:
    """`tc` with `args` inside `namespace`."""
    run(["ip", "netns", "exec", namespace, "tc", *args], check=check)


def netns_available() -> str | None:
    """None when namespaces, veth pairs and nftables can be used here; else why not."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = f"odr-probe-{os.getpid()}"
    try:
        run_ip("netns", "add", probe)
        nft(probe, f"add table inet {NFT_TABLE}\n")
    except RuntimeError as exc:
        return str(exc)
    finally:
        run_ip("netns", "del", probe, check=False)
    return None


def free_subnet() -> int:
    """A third octet for 10.231.<n>.0/24 that no address on this machine uses yet."""
    used = run_ip("-o", "addr").stdout
    start = os.getpid() % 200
    for step in range(200):
        candidate = 20 + (start + step) % 200
        if f"{SUBNET_PREFIX}.{candidate}." not in used:
            return candidate
    raise RuntimeError(f"no free {SUBNET_PREFIX}.x.0/24 subnet")


class HostLink:
    """One broker's namespace, its link to the bridge, and its network faults."""

    def __init__(self, subnet: int, broker_id: int, bridge: str) -> None:
        self.namespace = f"odr{subnet}b{broker_id}"
        self.veth = f"odr{subnet}v{broker_id}"
        self.address = f"{SUBNET_PREFIX}.{subnet}.{10 + broker_id}"
        self.bridge = bridge

    def create(self) -> None:
        run_ip("netns", "del", self.namespace, check=False)  # a dead run's leftover
        run_ip("netns", "add", self.namespace)
        run_ip("link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.namespace)
        run_ip("link", "set", self.veth, "master", self.bridge, "up")
        run_ip("addr", "add", f"{self.address}/24", "dev", "eth0", namespace=self.namespace)
        run_ip("link", "set", "eth0", "up", namespace=self.namespace)
        run_ip("link", "set", "lo", "up", namespace=self.namespace)
        self.heal()

    def delete(self) -> None:
        run_ip("link", "del", self.veth, check=False)
        run_ip("netns", "del", self.namespace, check=False)

    def down(self) -> None:
        run_ip("link", "set", self.veth, "down")

    def drop_peers(self, addresses: Iterable[str], outbound_only: bool = False) -> None:
        rules = [f"add rule inet {NFT_TABLE} out ip daddr {a} drop" for a in addresses]
        if not outbound_only:
            rules += [f"add rule inet {NFT_TABLE} in ip saddr {a} drop" for a in addresses]
        nft(self.namespace, "\n".join(rules) + "\n")

    def drop_zookeeper(self, host: str, port: int) -> None:
        nft(
            self.namespace,
            f"add rule inet {NFT_TABLE} out ip daddr {host} tcp dport {port} drop\n"
            f"add rule inet {NFT_TABLE} in ip saddr {host} tcp sport {port} drop\n",
        )

    def lose(self, percent: int) -> None:
        nft(
            self.namespace,
            f'add rule inet {NFT_TABLE} out oifname "eth0" numgen random mod 100 < {percent} drop\n'
            f'add rule inet {NFT_TABLE} in iifname "eth0" numgen random mod 100 < {percent} drop\n',
        )

    def throttle(self, rate_kbit: int) -> None:
        tc(
            self.namespace,
            "qdisc",
            "add",
            "dev",
            "eth0",
            "root",
            "tbf",
            "rate",
            f"{rate_kbit}kbit",
            "burst",
            "16kbit",
            "latency",
            "400ms",
        )

    def heal(self) -> None:
        """No fault: the link up, no shaping, the rule table empty."""
        run_ip("link", "set", self.veth, "up")
        tc(self.namespace, "qdisc", "del", "dev", "eth0", "root", check=False)
        nft(
            self.namespace,
            f"table inet {NFT_TABLE}\ndelete table inet {NFT_TABLE}\n"
            f"table inet {NFT_TABLE} {{\n"
            "  chain in { type filter hook input priority 0; }\n"
            "  chain out { type filter hook output priority 0; }\n"
            "}\n",
        )


class SmallDisk:
    """A tmpfs of `size` bytes mounted on `path` (a broker's log dir), and a filler file in it."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.filler = path / ".filler"

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        run(["mount", "-t", "tmpfs", "-o", f"size={self.size}", "tmpfs", str(self.path)])

    def fill(self) -> None:
        """Take every free page (the filler grows until the disk is full)."""
        with open(self.filler, "ab", buffering=0) as out:
            for chunk in (1 << 20, 1 << 12, 1 << 9):
                try:
                    while True:
                        out.write(b"\0" * chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def save(self) -> Path:
        """Copy what the disk holds (the filler aside) to `<path>-logs` beside it, which outlives
        the mount: a failed run's logs stay readable."""
        saved = self.path.with_name(self.path.name + "-logs")
        shutil.copytree(self.path, saved, ignore=shutil.ignore_patterns(self.filler.name), dirs_exist_ok=True)
        return saved

    def unmount(self) -> None:
        run(["umount", "--lazy", str(self.path)], check=False)


class NamespacedCluster(LocalCluster):
    """A `LocalCluster` with each broker in a namespace of its own; see the module docstring. It
    always starts its own ZooKeeper server, on the bridge's address."""

    def __init__(
        self, data_dir: str | os.PathLike[str], brokers: int = 3, disk_bytes: int | None = None, **kwargs: Any
    ) -> None:
        if kwargs.pop("zookeeper_connect", None) is not None:
            raise ValueError("a namespaced cluster runs its own ZooKeeper server on its bridge")
        super().__init__(data_dir, brokers, **kwargs)
        self.disk_bytes = disk_bytes
        self.disks: dict[int, SmallDisk] = {}
        self.subnet = free_subnet()
        self.bridge = f"odr{self.subnet}br"
        self.gateway = f"{SUBNET_PREFIX}.{self.subnet}.1"
        self.links: dict[int, HostLink] = {}

    def start(self, timeout_s: float = 30.0) -> LocalCluster:
        """The bridge, ZooKeeper on its address, then `LocalCluster.start()`."""
        run_ip("link", "del", self.bridge, check=False)  # a dead run's leftover
        run_ip("link", "add", self.bridge, "type", "bridge")
        run_ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        run_ip("link", "set", self.bridge, "up")
        Path(self.data_dir).mkdir(parents=True, exist_ok=True)
        self.zookeeper = ZooKeeperServer(Path(self.data_dir) / "zookeeper", host=self.gateway)
        self.zookeeper.start(timeout_s)
        self._zookeeper_connect = self.zookeeper.connect_string
        return super().start(timeout_s)

    @property
    def zookeeper_address(self) -> tuple[str, int]:
        assert self.zookeeper is not None
        return self.zookeeper.host, self.zookeeper.port

    def broker(self, broker_id: int, data: str | None = None) -> BrokerProcess:
        """A broker process (not started) in namespace `broker_id`, made the first time (with its
        small disk when `disk_bytes` is set)."""
        process = super().broker(broker_id, data)
        if broker_id not in self.links:
            self.links[broker_id] = HostLink(self.subnet, broker_id, self.bridge)
            self.links[broker_id].create()
        if self.disk_bytes and broker_id not in self.disks:
            self.disks[broker_id] = SmallDisk(process.data_dir, self.disk_bytes)
            self.disks[broker_id].mount()
        link = self.links[broker_id]
        process.host, process.port = link.address, BROKER_PORT
        if self.metrics:
            process.overrides["http.listeners"] = f"http://{link.address}:{METRICS_PORT}"
        process.wrapper = ["ip", "netns", "exec", link.namespace]
        return process

    def addresses(self, broker_ids: Iterable[int]) -> list[str]:
        return [self.links[b].address for b in broker_ids]

    def close(self) -> None:
        """`LocalCluster.close()`, then every disk (its logs saved first), namespace, link and the
        bridge."""
        super().close()
        for disk in self.disks.values():
            disk.save()
            disk.unmount()
        self.disks.clear()
        for link in self.links.values():
            link.delete()
        self.links.clear()
        run_ip("link", "del", self.bridge, check=False)
