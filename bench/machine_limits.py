"""What this machine can do at best, so broker numbers have a ceiling to be read against.

Measures (median of 3 runs each unless said, MB/s = 10^6 bytes/s):
- loopback TCP, one stream: a sender process writing 1 MiB chunks to a receiver process;
- os.sendfile from a page-cache-hot file to a loopback socket (the broker's fetch path);
- sequential file write in 1 MiB chunks, without and with one fdatasync at the end;
- the Python receive path: an asyncio BufferedProtocol with a reused buffer splitting 1 KiB
  size-prefixed frames (the broker's network layer shape), in frames/s and MB/s;
- the Python receive-and-write path: the same protocol receiving 1 MiB size-prefixed frames (a large
  produce request) into a reused 4 MiB buffer and appending each frame's body to a fresh file with
  one os.write: what the broker's produce path must do at minimum, without parsing, validation, CRC
  or a response. MB/s counts the bytes written. The file lives in the same directory as the file
  tests and is deleted after each run, so the page cache absorbs every byte. It varies most from run
  to run (1-3 GB/s here), so it is the median of 5 with the lowest and highest shown;
- the same path sustained: 4 runs whose files are all kept until the last one ends, so once the
  dirty pages pass the kernel's background threshold (vm.dirty_background_ratio) the runs meet its
  writeback to the disk, as a broker that keeps its log does. Median of runs 2-4 (the first one fills
  the page cache), with their lowest and highest shown.

Run `python bench/machine_limits.py [--quick]`; bench/throughput.py imports `measure_all` and prints
the same table in its run. Never used by tests: numbers, not assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

CHUNK = 1 << 20
FRAME_PAYLOAD = 1024
WRITE_FRAME_PAYLOAD = 1 << 20
WRITE_RECEIVE_BUFFER = 4 << 20
SENDFILE = "os.sendfile, page-cache-hot file -> loopback"
RECEIVE_AND_WRITE = "Python receive-and-write: asyncio receive + append to file, 1 MiB frames"
RECEIVE_AND_WRITE_SUSTAINED = "Python receive-and-write, sustained: files kept, meets writeback"


@dataclass(frozen=True, slots=True)
class Limit:
    name: str
    mb_per_s: float
    extra: str = ""


def median_of_3(run: Callable[[], float]) -> float:
    return statistics.median(run() for _ in range(3))


def median_and_range(run: Callable[[], float], runs: int) -> Limit:
    """A limit from `runs` runs: the median, with the lowest and highest run in `extra`."""
    results = sorted(run() for _ in range(runs))
    return Limit("", statistics.median(results), f"{runs} runs: {results[0]:,.0f}-{results[-1]:,.0f} MB/s")


def _drain(port: int, ready: multiprocessing.synchronize.Event) -> None:
    with socket.create_server(("127.0.0.1", port)) as server:
        ready.set()
        conn, _ = server.accept()
        buffer = bytearray(CHUNK)
        with conn:
            while conn.recv_into(buffer):
                pass


def _with_receiver(send: Callable[[socket.socket], int]) -> float:
    """Run `send` against a draining receiver process; MB/s of the bytes it reports sent."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ready = multiprocessing.Event()
    receiver = multiprocessing.Process(target=_drain, args=(port, ready))
    receiver.start()
    ready.wait(10)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        start = time.perf_counter()
        sent = send(sock)
        sock.shutdown(socket.SHUT_WR)
        receiver.join()
        elapsed = time.perf_counter() - start
    return sent / elapsed / 1e6


