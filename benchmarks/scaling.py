#!/usr/bin/env python3
"""Benchmark: how ``cudaship audit`` and ``inspect`` of one wheel, and ``gpus``/``audit`` of a directory of
wheels, scale with ``-j`` (1, 2, 4, 8, 16 workers), against the floor: the time to inflate the wheel's largest
member alone, on one core.

Each command runs in a fresh process; the worker counts are interleaved (one run of each per round, so load
from other jobs hits them alike) and the median of ``--repeat`` rounds is reported, with the peak RSS.

    python benchmarks/scaling.py --wheel torch-...whl [--dir DIR_OF_WHEELS] [--jobs 1,2,4,8,16]

Where no suitable wheel can be downloaded (a machine without network), ``--make-wheel SRC OUT`` and
``--make-wheels SITE_PACKAGES OUTDIR NAME...`` build real wheels from installed packages (every file of the
package deflated at level 6 on all cores, with a dist-info and a RECORD of sha256 hashes), e.g. the torch
package of an installed PyTorch.

Prints a table and the ratio of each run to the largest member's inflate time; ``--json FILE`` writes them.
"""

# ruff: noqa: E402  (the path fix below must run before the imports)
from __future__ import annotations

import os
import sys

# Run as a script, this directory is sys.path[0], and benchmarks/inspect.py would shadow the standard
# ``inspect``.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse
import base64
import hashlib
import json
import platform
import statistics
import struct
import subprocess
import tempfile
import time
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: Measures one command with every process it starts (worker processes included): see treemeasure.py.
_MEASURE = str(Path(__file__).resolve().parent / "treemeasure.py")


def measure(command: list[str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, _MEASURE, *command], capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout)
    if result["rc"] not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed (exit {result['rc']}): {result['stderr']}")
    return result


