"""cudaship's device-code readers against NVIDIA's cuobjdump (13.x, from the nvidia-cuda-cuobjdump wheel).

Known differences, asserted below (docs/formats.md explains them):

* ``--list-elf`` drops the 'f' of family SASS (``sm_100f`` cubins are listed as ``sm_100``); ``-elf`` headers
  and ``--list-ptx`` keep it. cudaship reports ``sm_100f``.
* Without ``-all`` cuobjdump lists only the whole-program fatbin when a file also has a relocatable one;
  cudaship reports both, marking relocatable entries.
* cuobjdump stops with "Invalid ELF" part-way through bitsandbytes' CUDA 12.1 library; cudaship reads it all.
* LTO-IR entries are not listed by ``--list-elf`` / ``--list-ptx``; ``-elf`` shows them as "nvvm" blocks.

Kernels: ``-elf`` prints each cubin's symbol table; a kernel is a row of type ``FUNC`` whose "Other" column
says ``ENTRY`` (STO_CUDA_ENTRY). cudaship's count per cubin equals that count for every build, including the
two with no ``__global__`` (``no_kernels``, ``device_data``: zero), and for nvidia-cufft 12.0.0.61's
``libcufftw.so.12`` (one sm_75 cubin, zero kernels) and ``libcufft.so.12`` (whose first sm_75 cubin is empty).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from cudaship.binary.cubin import cubin_is_relocatable, entry_details, read_cubin
from cudaship.binary.devicescan import find_containers, read_device_file
from cudaship.binary.fatbin import entry_payload
from cudaship.records.binary import Compression, DeviceCode, DeviceCodeKind
from tests.fixtures import cuobjdump_path
from tests.fixtures.nvcc import BUILDS, NvccBuild, builds_of_kind, elf_sections, extract_members

Build = Callable[[str], Path]
_LISTED = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(?:cubin|ptx)$")
_ELF_LINE = re.compile(
    r"^64-bit ELF: type=(ET_\w+), ABI=(\d+), sm=(\d+)([af]?), toolkit=([\d.]+), flags=(0x[0-9a-f]+)"
)


@pytest.fixture(scope="module")
def cuobjdump() -> Path:
    path = cuobjdump_path()
    if path is None:
        pytest.skip("cuobjdump is not installed (pip install nvidia-cuda-cuobjdump)")
    return path


def run(cuobjdump: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(cuobjdump), *args], capture_output=True, text=True, timeout=300, check=False)


def listed(
    cuobjdump: Path, path: Path, *, all_fatbins: bool = True
) -> tuple[Counter[tuple[str, str]], int, str]:
    """(kind, arch) of each entry ``--list-elf`` / ``--list-ptx`` print, the worst exit code, stderr."""
    found: Counter[tuple[str, str]] = Counter()
    codes, errors = [], []
    for option in ("--list-elf", "--list-ptx"):
        done = run(cuobjdump, *(["-all"] if all_fatbins else []), option, str(path))
        codes.append(done.returncode)
        errors.append(done.stderr.strip())
        for line in done.stdout.splitlines():
            match = _LISTED.match(line.strip())
            if match:
                kind, arch = match.groups()
                found[
                    "sass" if kind == "ELF" else "ptx",
                    arch.replace("sm_", "compute_") if kind == "PTX" else arch,
                ] += 1
    return found, max(codes), "\n".join(errors)


def ours(entries: list[DeviceCode], *, drop_f_on_sass: bool) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for entry in entries:
        if entry.kind is DeviceCodeKind.SASS:
            arch = entry.arch[:-1] if drop_f_on_sass and entry.variant == "f" else entry.arch
            out["sass", arch] += 1
        elif entry.kind is DeviceCodeKind.PTX:
            out["ptx", entry.arch] += 1
    return out


@dataclass
class Block:
    """One "Fatbin elf/ptx code:" block of ``cuobjdump -all -elf``."""

    kind: str
    fields: dict[str, str]
    flags: set[str]
    elf: tuple[str, ...] | None = None
    kernels: int = 0  #: symbol table rows ``FUNC ... ENTRY`` (STO_CUDA_ENTRY) of its cubin


def blocks(cuobjdump: Path, path: Path) -> list[Block]:
    done = run(cuobjdump, "-all", "-elf", str(path))
    assert done.returncode == 0, done.stderr
    out: list[Block] = []
    for line in done.stdout.splitlines():
        line = line.strip()
        if line.startswith("Fatbin ") and line.endswith(" code:"):
            out.append(Block(line.split()[1], {}, set()))
        elif out and " = " in line and out[-1].elf is None:
            key, value = line.split(" = ", 1)
            out[-1].fields[key.strip()] = value.strip()
        elif out and line in ("compressed", "has debug info") and out[-1].elf is None:
            out[-1].flags.add(line)
        elif out and (match := _ELF_LINE.match(line)) and out[-1].elf is None:
            out[-1].elf = match.groups()
        elif out and out[-1].elf is not None and _is_kernel_row(line):
            out[-1].kernels += 1
    return out


def _is_kernel_row(line: str) -> bool:
    """A ``.symtab`` row of ``cuobjdump -elf``: ``Num Value Size Type Bind Vis Other Ndx Name``."""
    cells = line.split()
    return len(cells) >= 9 and cells[3] == "FUNC" and cells[6] == "ENTRY"


def cuobjdump_kernel_counts(cuobjdump: Path, path: Path) -> Counter[tuple[str, int]]:
    """(sm, kernels) of every cubin ``cuobjdump -all -elf`` prints."""
    return Counter((f"sm_{b.elf[2]}", b.kernels) for b in blocks(cuobjdump, path) if b.elf is not None)


def our_kernel_counts(data: bytes, entries: list[DeviceCode]) -> Counter[tuple[str, int]]:
    found: Counter[tuple[str, int]] = Counter()
    for entry in entries:
        if entry.kind is DeviceCodeKind.SASS:
            kernels = entry_details(data, entry).kernels
            assert kernels is not None
            found[f"sm_{entry.sm}", kernels] += 1
    return found


def entries_of(path: Path) -> tuple[bytes, list[DeviceCode]]:
    data = path.read_bytes()
    if path.suffix == ".fatbin":
        return data, list(read_device_file(data).entries)
    sections = elf_sections(path) if data.startswith(b"\x7fELF") else []
    return data, [e for c in find_containers(data, sections) for e in c.entries]


# --- nvcc builds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("build", builds_of_kind("shared", "static", "fatbin"), ids=lambda b: b.name)
def test_listing_matches(cuobjdump: Path, nvcc_build: Build, build: NvccBuild) -> None:
    path = nvcc_build(build.name)
    _, entries = entries_of(path)
    theirs, code, errors = listed(cuobjdump, path)
    if not theirs:
        assert "does not contain device code" in errors or "No " in errors
    assert ours(entries, drop_f_on_sass=True) == theirs
    if any(e.variant == "f" and e.kind is DeviceCodeKind.SASS for e in entries):
        assert ours(entries, drop_f_on_sass=False) != theirs  # the 'f' that --list-elf loses
    assert code == 0 or not theirs


@pytest.mark.parametrize("build", builds_of_kind("shared", "static", "fatbin"), ids=lambda b: b.name)
def test_entry_headers_match_cuobjdump_elf_dump(cuobjdump: Path, nvcc_build: Build, build: NvccBuild) -> None:
    """Every field cuobjdump prints per entry, in file order, including the cubin's own ELF header line."""
    path = nvcc_build(build.name)
    data, entries = entries_of(path)
    theirs = blocks(cuobjdump, path)
    kinds = {DeviceCodeKind.SASS: "elf", DeviceCodeKind.PTX: "ptx", DeviceCodeKind.LTOIR: "nvvm"}
    assert len(theirs) == len(entries)
    for block, entry in zip(theirs, entries, strict=True):
        assert block.kind == kinds[entry.kind]
        prefix = "compute_" if entry.kind is DeviceCodeKind.PTX else "sm_"
        assert prefix + block.fields["arch"].removeprefix("sm_") == entry.arch
        assert block.fields["code version"] == "[{}]".format(entry.version.replace(".", ","))  # type: ignore[union-attr]
        assert block.fields["host"] == entry.host
        assert ("compressed" in block.flags) == (entry.compression is not Compression.NONE)
        assert ("has debug info" in block.flags) == entry.debug
        assert block.fields.get("identifier") == entry.name
        if entry.kind is DeviceCodeKind.PTX:
            assert (block.fields.get("ptxasOptions") or None) == entry.ptxas_options
        elif entry.kind is DeviceCodeKind.SASS:
            assert block.elf is not None
            elf_type, abi, sm, variant, toolkit, flags = block.elf
            payload = entry_payload(data, entry)
            info = read_cubin(payload)
            assert (info.abi_version, info.sm, info.toolkit_version, info.e_flags) == (
                int(abi),
                int(sm),
                toolkit,
                int(flags, 16),
            )
            assert variant == ("" if info.variant == "f" else info.variant)  # shows sm=100a, never sm=100f
            assert cubin_is_relocatable(payload) == (elf_type == "ET_REL")
            detailed = entry_details(data, entry)
            assert detailed.toolkit_version == toolkit
            assert detailed.kernels == block.kernels == len(info.kernels)