def loopback_tcp(total_bytes: int) -> float:
    chunk = os.urandom(CHUNK)

    def send(sock: socket.socket) -> int:
        for _ in range(total_bytes // CHUNK):
            sock.sendall(chunk)
        return total_bytes // CHUNK * CHUNK

    return _with_receiver(send)


def sendfile_hot(path: str, size: int) -> float:
    with open(path, "rb") as warm:
        while warm.read(CHUNK):
            pass

    def send(sock: socket.socket) -> int:
        with open(path, "rb") as source:
            offset = 0
            while offset < size:
                offset += os.sendfile(sock.fileno(), source.fileno(), offset, size - offset)
        return size

    return _with_receiver(send)


def sequential_write(directory: str, total_bytes: int, fdatasync: bool) -> float:
    chunk = os.urandom(CHUNK)
    fd, path = tempfile.mkstemp(dir=directory)
    try:
        start = time.perf_counter()
        for _ in range(total_bytes // CHUNK):
            os.write(fd, chunk)
        if fdatasync:
            os.fdatasync(fd)
        return total_bytes / (time.perf_counter() - start) / 1e6
    finally:
        os.close(fd)
        os.unlink(path)


class _FrameCounter(asyncio.BufferedProtocol):
    """Splits size-prefixed frames out of one reused buffer, counting them; with a `sink` file
    descriptor, appends each frame's body to it as soon as the frame is complete."""

    def __init__(
        self, expected: int, done: asyncio.Future[None], buffer_size: int = 1 << 20, sink: int | None = None
    ) -> None:
        self.buffer = bytearray(buffer_size)
        self.view = memoryview(self.buffer)
        self.start = self.end = 0
        self.frames = 0
        self.expected = expected
        self.done = done
        self.sink = sink

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.start and len(self.buffer) - self.end < 65536:
            pending = self.end - self.start
            self.buffer[:pending] = self.buffer[self.start : self.end]
            self.start, self.end = 0, pending
        return self.view[self.end :]

    def buffer_updated(self, nbytes: int) -> None:
        self.end += nbytes
        while self.end - self.start >= 4:
            (size,) = struct.unpack_from(">i", self.buffer, self.start)
            if self.end - self.start < 4 + size:
                break
            if self.sink is not None:
                os.write(self.sink, self.view[self.start + 4 : self.start + 4 + size])
            self.start += 4 + size
            self.frames += 1
        if self.start == self.end:
            self.start = self.end = 0
        if self.frames >= self.expected and not self.done.done():
            self.done.set_result(None)


def _send_frames(port: int, frames: int, payload: int) -> None:
    """Send `frames` size-prefixed frames of `payload` bytes, in bursts of about 1 MiB."""
    frame = struct.pack(">i", payload) + bytes(payload)
    per_burst = max(1, CHUNK // len(frame))
    burst = frame * per_burst
    with socket.create_connection(("127.0.0.1", port)) as sock:
        for _ in range(frames // per_burst):
            sock.sendall(burst)
        sock.sendall(frame * (frames % per_burst))


async def _receive_frames(frames: int, payload: int, buffer_size: int, sink: int | None) -> float:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    server = await loop.create_server(lambda: _FrameCounter(frames, done, buffer_size, sink), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sender = multiprocessing.Process(target=_send_frames, args=(port, frames, payload))
    start = time.perf_counter()
    sender.start()
    await done
    elapsed = time.perf_counter() - start
    sender.join()
    server.close()
    await server.wait_closed()
    return frames / elapsed


def buffered_protocol_receive(frames: int) -> float:
    """Frames per second received and split by one Python process."""
    return asyncio.run(_receive_frames(frames, FRAME_PAYLOAD, 1 << 20, None))


def receive_and_write(directory: str, total_bytes: int) -> float:
    """MB/s of 1 MiB frames received by one Python process and appended to a fresh file, starting
    from drained writeback (os.sync), as the broker benchmark's runs do."""
    os.sync()
    mb_per_s, path = _receive_into_new_file(directory, total_bytes)
    os.unlink(path)
    return mb_per_s


def receive_and_write_sustained(directory: str, total_bytes: int, runs: int) -> Limit:
    """`receive_and_write` runs whose files stay until the last run ends; runs 2.. are reported."""
    with tempfile.TemporaryDirectory(dir=directory) as keep:
        results = [_receive_into_new_file(keep, total_bytes)[0] for _ in range(runs)]
    later = sorted(results[1:])
    extra = f"runs 2-{runs} of {runs}: {later[0]:,.0f}-{later[-1]:,.0f} MB/s"
    return Limit(RECEIVE_AND_WRITE_SUSTAINED, statistics.median(later), extra)


def _receive_into_new_file(directory: str, total_bytes: int) -> tuple[float, str]:
    """(MB/s, path) of `total_bytes` in 1 MiB frames received and appended to a new file in `directory`."""
    fd, path = tempfile.mkstemp(dir=directory)
    try:
        frames = total_bytes // WRITE_FRAME_PAYLOAD
        per_s = asyncio.run(_receive_frames(frames, WRITE_FRAME_PAYLOAD, WRITE_RECEIVE_BUFFER, fd))
    finally:
        os.close(fd)
    return per_s * WRITE_FRAME_PAYLOAD / 1e6, path


def measure_all(quick: bool = False, directory: str | None = None) -> list[Limit]:
    scale = 1 if quick else 4
    tcp_bytes, file_bytes, frames = 256 * CHUNK * scale, 128 * CHUNK * scale, 250_000 * scale
    with tempfile.TemporaryDirectory(dir=directory) as workdir:
        path = os.path.join(workdir, "hot")
        with open(path, "wb") as out:
            for _ in range(file_bytes // CHUNK):
                out.write(os.urandom(CHUNK))
        frames_per_s = median_of_3(lambda: buffered_protocol_receive(frames))
        return [
            Limit("loopback TCP, one stream", median_of_3(lambda: loopback_tcp(tcp_bytes))),
            Limit(SENDFILE, median_of_3(lambda: sendfile_hot(path, file_bytes))),
            Limit(
                "sequential write, 1 MiB chunks",
                median_of_3(lambda: sequential_write(workdir, file_bytes, False)),
            ),
            Limit(
                "sequential write + fdatasync at end",
                median_of_3(lambda: sequential_write(workdir, file_bytes, True)),
            ),
            Limit(
                "BufferedProtocol receive, 1 KiB frames",
                frames_per_s * (FRAME_PAYLOAD + 4) / 1e6,
                f"{frames_per_s / 1e6:.2f} M frames/s",
            ),
            replace(
                median_and_range(lambda: receive_and_write(workdir, tcp_bytes), 5), name=RECEIVE_AND_WRITE
            ),
            receive_and_write_sustained(workdir, tcp_bytes, 4),
        ]


def format_limits(limits: list[Limit]) -> str:
    lines = ["| machine limit (median of 3, or as noted) | MB/s | |", "|---|---:|---|"]
    lines += [f"| {limit.name} | {limit.mb_per_s:,.0f} | {limit.extra} |" for limit in limits]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller transfers, for a smoke run")
    parser.add_argument("--dir", help="directory for the file tests (default: the system temp dir)")
    args = parser.parse_args()
    print(format_limits(measure_all(args.quick, args.dir)))


if __name__ == "__main__":
    main()
