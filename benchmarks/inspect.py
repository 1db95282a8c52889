#!/usr/bin/env python3
"""Benchmark: cudaship's full listing of a large CUDA library vs NVIDIA's cuobjdump, time and peak memory.

Downloads (once, into ``$CUDASHIP_TEST_CACHE/bench`` or ``~/.cache/cudaship-tests/bench``) a real wheel
carrying hundreds of MB of device code, by default ``nvidia-cublas`` for Linux x86_64 (``libcublasLt.so.13``,
~545 MB), extracts the library once, then measures, each in a fresh process:

- ``cudaship``: ``inspect --format json`` of the library: every fatbin container and entry (kind, arch,
  section, compression, sizes, PTX ISA), imports, exports, linkage;
- ``cudaship (in wheel)``: the same, reading the library straight out of the wheel (deflated member streamed
  into a bounded temporary file, then mapped);
- ``cuobjdump --list-elf`` and ``cuobjdump --list-ptx`` (what a user runs to get the same listing).

Time is wall-clock; peak memory is the child's maximum resident set size (``getrusage``). Prints a table and
the ratios; ``--json FILE`` also writes them. Results go in docs/performance.md.

Usage: python benchmarks/inspect.py [--library PATH | --project NAME --member REGEX] [--repeat N]
"""

# ruff: noqa: E402  (the path fix below must run before any import that imports the standard ``inspect``)
from __future__ import annotations

import os
import sys

# Run as a script, this file's directory is sys.path[0] and this file would shadow the standard ``inspect``.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse
import json
import platform
import re
import shutil
import statistics
import subprocess
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

#: Runs one command and prints its wall time and peak RSS (the child's only: a fresh process per measurement).
_MEASURE = r"""
import json, resource, subprocess, sys, time
def status(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "RssFile"):
                    fields[key] = int(value.split()[0])
    except OSError:
        pass
    return fields
start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
peaks = {"RssAnon": 0, "RssFile": 0}
import threading
out = {}
reader = threading.Thread(target=lambda: out.update(zip(("stdout", "stderr"), child.communicate())))
reader.start()
while child.poll() is None:
    for key, value in status(child.pid).items():
        peaks[key] = max(peaks[key], value)
    time.sleep(0.005)
reader.join()
wall = time.perf_counter() - start
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall_s": wall, "peak_mib": peak_kib / 1024, "rc": child.returncode,
                  "anon_mib": peaks["RssAnon"] / 1024, "file_mib": peaks["RssFile"] / 1024,
                  "stdout_bytes": len(out["stdout"]),
                  "stderr": out["stderr"].decode(errors="replace")[-400:]}))
"""


#: Where cudaship's time goes, phase by phase, in one fresh process (same library, same code path).
_PHASES = r"""
import gc, json, mmap, sys, time
from cudaship.cli.main import GC_THRESHOLD
gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])  # as the console script does
t0 = time.perf_counter()
from cudaship.analysis.linkage import cuda_linkage
from cudaship.binary import _search, devicescan, strings
from cudaship.binary.devicescan import scan_containers
from cudaship.binary.elf import read_elf
from cudaship.render import inspect_json
from cudaship.render.style import Style
from cudaship.inspection.walk import inspect_paths
t1 = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    t2 = time.perf_counter(); host = read_elf(m)
    # as inspect scans: rejected candidates reported only in device sections (8-byte search elsewhere)
    t3 = time.perf_counter(); containers = scan_containers(m, host.sections, all_rejected=False).containers
    ranges = [(s.offset, s.offset + s.size) for s in host.sections
              if s.name.startswith((".rodata", ".lrodata"))]
    s0 = time.perf_counter(); strings.library_names(m, ranges)
    s1 = time.perf_counter(); strings.runtime_markers(m, ranges); s2 = time.perf_counter()
    t4 = time.perf_counter(); cuda_linkage(host)
    t5 = time.perf_counter()
    entries = sum(len(c.entries) for c in containers)
    del containers, host
    m.close()
report = inspect_paths([sys.argv[1]])
t6 = time.perf_counter(); inspect_json.render(report, Style()); t7 = time.perf_counter()
workers = devicescan._worker_count() if _search.native_available() else 1
print(json.dumps({"imports_s": t1 - t0, "host_reader_s": t3 - t2, "of_which_library_names_s": s1 - s0,
                  "of_which_runtime_markers_s": s2 - s1, "device_scan_s": t4 - t3,
                  "linkage_s": t5 - t4, "json_render_s": t7 - t6, "entries": entries,
                  "search": ("memmem" if _search.native_available() else "portable find")
                  + f", {workers} thread(s) for 48 MiB or more"}))
"""