def test_default_listing_skips_the_relocatable_fatbin(cuobjdump: Path, nvcc_build: Build) -> None:
    path = nvcc_build("relocatable")
    _, entries = entries_of(path)
    default, _, _ = listed(cuobjdump, path, all_fatbins=False)
    everything, _, _ = listed(cuobjdump, path)
    assert default == ours([e for e in entries if not e.relocatable], drop_f_on_sass=True)
    assert everything == ours(entries, drop_f_on_sass=True)
    assert default != everything


@pytest.mark.parametrize("build", builds_of_kind("cubin"), ids=lambda b: b.name)
def test_standalone_cubin_header_line(cuobjdump: Path, nvcc_build: Build, build: NvccBuild) -> None:
    path = nvcc_build(build.name)
    done = run(cuobjdump, "-elf", str(path))
    match = next(m for line in done.stdout.splitlines() if (m := _ELF_LINE.match(line.strip())))
    elf_type, abi, sm, variant, toolkit, flags = match.groups()
    info = read_cubin(path.read_bytes())
    assert (info.abi_version, info.sm, info.toolkit_version, info.e_flags) == (
        int(abi),
        int(sm),
        toolkit,
        int(flags, 16),
    )
    assert variant == ("" if info.variant == "f" else info.variant)
    assert cubin_is_relocatable(path.read_bytes()) == (elf_type == "ET_REL") == build.relocatable
    rows = sum(1 for line in done.stdout.splitlines() if _is_kernel_row(line.strip()))
    assert len(info.kernels) == rows == len(build.kernels)