def largest_inflate(wheel: Path, repeat: int) -> tuple[str, int, float]:
    """The largest member's name, size, and the best of ``repeat`` single-threaded inflations of it (ISA-L
    when installed, as cudaship uses; output discarded chunk by chunk)."""
    try:
        from isal.isal_zlib import decompressobj
    except ImportError:
        from zlib import decompressobj  # type: ignore[assignment]
    with zipfile.ZipFile(wheel) as zf:
        info = max(zf.infolist(), key=lambda i: i.compress_size)
    with open(wheel, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
        name_len, extra_len = struct.unpack_from("<HH", header, 26)
        f.seek(info.header_offset + 30 + name_len + extra_len)
        raw = f.read(info.compress_size)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        d = decompressobj(-15)
        view = memoryview(raw)
        for pos in range(0, len(raw), 1 << 16):
            out = d.decompress(view[pos : pos + (1 << 16)], 0)
            del out
        best = min(best, time.perf_counter() - start)
    return info.filename, info.file_size, best


# -- building wheels from installed packages (for machines that cannot download) ---------------------------


def _deflate(path: Path) -> tuple[bytes, int, int, str]:
    data = path.read_bytes()
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = c.compress(data) + c.flush()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return raw, len(data), zlib.crc32(data), digest


def make_wheel(name: str, version: str, roots: list[tuple[Path, str]], out: Path) -> Path:
    """A wheel ``out`` holding every file under each (directory, prefix in the wheel) of ``roots``,
    deflated on all cores, with METADATA, WHEEL and a RECORD of sha256 hashes. Written as a plain zip (no
    zip64: members and the archive stay under 4 GiB)."""
    files: list[tuple[str, Path]] = []
    for root, prefix in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
                files.append((f"{prefix}/{path.relative_to(root).as_posix()}", path))
    dist = f"{name}-{version}.dist-info"
    out.parent.mkdir(parents=True, exist_ok=True)
    central: list[bytes] = []
    record: list[str] = []
    offset = 0
    with open(out, "wb") as f, ThreadPoolExecutor(os.cpu_count() or 1) as pool:

        def add(arcname: str, raw: bytes, size: int, crc: int) -> None:
            nonlocal offset
            encoded = arcname.encode()
            f.write(
                struct.pack(
                    "<4sHHHHHIIIHH",
                    b"PK\x03\x04",
                    20,
                    0x800,
                    8,
                    0,
                    0x21,
                    crc,
                    len(raw),
                    size,
                    len(encoded),
                    0,
                )
            )
            f.write(encoded)
            f.write(raw)
            central.append(
                struct.pack(
                    "<4sHHHHHHIIIHHHHHII",
                    b"PK\x01\x02",
                    0x314,
                    20,
                    0x800,
                    8,
                    0,
                    0x21,
                    crc,
                    len(raw),
                    size,
                    len(encoded),
                    0,
                    0,
                    0,
                    0,
                    0o100644 << 16,
                    offset,
                )
                + encoded
            )
            offset += 30 + len(encoded) + len(raw)

        for (arcname, _), (raw, size, crc, digest) in zip(
            files, pool.map(lambda fp: _deflate(fp[1]), files), strict=True
        ):
            add(arcname, raw, size, crc)
            record.append(f"{arcname},sha256={digest},{size}")
        meta = {
            f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
            f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: cudaship-bench\nRoot-Is-Purelib: false\n"
            b"Tag: py3-none-manylinux_2_28_x86_64\n",
        }
        for arcname, data in meta.items():
            raw, size, crc, digest = _deflate_bytes(data)
            add(arcname, raw, size, crc)
            record.append(f"{arcname},sha256={digest},{size}")
        record.append(f"{dist}/RECORD,,")
        raw, size, crc, _ = _deflate_bytes(("\n".join(record) + "\n").encode())
        add(f"{dist}/RECORD", raw, size, crc)
        start = offset
        directory = b"".join(central)
        f.write(directory)
        f.write(
            struct.pack(
                "<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(central), len(central), len(directory), start, 0
            )
        )
    return out


def _deflate_bytes(data: bytes) -> tuple[bytes, int, int, str]:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = c.compress(data) + c.flush()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return raw, len(data), zlib.crc32(data), digest


# -- the benchmark -----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, help="the wheel to audit and inspect")
    parser.add_argument("--dir", type=Path, help="a directory of wheels for gpus -j / audit -j")
    parser.add_argument("--jobs", default="1,2,4,8,16")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--commands", default="audit,inspect", help="of the wheel: audit, inspect")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--make-wheel", nargs=2, metavar=("SRC", "OUT"), type=Path)
    parser.add_argument(
        "--make-wheels",
        nargs="+",
        metavar="ARG",
        help="SITE_PACKAGES OUTDIR NAME...: one wheel per installed package directory NAME",
    )
    args = parser.parse_args()

    if args.make_wheel:
        src, out = args.make_wheel
        start = time.perf_counter()
        made = make_wheel(src.name, "1.0", [(src, src.name)], out)
        print(f"built {made} ({made.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - start:.1f} s")
    if args.make_wheels:
        site, outdir, *names = args.make_wheels
        for name in names:
            src = Path(site) / name
            if src.is_dir():
                made = make_wheel(
                    name.replace("-", "_"),
                    "1.0",
                    [(src, name)],
                    Path(outdir) / f"{name}-1.0-py3-none-any.whl",
                )
                print(f"built {made.name} ({made.stat().st_size / 2**20:.1f} MiB)")
    if args.wheel is None and args.dir is None:
        return 0

    jobs = [int(j) for j in args.jobs.split(",")]
    cudaship = [sys.executable, "-m", "cudaship"]
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", os.path.dirname(__import__("cudaship").__file__)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    commands: dict[str, list[str]] = {}
    if args.wheel is not None:
        for name in args.commands.split(","):
            commands[name] = [
                *cudaship,
                name,
                *(["--offline"] if name == "audit" else []),
                "--no-progress",
                "--format",
                "json",
                "-o",
                os.devnull,
                str(args.wheel),
            ]
    if args.dir is not None:
        commands["gpus DIR"] = [
            *cudaship,
            "gpus",
            "--no-progress",
            "--format",
            "json",
            "-o",
            os.devnull,
            str(args.dir),
        ]
        commands["audit DIR"] = [
            *cudaship,
            "audit",
            "--offline",  # dependency resolution has its own benchmark (providers.py): no index here
            "--no-progress",
            "--format",
            "json",
            "-o",
            os.devnull,
            str(args.dir),
        ]

    floor = None
    if args.wheel is not None:
        floor = largest_inflate(args.wheel, args.repeat)
        print(
            f"wheel {args.wheel.name}: {args.wheel.stat().st_size / 2**20:.0f} MiB; largest member "
            f"{floor[0]} ({floor[1] / 2**20:.0f} MiB): inflated alone on one core in {floor[2]:.2f} s"
        )
    if args.dir is not None:
        wheels = sorted(args.dir.glob("*.whl"))
        mib = sum(w.stat().st_size for w in wheels) / 2**20
        print(f"directory {args.dir}: {len(wheels)} wheels, {mib:.0f} MiB")
    results: dict[str, dict[int, list[dict[str, float]]]] = {c: {j: [] for j in jobs} for c in commands}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as empty:
        os.chdir(empty)  # no policy file found from here: the built-in default
        for _ in range(args.repeat):
            for name, command in commands.items():
                for j in jobs:
                    run = measure([*command[:4], "-j", str(j), *command[4:]])
                    results[name][j].append(run)
                    print(f"  {name} -j {j}: {run['wall_s']:.2f} s", file=sys.stderr, flush=True)
    load_after = os.getloadavg()[0]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average {load_before:.2f} before, {load_after:.2f} after"
    )
    table = []
    print(
        f"{'command':16} {'-j':>3} {'wall s':>7} {'runs':>20} {'CPU s':>6} {'peak MiB':>9} {'/ floor':>8} "
        f"{'speed-up':>8}"
    )
    for name, by_jobs in results.items():
        base = statistics.median(r["wall_s"] for r in by_jobs[jobs[0]])
        for j, runs in by_jobs.items():
            wall = statistics.median(r["wall_s"] for r in runs)
            cpu = statistics.median(r["cpu_s"] for r in runs)
            peak = max(r["peak_mib"] for r in runs)
            ratio = wall / floor[2] if floor and "DIR" not in name else None
            shown = " ".join(f"{r['wall_s']:.2f}" for r in runs)
            print(
                f"{name:16} {j:3} {wall:7.2f} {shown:>20} {cpu:6.2f} {peak:9.0f} "
                f"{(f'{ratio:.2f}' if ratio else '-'):>8} {base / wall:8.2f}"
            )
            table.append(
                {
                    "command": name,
                    "jobs": j,
                    "wall_s": wall,
                    "runs": [r["wall_s"] for r in runs],
                    "cpu_s": cpu,
                    "peak_mib": peak,
                    "over_largest_inflate": ratio,
                }
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"floor": floor, "results": table, "load_average": [load_before, load_after]}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