@dataclass
class Result:
    name: str
    command: list[str]
    wall_s: float  #: median over the repeats
    wall_all: list[float]
    peak_mib: float  #: largest peak RSS over the repeats (getrusage ru_maxrss)
    anon_mib: float  #: largest sampled anonymous RSS (heap: what the tool allocated)
    file_mib: (
        float  #: largest sampled file-backed RSS (pages of the mapped library, shared with the page cache)
    )
    rc: int
    output_bytes: int


def cache_dir() -> Path:
    root = Path(os.environ.get("CUDASHIP_TEST_CACHE", Path.home() / ".cache" / "cudaship-tests")) / "bench"
    root.mkdir(parents=True, exist_ok=True)
    return root


def cuobjdump() -> str:
    for base in map(Path, sys.path):
        candidate = base / "nvidia" / "cu13" / "bin" / "cuobjdump"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("cuobjdump")
    if found is None:
        sys.exit("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    return found


def download(project: str, platform_tag: str) -> Path:
    wanted = re.sub(r"[-_.]+", "_", project).lower()
    for wheel in sorted(cache_dir().glob("*.whl")):
        if wheel.name.lower().startswith(wanted + "-") and platform_tag in wheel.name:
            return wheel
    print(f"downloading {project} ({platform_tag}) into {cache_dir()} ...", file=sys.stderr)
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
            "--platform", platform_tag, "--python-version", "3.12", "--dest", str(cache_dir()), project,
        ],
        check=True,
    )  # fmt: skip
    return download(project, platform_tag)


def extract(wheel: Path, member_pattern: str) -> tuple[Path, str]:
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if re.search(member_pattern, n)]
        if not names:
            sys.exit(f"no member of {wheel.name} matches {member_pattern!r}")
        name = max(names, key=lambda n: z.getinfo(n).file_size)
        target = cache_dir() / Path(name).name
        if not target.is_file() or target.stat().st_size != z.getinfo(name).file_size:
            print(f"extracting {name} ...", file=sys.stderr)
            with z.open(name) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    return target, name


def run_once(command: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True, check=True
    )
    return cast(dict[str, Any], json.loads(done.stdout))


