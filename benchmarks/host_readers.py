#!/usr/bin/env python3
"""Benchmark: reading the host-side facts of large real libraries with pyelftools / pefile / LIEF vs
cudaship's own struct readers (binary/elf.py, binary/pe.py). Decided the readers' approach
(docs/formats-host.md).

Every approach extracts the same facts: machine, SONAME, RUNPATH, DT_NEEDED (PE: imports + delay imports with
their symbols), dynamic symbols (defined → exports, undefined), symbol versions, sections, and the library
names and CUDA runtime marker strings stored in read-only data. Each measurement runs in a fresh process:
wall time (best of ``--repeat``, imports excluded) and the child's peak resident set size (``getrusage``), so
C++ allocations (LIEF) count as well as Python ones.

Inputs (the first two downloaded once with ``--download`` into ``$CUDASHIP_TEST_CACHE/big`` or
``~/.cache/cudaship-tests/big``, a few hundred MB each):

- ``libcublasLt.so.13`` (545 MB) and ``libcublas.so.13`` from ``nvidia-cublas`` (Linux x86_64),
- ``cublasLt64_13.dll`` (~500 MB) from ``nvidia-cublas`` (win_amd64),
- bitsandbytes 0.50.2's ``libbitsandbytes_cuda128.so`` / ``.dll`` (26 MB) from the cached test wheels.

Usage: python benchmarks/host_readers.py [--download] [--repeat N] [--json FILE]
"""

# ruff: noqa: E402  (the path fix below must run before any import that imports the standard ``inspect``)
from __future__ import annotations

import os
import sys

# Run as a script, this directory is sys.path[0]: benchmarks/inspect.py would shadow the standard ``inspect``.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse
import json
import mmap
import resource
import subprocess
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.fixtures import cache_dir

RODATA = (".rodata", ".lrodata", ".rdata")


# -- the approaches, each extracting the same facts ----------------------------------------------------------


def elf_cudaship(path: Path) -> dict[str, Any]:
    from cudaship.binary.elf import read_elf

    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
        host = read_elf(view)
        return {
            "needed": len(host.imports),
            "exports": len(host.exports),
            "undefined": len(host.undefined_symbols),
            "versioned": sum(len(i.symbols) for i in host.imports),
            "sections": len(host.sections),
            "names": sorted({*host.embedded_library_names, *host.cuda_markers}),
        }


