#!/usr/bin/env python3
"""The floor under a wheel's audit on many cores: the largest member's own inflation and hashing, and what a
parallel inflater of one deflate stream (rapidgzip, if installed) would change, with its memory on a bomb.

Prints, for the wheel's largest member: isal and zlib inflating it in 1 MiB steps (as the audit does), isal in
one call, SHA-256 over its bytes (RECORD's hash, sequential by nature), and, when ``rapidgzip`` imports,
its parallel inflation at 1, 2, 4, ... threads up to the CPUs, reading the member through a Python file
object (a zip member has no file of its own). ``--bomb`` then measures rapidgzip's resident memory after
reading the first 4 MiB of a 4 MiB deflate stream of zeros that expands to 4 GiB: how far it decodes ahead.

Why cudaship does not use it (docs/performance.md, round 4): the speed-up is real on 8 cores and more, but
it decodes ahead of the reader, so a hostile member would take memory the audit has promised not to.

Usage: python benchmarks/inflate_parallel.py WHEEL [--repeat N] [--bomb]
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402
import hashlib  # noqa: E402
import mmap  # noqa: E402
import resource  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402
import zipfile  # noqa: E402
import zlib  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

STEP = 1 << 20


def best(fn: Callable[[], int], repeat: int) -> tuple[float, int]:
    times, value = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), value


def stepped(decompressobj: Callable[[int], Any], data: memoryview) -> int:
    d = decompressobj(-15)
    return sum(len(d.decompress(data[i : i + STEP])) for i in range(0, len(data), STEP))


def parallel(rapidgzip: Any, data: memoryview, threads: int) -> int:
    from cudaship.archive.zip import BufferFile

    with BufferFile(data) as source, rapidgzip.RapidgzipFile(source, parallelization=threads) as f:
        n = 0
        while chunk := f.read(4 * STEP):
            n += len(chunk)
    return n


def hashed(whole: bytes, repeat: int) -> float:
    return best(lambda: len(hashlib.sha256(whole).digest()), repeat)[0]


def rss_mib() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bomb", action="store_true")
    args = parser.parse_args()
    from isal import isal_zlib

    from cudaship.archive.zip import BufferFile  # a file over a buffer: the member's compressed bytes

    try:
        import rapidgzip  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        rapidgzip = None

    with zipfile.ZipFile(args.wheel) as z:
        info = max(z.infolist(), key=lambda i: i.compress_size)
    with open(args.wheel, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        name_len, extra_len = struct.unpack_from("<HH", m, info.header_offset + 26)
        start = info.header_offset + 30 + name_len + extra_len
        data = memoryview(m)[start : start + info.compress_size]
        cpus = os.cpu_count() or 1
        print(
            f"{info.filename}: {info.file_size / 2**20:.0f} MiB, "
            f"{info.compress_size / 2**20:.0f} MiB deflated; {cpus} CPUs; best of {args.repeat}"
        )
        rows: list[tuple[str, float]] = []
        rows.append(
            (
                "isal, 1 MiB steps (the audit's way)",
                best(lambda: stepped(isal_zlib.decompressobj, data), args.repeat)[0],
            )
        )
        rows.append(("zlib, 1 MiB steps", best(lambda: stepped(zlib.decompressobj, data), args.repeat)[0]))
        rows.append(("isal, one call", best(lambda: len(isal_zlib.decompress(data, -15)), args.repeat)[0]))
        rows.append(
            ("SHA-256 of the member (RECORD's hash)", hashed(isal_zlib.decompress(data, -15), args.repeat))
        )
        if rapidgzip is not None:
            threads = 1
            while threads <= cpus:
                seconds, n = best(lambda t=threads: parallel(rapidgzip, data, t), args.repeat)  # type: ignore[misc]
                assert n == info.file_size, (n, info.file_size)
                rows.append((f"rapidgzip, {threads} threads", seconds))
                threads *= 2
        else:
            print("(rapidgzip is not installed: pip install rapidgzip to compare a parallel inflater)")
        for label, seconds in rows:
            print(f"  {label:<44} {seconds:7.3f} s")
        data.release()
    if args.bomb and rapidgzip is not None:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        bomb = b"".join([*(c.compress(bytes(64 << 20)) for _ in range(64)), c.flush()])
        before = rss_mib()
        with BufferFile(bomb) as source, rapidgzip.RapidgzipFile(source, parallelization=cpus) as f:
            first = f.read(4 * STEP)
            time.sleep(0.5)  # let the prefetch run as it would while the reader works on the first chunk
            after = rss_mib()
        print(
            f"bomb: {len(bomb) / 2**20:.1f} MiB deflated, 4 GiB inflated; after reading "
            f"{len(first) >> 20} MiB with {cpus} threads: resident {before} -> {after} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