def measure_interleaved(tools: list[tuple[str, list[str]]], repeat: int) -> list[Result]:
    """Each tool once per round, ``repeat`` rounds: load from other jobs hits every tool alike."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in tools}
    for _ in range(repeat):
        for name, command in tools:
            runs[name].append(run_once(command))
    results = []
    for name, command in tools:
        done = runs[name]
        rc = max(r["rc"] for r in done)
        if rc not in (0, 1, 2) and name.startswith("cudaship"):
            sys.exit(f"{name} failed: {done[-1]['stderr']}")
        results.append(
            Result(
                name=name,
                command=command,
                wall_s=statistics.median(r["wall_s"] for r in done),
                wall_all=[round(r["wall_s"], 3) for r in done],
                peak_mib=max(r["peak_mib"] for r in done),
                anon_mib=max(r["anon_mib"] for r in done),
                file_mib=max(r["file_mib"] for r in done),
                rc=rc,
                output_bytes=done[-1]["stdout_bytes"],
            )
        )
    return results


def byte_compile() -> None:
    """Compile cudaship's modules to bytecode first, as ``pip install`` does: with ``PYTHONDONTWRITEBYTECODE``
    set (or a read-only tree) a module edited since its last compile is otherwise compiled again in every
    run (30 ms of start-up), which no installed copy pays."""
    import cudaship

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", os.path.dirname(cudaship.__file__)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--library", type=Path, help="a library to measure instead of downloading one")
    parser.add_argument(
        "--project", default="nvidia-cublas", help="PyPI project to download (default: %(default)s)"
    )
    parser.add_argument(
        "--platform", default="manylinux_2_27_x86_64", help="pip --platform (default: %(default)s)"
    )
    parser.add_argument(
        "--member", default=r"libcublasLt\.so", help="member to measure (regex; largest match)"
    )
    parser.add_argument("--wheel", type=Path, help="with --library: also inspect this wheel (holding it)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool; the median time is reported")
    parser.add_argument("--skip-cuobjdump", action="store_true", help="measure cudaship only")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()

    wheel: Path | None = None
    if args.library:
        library, member = args.library, args.library.name
        wheel = args.wheel
    else:
        wheel = download(args.project, args.platform)
        library, member = extract(wheel, args.member)
    byte_compile()
    cudaship = [sys.executable, "-m", "cudaship", "inspect", "--no-progress", "--format", "json"]
    tools = [("cudaship", [*cudaship, str(library)])]
    if wheel is not None:
        tools.append(("cudaship (in wheel)", [*cudaship, str(wheel)]))
    if not args.skip_cuobjdump:
        tool = cuobjdump()
        tools.append(("cuobjdump --list-elf", [tool, "--list-elf", str(library)]))
        tools.append(("cuobjdump --list-ptx", [tool, "--list-ptx", str(library)]))
    load_before = os.getloadavg()[0]
    results = measure_interleaved(tools, args.repeat)
    load_after = os.getloadavg()[0]

    phases = json.loads(
        subprocess.run(
            [sys.executable, "-c", _PHASES, str(library)], capture_output=True, text=True, check=True
        ).stdout
    )
    size_mb = library.stat().st_size / 1e6
    print(f"library: {member} ({size_mb:,.0f} MB){f' from {wheel.name}' if wheel else ''}")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average {load_before:.2f} before, {load_after:.2f} after; search: {phases.pop('search')}"
    )
    print(f"{'tool':<24} {'median s':>9} {'peak MiB':>9} {'anon MiB':>9} {'file MiB':>9}  runs (s)")
    for r in results:
        print(
            f"{r.name:<24} {r.wall_s:>9.3f} {r.peak_mib:>9.0f} {r.anon_mib:>9.0f} {r.file_mib:>9.0f}"
            + f"  {r.wall_all}"
            + (f"  rc={r.rc}" if r.rc else "")
        )
    print(
        "cudaship phases (one run): "
        + ", ".join(f"{k[:-2].replace('_', ' ')} {v:.3f} s" for k, v in phases.items() if k.endswith("_s"))
        + f"; {phases['entries']} device-code entries"
    )
    summary: dict[str, float] = {}
    if not args.skip_cuobjdump:
        ours = results[0]
        elf, ptx = results[-2], results[-1]
        both_s = elf.wall_s + ptx.wall_s
        summary = {
            "cuobjdump_total_s": both_s,
            "speedup": both_s / ours.wall_s,
            "speedup_vs_list_elf": elf.wall_s / ours.wall_s,
            "memory_ratio": max(elf.peak_mib, ptx.peak_mib) / ours.peak_mib,
        }
        print(
            f"cudaship is {summary['speedup']:.1f}x faster than cuobjdump --list-elf + --list-ptx "
            f"({both_s:.2f} s vs {ours.wall_s:.2f} s), "
            f"{summary['speedup_vs_list_elf']:.1f}x than --list-elf alone; "
            f"peak memory {ours.peak_mib:.0f} MiB vs {max(elf.peak_mib, ptx.peak_mib):.0f} MiB "
            f"({summary['memory_ratio']:.1f}x less)"
        )
        ok = summary["speedup"] >= 30 and ours.peak_mib < 300
        print("target (>= 30x faster, < 300 MB peak):", "met" if ok else "NOT met")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "library": member,
                    "size_bytes": library.stat().st_size,
                    "results": [asdict(r) for r in results],
                    "phases": phases,
                    "load_average": [load_before, load_after],
                    **summary,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