def elf_pyelftools(path: Path) -> dict[str, Any]:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
    from elftools.elf.sections import SymbolTableSection

    from cudaship.binary import strings

    with path.open("rb") as f:  # a file object: pyelftools seeks and reads what it needs
        elf = ELFFile(f)
        needed = 0
        exports = undefined = versioned = 0
        names: set[str] = set()
        sections = 0
        symbols = []
        versym = None
        verneed_index: dict[int, str] = {}
        for section in elf.iter_sections():
            sections += 1
            if isinstance(section, DynamicSection):
                needed = sum(1 for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED")
            elif isinstance(section, SymbolTableSection) and section.name == ".dynsym":
                symbols = list(section.iter_symbols())
            elif isinstance(section, GNUVerSymSection):
                versym = section
            elif isinstance(section, GNUVerNeedSection):
                for verneed, auxes in section.iter_versions():
                    for aux in auxes:
                        verneed_index[aux.entry.vna_other] = verneed.name
            elif section.name.startswith(RODATA):
                data = section.data()  # pyelftools returns the section's bytes (a copy)
                names.update(strings.library_names(data, [(0, len(data))]))
                names.update(strings.runtime_markers(data, [(0, len(data))]))
        for index, sym in enumerate(symbols):
            if sym.entry.st_shndx == "SHN_UNDEF" and sym.name:
                undefined += sym.entry.st_info.bind == "STB_GLOBAL"
                if versym is not None and versym.get_symbol(index).entry.ndx in verneed_index:
                    versioned += 1
            elif sym.name and sym.entry.st_info.bind in ("STB_GLOBAL", "STB_WEAK"):
                exports += 1
        return {
            "needed": needed,
            "exports": exports,
            "undefined": undefined,
            "versioned": versioned,
            "sections": sections - 1,
            "names": sorted(names),
        }


def elf_lief(path: Path) -> dict[str, Any]:
    import lief

    from cudaship.binary import strings

    lief.logging.disable()
    binary = lief.ELF.parse(str(path))
    names: set[str] = set()
    for section in binary.sections:
        if section.name.startswith(RODATA):
            data = bytes(section.content)
            names.update(strings.library_names(data, [(0, len(data))]))
            names.update(strings.runtime_markers(data, [(0, len(data))]))
    dynsyms = list(binary.dynamic_symbols)
    return {
        "needed": len(binary.libraries),
        "exports": sum(1 for s in dynsyms if s.is_function or s.is_variable if not s.imported),
        "undefined": sum(1 for s in dynsyms if s.imported),
        "versioned": sum(1 for s in dynsyms if s.imported and s.has_version),
        "sections": len(binary.sections) - 1,
        "names": sorted(names),
    }


def pe_cudaship(path: Path) -> dict[str, Any]:
    from cudaship.binary.pe import read_pe

    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
        host = read_pe(view)
        return {
            "imports": len(host.imports),
            "symbols": sum(len(i.symbols) for i in host.imports),
            "exports": len(host.exports),
            "sections": len(host.sections),
            "names": sorted({*host.embedded_library_names, *host.cuda_markers}),
        }


def pe_pefile(path: Path) -> dict[str, Any]:
    import pefile

    from cudaship.binary import strings

    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
        pe = pefile.PE(data=view, fast_load=True)
        pe.parse_data_directories(
            directories=[
                pefile.DIRECTORY_ENTRY[name]
                for name in (
                    "IMAGE_DIRECTORY_ENTRY_IMPORT",
                    "IMAGE_DIRECTORY_ENTRY_EXPORT",
                    "IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT",
                )
            ]
        )
        imports = list(getattr(pe, "DIRECTORY_ENTRY_IMPORT", [])) + list(
            getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", [])
        )
        export = getattr(pe, "DIRECTORY_ENTRY_EXPORT", None)
        names: set[str] = set()
        for section in pe.sections:
            if section.Name.rstrip(b"\x00").decode() in RODATA:
                span = [(section.PointerToRawData, section.PointerToRawData + section.SizeOfRawData)]
                names.update(strings.library_names(view, span, wide=True))
                names.update(strings.runtime_markers(view, span))
        result = {
            "imports": len(imports),
            "symbols": sum(len(i.imports) for i in imports),
            "exports": len([s for s in export.symbols if s.name]) if export else 0,
            "sections": len(pe.sections),
            "names": sorted(names),
        }
        pe.close()
        return result


def pe_lief(path: Path) -> dict[str, Any]:
    import lief

    from cudaship.binary import strings

    lief.logging.disable()
    binary = lief.PE.parse(str(path))
    names: set[str] = set()
    for section in binary.sections:
        if section.name in RODATA:
            data = bytes(section.content)
            names.update(strings.library_names(data, [(0, len(data))], wide=True))
            names.update(strings.runtime_markers(data, [(0, len(data))]))
    imports = list(binary.imports) + list(binary.delay_imports)
    return {
        "imports": len(imports),
        "symbols": sum(len(list(i.entries)) for i in imports),
        "exports": len([e for e in binary.get_export().entries if e.name]) if binary.has_exports else 0,
        "sections": len(binary.sections),
        "names": sorted(names),
    }


APPROACHES: dict[str, dict[str, Callable[[Path], dict[str, Any]]]] = {
    "elf": {"cudaship": elf_cudaship, "pyelftools": elf_pyelftools, "lief": elf_lief},
    "pe": {"cudaship": pe_cudaship, "pefile": pe_pefile, "lief": pe_lief},
}


# -- inputs --------------------------------------------------------------------------------------------------


def _extract(wheel: Path, member: str, into: Path) -> Path | None:
    target = into / Path(member).name
    if target.exists():
        return target
    into.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        if member not in zf.namelist():
            return None
        with zf.open(member) as src, target.open("wb") as dst:
            while chunk := src.read(1 << 22):
                dst.write(chunk)
    return target


def inputs(download: bool) -> list[tuple[str, Path]]:
    big = cache_dir() / "big"
    big.mkdir(parents=True, exist_ok=True)
    if download:
        for platform in ("manylinux_2_27_x86_64", "win_amd64"):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--platform",
                    platform,
                    "--python-version",
                    "3.12",
                    "--dest",
                    str(big),
                    "nvidia-cublas>=13,<14",
                ],
                check=False,
            )
    found: list[tuple[str, Path]] = []
    for wheel in sorted(big.glob("nvidia_cublas-13*manylinux*.whl"))[-1:]:
        for member in ("nvidia/cu13/lib/libcublasLt.so.13", "nvidia/cu13/lib/libcublas.so.13"):
            if (path := _extract(wheel, member, big / "linux")) is not None:
                found.append(("elf", path))
    for wheel in sorted(big.glob("nvidia_cublas-13*win_amd64.whl"))[-1:]:
        if (path := _extract(wheel, "nvidia/cu13/bin/x86_64/cublasLt64_13.dll", big / "windows")) is not None:
            found.append(("pe", path))
    wheels = cache_dir() / "wheels"
    for pattern, member, kind in (
        ("bitsandbytes-0.50.2-*manylinux*.whl", "bitsandbytes/libbitsandbytes_cuda128.so", "elf"),
        ("bitsandbytes-0.50.2-*win_amd64.whl", "bitsandbytes/libbitsandbytes_cuda128.dll", "pe"),
    ):
        for wheel in sorted(wheels.glob(pattern))[:1]:
            if (path := _extract(wheel, member, big / "bitsandbytes")) is not None:
                found.append((kind, path))
    return found