def toolkit_library(name: str) -> Path:
    """A library of the installed CUDA toolkit ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda, or beside nvcc)."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    for root in filter(None, roots):
        for sub in ("lib64", "targets/x86_64-linux/lib"):
            candidate = Path(root) / sub / name
            if candidate.is_file():
                return candidate
    pytest.skip(f"{name} is not in any CUDA toolkit found")


def test_toolkit_static_archive(cuobjdump: Path) -> None:
    """libcudadevrt.a of the installed toolkit: a real archive (its container is not 8-aligned)."""
    path = toolkit_library("libcudadevrt.a")
    _, entries = entries_of(path)
    theirs, code, errors = listed(cuobjdump, path)
    assert code == 0, errors
    assert entries
    assert ours(entries, drop_f_on_sass=True) == theirs


# --- real libraries -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bnb_cuda_libs(
    bitsandbytes_linux_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    libs = extract_members(bitsandbytes_linux_wheel, ".so", tmp_path_factory.mktemp("bnb-oracle"))
    return {p.stem.removeprefix("libbitsandbytes_"): p for p in libs if "_cuda" in p.name}


READABLE = ["cuda118", "cuda124", "cuda126", "cuda128", "cuda130", "cuda132"]


@pytest.mark.network
@pytest.mark.parametrize("cuda", READABLE, ids=str)
def test_bitsandbytes_listing_matches(cuobjdump: Path, bnb_cuda_libs: dict[str, Path], cuda: str) -> None:
    path = bnb_cuda_libs[cuda]
    _, entries = entries_of(path)
    theirs, code, errors = listed(cuobjdump, path)
    assert code == 0, errors
    assert ours(entries, drop_f_on_sass=True) == theirs
    # the default listing shows only the whole-program fatbin
    default, _, _ = listed(cuobjdump, path, all_fatbins=False)
    assert default == ours([e for e in entries if not e.relocatable], drop_f_on_sass=True)


@pytest.mark.network
def test_cuobjdump_gives_up_on_a_library_cudaship_reads(
    cuobjdump: Path, bnb_cuda_libs: dict[str, Path]
) -> None:
    path = bnb_cuda_libs["cuda121"]
    theirs, code, errors = listed(cuobjdump, path)
    assert code != 0
    assert "Invalid ELF" in errors
    data, entries = entries_of(path)
    # cudaship: every entry read, every payload decompressed and parsed, same shape as the 12.4 build
    details = [entry_details(data, e) for e in entries]
    assert all(d.kind is not DeviceCodeKind.SASS or d.toolkit_version == "12.1" for d in details)
    _, neighbour = entries_of(bnb_cuda_libs["cuda124"])
    assert ours(entries, drop_f_on_sass=False) == ours(neighbour, drop_f_on_sass=False)
    assert sum(theirs.values()) < len(entries)
    assert not theirs - ours(entries, drop_f_on_sass=True)  # what cuobjdump did list, we list too


def test_kernel_free_builds_hold_cubins_without_kernels(cuobjdump: Path, nvcc_build: Build) -> None:
    """``nvcc -shared`` adds, per SASS arch, the device-link step's cubin (tool ``nvlink``), which holds no
    kernel, beside the ``ptxas`` cubins that hold them; with no ``__global__`` only the empty one is left."""
    for name in ("no_kernels", "device_data"):
        path = nvcc_build(name)
        data, entries = entries_of(path)
        theirs = cuobjdump_kernel_counts(cuobjdump, path)
        assert theirs == our_kernel_counts(data, entries)
        assert set(theirs) == {(arch, 0) for arch in BUILDS[name].sass}
    ours_many = our_kernel_counts(*entries_of(nvcc_build("many_kernels")))
    assert ours_many == cuobjdump_kernel_counts(cuobjdump, nvcc_build("many_kernels"))
    assert ours_many == Counter({("sm_80", 8): 1, ("sm_90", 8): 1, ("sm_80", 0): 1, ("sm_90", 0): 1})


@pytest.mark.network
@pytest.mark.slow
def test_cufft_kernel_counts_match(cuobjdump: Path, cufft_linux_wheel: Path, tmp_path: Path) -> None:
    """nvidia-cufft 12.0.0.61 (CUDA 13): libcufftw.so.12's only cubin (sm_75) holds no kernel, which made
    ``doctor`` on an H200 say it "will not run on 9.0" (issue 21)."""
    (cufftw,) = extract_members(cufft_linux_wheel, "libcufftw.so.12", tmp_path)
    data, entries = entries_of(cufftw)
    assert (
        our_kernel_counts(data, entries)
        == cuobjdump_kernel_counts(cuobjdump, cufftw)
        == Counter({("sm_75", 0): 1})
    )
