"""What a Produce's writes cost per partition: one pwrite each, or one batched submission per request.

A Produce request over N partitions appends one batch to each of N segment files. odradek does that
as Kafka does, with one positional write per partition. This benchmark times the alternatives that
bound the system calls per request, on the machine and file system at hand:
- `pwrite`: `os.pwrite` per file (N system calls per round; what `LogSegment` does);
- `linux aio`: every write of the round in one `io_submit`, then one `io_getevents` (2 calls);
- `io_uring`: every write of the round in the submission ring, then one `io_uring_enter` that
  submits them and waits for all their completions (1 call).
Each round appends one 1 KiB batch (from one request-frame buffer, as the network layer hands
them over) at the end of each of N files. It prints, per partition write, the wall time and the
process's CPU time (all its threads: io_uring's io-wq workers are threads of the process), and
checks that every file holds every byte. The submissions are built with ctypes and struct, as a
Python broker would have to build them; the kernel's share shows in the gap between the columns.

Run `python bench/write_batching.py [--partitions 100,1000] [--writes 60000] [--dir .]`; `--dir`
should be on the file system of log.dirs. Linux on x86_64 or aarch64. Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import platform
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

RECORD = 1024
# (io_setup, io_submit, io_getevents, io_uring_setup, io_uring_enter) by machine
SYSCALLS = {"x86_64": (206, 209, 208, 425, 426), "aarch64": (0, 2, 4, 425, 426)}
IOCB = struct.Struct("<QIiHhIQQqQII")  # data, key, rw_flags, opcode, reqprio, fd, buf, nbytes, offset, ...
IO_EVENT = struct.Struct("<QQqq")  # data, obj, res, res2
SQE = struct.Struct("<BBHiQQIIQHHiQQ")  # opcode, flags, ioprio, fd, off, addr, len, rw_flags, user_data, ...
CQE = struct.Struct("<QiI")  # user_data, res, flags
U32 = struct.Struct("<I")
IOCB_CMD_PWRITE = 1
IORING_OP_WRITE = 23
IORING_ENTER_GETEVENTS = 1
IORING_OFF_SQES = 0x10000000

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_address = ctypes.c_char.from_buffer


def _checked(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _address_of(view: memoryview) -> int:
    return ctypes.addressof(_address(view))


Writer = Callable[[Sequence[int], Sequence[memoryview], list[int]], None]


def pwrite_round(fds: Sequence[int], views: Sequence[memoryview], positions: list[int]) -> None:
    for index, (fd, view) in enumerate(zip(fds, views, strict=True)):
        positions[index] += os.pwrite(fd, view, positions[index])


class LinuxAio:
    """One io_submit of every write, then one io_getevents for their completions."""

    def __init__(self, capacity: int, calls: tuple[int, ...]) -> None:
        self._setup, self._submit, self._getevents = calls[:3]
        self._ctx = ctypes.c_ulong(0)
        _checked(_syscall(self._setup, capacity, ctypes.byref(self._ctx)), "io_setup")
        self._iocbs = bytearray(IOCB.size * capacity)
        base = _address_of(memoryview(self._iocbs))
        self._pointers = (ctypes.c_uint64 * capacity)(*(base + IOCB.size * i for i in range(capacity)))
        self._events = bytearray(IO_EVENT.size * capacity)
        self._events_c = (ctypes.c_char * len(self._events)).from_buffer(self._events)

    def __call__(self, fds: Sequence[int], views: Sequence[memoryview], positions: list[int]) -> None:
        iocbs, pack = self._iocbs, IOCB.pack_into
        for index, (fd, view) in enumerate(zip(fds, views, strict=True)):
            address = _address_of(view)
            pack(iocbs, IOCB.size * index, index, 0, 0, IOCB_CMD_PWRITE, 0, fd, address, len(view),
                 positions[index], 0, 0, 0)  # fmt: skip
        count = len(fds)
        _checked(_syscall(self._submit, self._ctx, count, self._pointers), "io_submit")
        events = self._events_c
        done = _checked(_syscall(self._getevents, self._ctx, count, count, events, None), "io_getevents")
        for slot in range(done):
            index, _, result, _ = IO_EVENT.unpack_from(self._events, IO_EVENT.size * slot)
            positions[index] += _checked(result, "aio write")


class IoUring:
    """Every write in the submission ring, then one io_uring_enter that submits and waits for all."""

    def __init__(self, capacity: int, calls: tuple[int, ...]) -> None:
        self._enter = calls[4]
        params = bytearray(120)
        self._fd = _checked(_syscall(calls[3], capacity, (ctypes.c_char * 120).from_buffer(params)), "setup")
        entries, cq_entries = struct.unpack_from("<2I", params, 0)
        sq_head, self._sq_tail, sq_mask, _, _, _, sq_array = struct.unpack_from("<7I", params, 40)
        self._cq_head, self._cq_tail, cq_mask, _, _, self._cqes = struct.unpack_from("<6I", params, 80)
        size = max(sq_array + 4 * entries, self._cqes + CQE.size * cq_entries)
        shared, protection = mmap.MAP_SHARED | mmap.MAP_POPULATE, mmap.PROT_READ | mmap.PROT_WRITE
        self._ring = mmap.mmap(self._fd, size, shared, protection, offset=0)
        self._sqes = mmap.mmap(self._fd, SQE.size * entries, shared, protection, offset=IORING_OFF_SQES)
        self._sq_mask = U32.unpack_from(self._ring, sq_mask)[0]
        self._cq_mask = U32.unpack_from(self._ring, cq_mask)[0]
        for slot in range(entries):  # the ring's slot i always names submission entry i
            U32.pack_into(self._ring, sq_array + 4 * slot, slot)

    def __call__(self, fds: Sequence[int], views: Sequence[memoryview], positions: list[int]) -> None:
        ring, sqes, mask, pack = self._ring, self._sqes, self._sq_mask, SQE.pack_into
        tail = U32.unpack_from(ring, self._sq_tail)[0]
        for index, (fd, view) in enumerate(zip(fds, views, strict=True)):
            slot = SQE.size * ((tail + index) & mask)
            pack(sqes, slot, IORING_OP_WRITE, 0, 0, fd, positions[index], _address_of(view), len(view), 0,
                 index, 0, 0, 0, 0, 0)  # fmt: skip
        count = len(fds)
        U32.pack_into(ring, self._sq_tail, (tail + count) & 0xFFFFFFFF)
        _checked(_syscall(self._enter, self._fd, count, count, IORING_ENTER_GETEVENTS, None, 0), "enter")
        head, end = U32.unpack_from(ring, self._cq_head)[0], U32.unpack_from(ring, self._cq_tail)[0]
        while head != end:
            index, result, _ = CQE.unpack_from(ring, self._cqes + CQE.size * (head & self._cq_mask))
            positions[index] += _checked(result, "io_uring write")
            head = (head + 1) & 0xFFFFFFFF
        U32.pack_into(ring, self._cq_head, head)


def measure(name: str, writer: Writer, partitions: int, rounds: int, directory: str) -> None:
    with tempfile.TemporaryDirectory(dir=directory, prefix="write-batching-") as root:
        fds = [os.open(f"{root}/{i:05d}.log", os.O_RDWR | os.O_CREAT, 0o644) for i in range(partitions)]
        frame = bytearray(os.urandom((RECORD + 64) * partitions))  # one request frame, batches apart
        views = [memoryview(frame)[i * (RECORD + 64) :][:RECORD] for i in range(partitions)]
        positions = [0] * partitions
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(rounds):
                writer(fds, views, positions)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            sizes = {os.fstat(fd).st_size for fd in fds}
        finally:
            for fd in fds:
                os.close(fd)
    if sizes != {rounds * RECORD} or set(positions) != {rounds * RECORD}:
        raise SystemExit(f"{name}: files hold {sorted(sizes)} bytes, expected {rounds * RECORD}")
    writes = partitions * rounds
    print(f"{name:>10} {partitions:>6} partitions: {wall / writes * 1e6:6.2f} us wall, "
          f"{cpu / writes * 1e6:6.2f} us CPU per partition write", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="100,1000")
    parser.add_argument("--writes", type=int, default=60_000, help="partition writes per measurement")
    parser.add_argument("--dir", default=".")
    args = parser.parse_args()
    calls = SYSCALLS.get(platform.machine())
    if sys.platform != "linux" or calls is None:
        raise SystemExit("needs Linux on x86_64 or aarch64")
    for partitions in (int(p) for p in args.partitions.split(",")):
        rounds = max(1, args.writes // partitions)
        writers: list[tuple[str, Writer]] = [
            ("pwrite", pwrite_round),
            ("linux aio", LinuxAio(partitions, calls)),
            ("io_uring", IoUring(partitions, calls)),
        ]
        for name, writer in writers * 2:  # twice, interleaved, to show the spread
            measure(name, writer, partitions, rounds, args.dir)


if __name__ == "__main__":
    main()