# -- measuring -----------------------------------------------------------------------------------------------


#: Modules each approach imports, loaded before the clock starts (import time is not reading time).
PRELOAD = {
    "cudaship": ["cudaship.binary.elf", "cudaship.binary.pe"],
    "pyelftools": ["elftools.elf.elffile"],
    "pefile": ["pefile"],
    "lief": ["lief"],
}


def measure_one(kind: str, approach: str, path: Path) -> dict[str, Any]:
    import importlib

    for module in [*PRELOAD[approach], "cudaship.binary.strings"]:
        importlib.import_module(module)
    started = time.perf_counter()
    facts = APPROACHES[kind][approach](path)
    elapsed = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": elapsed, "peak_rss_mib": peak_kib / 1024, "facts": facts}


def run_child(kind: str, approach: str, path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, approach, str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def baseline_rss() -> float:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import resource, cudaship.binary.elf, cudaship.binary.pe;"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT / "src")},
    )
    return int(done.stdout) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--download", action="store_true", help="download the nvidia-cublas wheels first")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "APPROACH", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_one(args.child[0], args.child[1], Path(args.child[2]))))
        return 0

    results = []
    print(f"baseline interpreter + cudaship import: {baseline_rss():.0f} MiB peak RSS")
    print(f"{'file':32} {'MB':>6} {'approach':11} {'best s':>8} {'peak MiB':>9}  facts")
    for kind, path in inputs(args.download):
        size_mb = path.stat().st_size / 1e6
        for approach in APPROACHES[kind]:
            runs = [run_child(kind, approach, path) for _ in range(args.repeat)]
            good = [r for r in runs if "error" not in r]
            if not good:
                print(f"{path.name:32} {size_mb:6.0f} {approach:11} failed: {runs[0]['error']}")
                continue
            best = min(r["seconds"] for r in good)
            peak = max(r["peak_rss_mib"] for r in good)
            facts = good[0]["facts"]
            brief = {k: v for k, v in facts.items() if k != "names"}
            print(
                f"{path.name:32} {size_mb:6.0f} {approach:11} {best:8.3f} {peak:9.0f}  {brief} "
                f"names={facts['names']}"
            )
            results.append(
                {
                    "file": path.name,
                    "mb": size_mb,
                    "approach": approach,
                    "best_seconds": best,
                    "peak_rss_mib": peak,
                    "facts": facts,
                }
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
