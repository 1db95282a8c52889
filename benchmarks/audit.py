#!/usr/bin/env python3
"""Benchmark: ``cudaship audit`` of a 500 MB+ CUDA wheel vs ``unzip -p`` and vs the script approach it
replaces.

The wheel: NVIDIA's ``nvidia-cublas`` wheels for Linux x86_64 and Windows x86_64 (downloaded once with pip
into
``$CUDASHIP_TEST_CACHE/bench``, or ``~/.cache/cudaship-tests/bench``), their members copied as they are
(compressed bytes copied, not recompressed) into one wheel of about 870 MB with a fresh dist-info whose RECORD
carries the source wheels' hashes. It holds ``libcublasLt.so.13`` (545 MB), ``cublasLt64_13.dll`` and the
rest.

Measured in the same run, each in a fresh process, interleaved, ``--repeat`` times (median reported):

- ``unzip -p WHEEL > /dev/null``: decompressing every member once (the floor);
- ``cudaship audit --format json WHEEL`` (built-in default policy): every member decompressed once and hashed
  against RECORD, every native file read (imports, exports, RUNPATH, every fatbin container and entry), every
  default check run;
- the script approach: ``unzip`` to a directory, then ``cuobjdump --list-elf``, ``cuobjdump
--list-ptx``
  and ``readelf -d`` on every library, one after the other, as a release script does.

Peak memory is the child's maximum resident set size (``getrusage``), and the peak of its anonymous (private)
and file-backed resident memory sampled from /proc. Prints a table and the ratios; ``--json FILE`` writes
them.

Also measured in each round: ``cudaship inspect --format json WHEEL`` (the wheel's native members read in
place, in parallel, nothing unpacked to disk).

Usage: python benchmarks/audit.py [--wheel PATH] [--repeat N] [--jobs N] [--json FILE]
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
import csv
import hashlib
import io
import json
import platform
import shutil
import statistics
import struct
import subprocess
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

SOURCES = (
    ("nvidia-cublas==13.8.2.12", "manylinux_2_27_x86_64"),
    ("nvidia-cublas==13.10.0.20", "win_amd64"),
)
BENCH_WHEEL = "cudaship_bench-1.0-py3-none-manylinux_2_27_x86_64.whl"

#: Measures one command with every process it starts (worker processes included): see treemeasure.py.
_MEASURE = str(Path(__file__).resolve().parent / "treemeasure.py")


@dataclass
class Result:
    name: str
    wall_s: float  #: median
    runs: list[float]
    peak_mib: float  #: max over runs of the peak summed RSS of the command's process tree
    anon_mib: float
    file_mib: float
    rc: int
    cpu_s: float = 0.0  #: median CPU time of the whole process tree


def cache() -> Path:
    root = Path(os.environ.get("CUDASHIP_TEST_CACHE", Path.home() / ".cache" / "cudaship-tests")) / "bench"
    root.mkdir(parents=True, exist_ok=True)
    return root


def download(spec: str, plat: str) -> Path:
    project, version = spec.split("==")
    stem = project.replace("-", "_")
    for found in list(cache().glob(f"{stem}-{version}-*{plat}*.whl")) + list(
        (cache().parent / "big").glob(f"{stem}-{version}-*{plat}*.whl")
    ):
        return found
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            plat,
            "--python-version",
            "3.12",
            "-d",
            str(cache()),
            spec,
        ],
        check=True,
    )
    return next(cache().glob(f"{stem}-{version}-*{plat}*.whl"))


_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
_END = struct.Struct("<4sHHHHIIH")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def compose(sources: list[Path], out: Path) -> Path:
    """Copy every non-dist-info member of ``sources`` into ``out`` as stored compressed bytes (no
    recompression),
    with a fresh dist-info; RECORD rows come from the sources' RECORDs."""
    dist = "cudaship_bench-1.0.dist-info"
    central: list[bytes] = []
    rows: list[list[str]] = []
    seen: set[str] = set()
    tmp = out.with_suffix(".part")
    with tmp.open("wb") as dst:

        def add(name: str, info: zipfile.ZipInfo, data: bytes) -> None:
            offset = dst.tell()
            encoded = name.encode()
            dst.write(
                _LOCAL.pack(
                    b"PK\x03\x04",
                    20,
                    0,
                    info.compress_type,
                    0,
                    0x21,
                    info.CRC,
                    len(data),
                    info.file_size,
                    len(encoded),
                    0,
                )
            )
            dst.write(encoded)
            dst.write(data)
            central.append(
                _CENTRAL.pack(
                    b"PK\x01\x02",
                    20,
                    20,
                    0,
                    info.compress_type,
                    0,
                    0x21,
                    info.CRC,
                    len(data),
                    info.file_size,
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

        for source in sources:
            with zipfile.ZipFile(source) as zf, source.open("rb") as raw:
                record = next(i for i in zf.infolist() if i.filename.endswith(".dist-info/RECORD"))
                hashes = {r[0]: r for r in csv.reader(io.StringIO(zf.read(record).decode()))}
                for info in zf.infolist():
                    if info.is_dir() or ".dist-info/" in info.filename or info.filename in seen:
                        continue  # both wheels carry the same headers: keep the first copy
                    seen.add(info.filename)
                    raw.seek(info.header_offset)
                    fields = _LOCAL.unpack(raw.read(_LOCAL.size))
                    raw.seek(info.header_offset + _LOCAL.size + fields[9] + fields[10])
                    add(info.filename, info, raw.read(info.compress_size))
                    rows.append(hashes[info.filename])
        meta = {
            f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: cudaship-bench\nVersion: 1.0\n",
            f"{dist}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
            b"Tag: py3-none-manylinux_2_27_x86_64\n",
        }
        for name, data in meta.items():
            rows.append([name, f"sha256={_b64(hashlib.sha256(data).digest())}", str(len(data))])
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows([*rows, [f"{dist}/RECORD", "", ""]])
        meta[f"{dist}/RECORD"] = text.getvalue().encode()
        for name, data in meta.items():
            info = zipfile.ZipInfo(name)
            info.CRC = __import__("zlib").crc32(data)
            info.file_size = len(data)
            info.compress_type = zipfile.ZIP_STORED
            add(name, info, data)
        start = dst.tell()
        for entry in central:
            dst.write(entry)
        dst.write(_END.pack(b"PK\x05\x06", 0, 0, len(central), len(central), dst.tell() - start, start, 0))
    tmp.replace(out)
    return out


def _run_one(command: list[str], shell: bool, memory: bool) -> dict[str, float]:
    flags = [*(["--memory"] if memory else []), *(["--shell"] if shell else [])]
    args = [sys.executable, _MEASURE, *flags, *command]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout)
    return result


def measure(name: str, command: list[str], repeat: int, shell: bool = False) -> Result:
    """Time ``repeat`` runs without memory sampling (it slows the command down), then one more run for the
    memory figures (see treemeasure.py)."""
    runs = [_run_one(command, shell, memory=False) for _ in range(repeat)]
    walls = [r["wall_s"] for r in runs]
    if name.startswith("cudaship") and runs[-1]["rc"] not in (0, 1):
        raise SystemExit(f"{name} failed (exit {runs[-1]['rc']}): {runs[-1]['stderr']}")
    return Result(
        name,
        statistics.median(walls),
        walls,
        max(r["largest_process_mib"] for r in runs),  # until measure_memory: the largest single process
        0.0,
        0.0,
        int(runs[-1]["rc"]),
        statistics.median(r["cpu_s"] for r in runs),
    )


def measure_memory(result: Result, command: list[str], shell: bool = False) -> Result:
    """``result`` with its memory figures from one sampled run of ``command``."""
    run = _run_one(command, shell, memory=True)
    result.peak_mib, result.anon_mib, result.file_mib = run["peak_mib"], run["anon_mib"], run["file_mib"]
    return result


def byte_compile() -> None:
    """Compile cudaship's modules to bytecode first, as ``pip install`` does (with ``PYTHONDONTWRITEBYTECODE``
    set, a module edited since its last compile would otherwise be compiled again in every run)."""
    import cudaship

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", os.path.dirname(cudaship.__file__)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def script_approach(wheel: Path, cuobjdump: str) -> str:
    """The shell script a release job ran before cudaship: unzip, then three tools per library."""
    return (
        f"set -u; d=$(mktemp -d); unzip -q -o '{wheel}' -d \"$d\"; "
        f"find \"$d\" -type f \\( -name '*.so*' -o -name '*.dll' -o -name '*.pyd' \\) | while read -r f; do "
        f'\'{cuobjdump}\' --list-elf "$f"; \'{cuobjdump}\' --list-ptx "$f"; readelf -d "$f"; done; '
        f'rm -rf "$d"; true'
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, help="audit this wheel instead of the composed cuBLAS wheel")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None, help="cudaship audit --jobs")
    parser.add_argument("--no-script", action="store_true", help="skip the (slow) script approach")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--memory-script", action="store_true", help="also one sampled run of the script (minutes)"
    )
    args = parser.parse_args()

    wheel = args.wheel or cache() / BENCH_WHEEL
    if args.wheel is None and not wheel.exists():
        compose([download(spec, plat) for spec, plat in SOURCES], wheel)
    cudaship = [sys.executable, "-m", "cudaship"]  # the cudaship this Python imports (PYTHONPATH first)
    cuobjdump = shutil.which("cuobjdump") or next(
        (
            str(p / "nvidia" / "cu13" / "bin" / "cuobjdump")
            for p in map(Path, sys.path)
            if (p / "nvidia" / "cu13" / "bin" / "cuobjdump").is_file()
        ),
        "cuobjdump",
    )
    with tempfile.TemporaryDirectory() as empty:  # no policy file found from here: the built-in default
        os.chdir(empty)
        common = ["--no-progress", "--format", "json", "-o", os.devnull, str(wheel)]
        # --offline: dependency resolution has its own benchmark (providers.py); no index requests here
        audit_cmd = [*cudaship, "audit", "--offline", *common]
        inspect_cmd = [*cudaship, "inspect", *common]
        if args.jobs:
            audit_cmd[5:5] = ["--jobs", str(args.jobs)]
            inspect_cmd[4:4] = ["--jobs", str(args.jobs)]
        byte_compile()
        unzip: list[Result] = []
        audit: list[Result] = []
        inspect: list[Result] = []
        script: list[Result] = []
        load_before = os.getloadavg()[0]
        for _ in range(args.repeat):  # interleaved, so machine load hits every command alike
            unzip.append(
                measure("unzip -p WHEEL > /dev/null", ["unzip", "-p", str(wheel), ">", "/dev/null"], 1, True)
            )
            audit.append(measure("cudaship audit", audit_cmd, 1))
            inspect.append(measure("cudaship inspect", inspect_cmd, 1))
            if not args.no_script:
                script.append(
                    measure(
                        "script: unzip + cuobjdump x2 + readelf",
                        [script_approach(wheel, cuobjdump)],
                        1,
                        True,
                    )
                )
        load_after = os.getloadavg()[0]
        results = [_merge(unzip), _merge(audit), _merge(inspect), *([_merge(script)] if script else [])]
        # memory in runs of their own, sampled (sampling slows the command: not in the timed runs above)
        measure_memory(results[0], ["unzip", "-p", str(wheel), ">", "/dev/null"], True)
        measure_memory(results[1], audit_cmd)
        measure_memory(results[2], inspect_cmd)
        if script and args.memory_script:
            measure_memory(results[3], [script_approach(wheel, cuobjdump)], True)

    size = wheel.stat().st_size
    with zipfile.ZipFile(wheel) as zf:
        unpacked = sum(i.file_size for i in zf.infolist())
        members = len(zf.infolist())
    print(
        f"wheel: {wheel.name}: {size / 2**20:.0f} MiB, {members} members, {unpacked / 2**20:.0f} MiB unpacked"
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average {load_before:.2f} before, {load_after:.2f} after"
    )
    print(
        "wall and CPU: timed runs without memory sampling; peak, anon, file: one more run sampled every "
        "5 ms, summed PSS of every process of the command (worker processes included)"
    )
    print(
        f"{'command':42} {'wall s':>8} {'runs':>22} {'CPU s':>7} {'peak MiB':>13} {'anon MiB':>9} "
        f"{'file MiB':>9}"
    )
    for r in results:
        runs = " ".join(f"{w:.2f}" for w in r.runs)
        print(
            f"{r.name:42} {r.wall_s:8.2f} {runs:>22} {r.cpu_s:7.2f} {r.peak_mib:13.0f} {r.anon_mib:9.0f} "
            f"{r.file_mib:9.0f}"
        )
    ratios: dict[str, float | list[float]] = {
        "audit / unzip": results[1].wall_s / results[0].wall_s,
        "inspect / unzip": results[2].wall_s / results[0].wall_s,
    }
    if len(results) > 3:
        ratios["script / audit"] = results[3].wall_s / results[1].wall_s
        ratios["script / inspect"] = results[3].wall_s / results[2].wall_s
    for key, value in list(ratios.items()):
        print(f"{key}: {value:.2f}")
    # round by round: each command of a round ran back to back, under about the same load
    pairs = [("audit / unzip", 1, 0), ("inspect / unzip", 2, 0)]
    if len(results) > 3:
        pairs += [("script / audit", 3, 1), ("script / inspect", 3, 2)]
    for key, a, b in pairs:
        rounds = [x / y for x, y in zip(results[a].runs, results[b].runs, strict=True)]
        ratios[f"{key} by round"] = rounds
        print(f"{key} by round:", " ".join(f"{r:.2f}" for r in rounds))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "wheel": wheel.name,
                    "size": size,
                    "unpacked": unpacked,
                    "results": [asdict(r) for r in results],
                    "ratios": ratios,
                    "load_average": [load_before, load_after],
                },
                indent=2,
            )
        )
    return 0


def _merge(results: list[Result]) -> Result:
    walls = [w for r in results for w in r.runs]
    return Result(
        results[0].name,
        statistics.median(walls),
        walls,
        max(r.peak_mib for r in results),
        max(r.anon_mib for r in results),
        max(r.file_mib for r in results),
        results[-1].rc,
        statistics.median(r.cpu_s for r in results),
    )


if __name__ == "__main__":
    sys.exit(main())
