"""A local package index of 5,000+ generated CUDA wheels for `cudaship survey`'s scale benchmark.

    python benchmarks/survey_index.py generate DIR [--wheels 5200] [--seed 34] [--total-mb 2500]
    python benchmarks/survey_index.py serve DIR [--port 8765]       # PEP 691 JSON + PEP 503 HTML on 127.0.0.1

``generate`` writes ``DIR/files/*.whl`` and ``DIR/index.json`` (project -> files with size, sha256, PEP 700
upload time); a second ``generate`` with the same arguments finds ``DIR/index.json`` and does nothing, so the
directory is the reusable index. Everything is built on this machine, without network:

- **The pool** (``DIR/pool/``, built once): small shared libraries compiled by ``nvcc`` (CUDA 13.0 here and on
  the H200 host) for the arch sets real projects ship over time (sm_75..sm_86 + PTX; sm_80..sm_90 + PTX;
  sm_90a; sm_80..sm_120 + compute_120; the family variants sm_100f/sm_120f; PTX only; cudart static), a
  library without CUDA (gcc), and the toolkit's own ``libcudart.so.13`` (the vendored copy). Windows DLLs are
  written here as minimal PE32+ images (importing ``cudart64_1x.dll``; the fatbin as the Linux library in
  a ``.nv_fatb`` section): no MinGW needed. aarch64 wheels carry the x86_64 libraries with ``e_machine`` set
  to AArch64 (the readers read headers and device code, never host code). The CUDA major a library is built
  for (11, 12, 13) is its ``DT_NEEDED``/import name (``libcudart.so.12``, same length, patched in).
- **The wheels**: projects x versions (upload times from 2021 to 2026: newer versions carry newer archs and
  CUDA majors) x platforms (manylinux x86_64, aarch64, win_amd64) x Python tags. Each wheel holds a few
  Python files and 0-4 native members; a library's size is its real bytes plus a padding region after it
  (compressible bytes that can hold no fatbin, cubin or PTX magic), so sizes spread from a few KB to tens of
  MB (lognormal, scaled so the index totals about ``--total-mb``); every native member ends with a salt
  naming its wheel, so each library is a distinct file (sha256), except the vendored NVIDIA runtimes, which
  are byte-identical copies (what the survey's member cache is for). RECORD holds every member's sha256.
- **Fast**: each library and padding is deflated once; a member is its library's deflate stream, the
  padding's and the salt's, concatenated (each compressed with a fresh compressor after a full flush, so no
  back-reference crosses a boundary: a valid stream), with CRC-32 and sha256 continued from saved states.
  Writing a wheel is copying bytes.

``serve`` answers ``GET /simple/`` (project list), ``/simple/<project>/`` (PEP 691 JSON when the Accept header
asks for ``application/vnd.pypi.simple.v1+json``, else PEP 503 HTML), and ``/files/<wheel>`` with byte ranges
(``Range: bytes=a-b`` and ``bytes=-n``), bodies by ``os.sendfile``; it counts requests and bytes (``/stats``).
:func:`serving` runs it in a child process (its own interpreter, so the benchmark's client does not share its
GIL) and yields the index URL.
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
import html
import json
import math
import random
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FORMAT = 2  #: bumped when the generated index changes for the same arguments
ZIP_TIME = (0, (1 << 5) | 1)  #: DOS time 00:00:00, date 1980-01-01 (deterministic)

# --- the pool ----------------------------------------------------------------------------------------------

KERNELS = r"""
template <int K> __global__ void axpy(float *y, const float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] * K + y[i];
}
template <int K> __global__ void reduce(const float *x, float *out, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] * K : 0.0f;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, s[0]);
}
#define INSTANTIATE(K) template __global__ void axpy<K>(float *, const float *, float, int); \
                       template __global__ void reduce<K>(const float *, float *, int);
INSTANTIATE(1) INSTANTIATE(2) INSTANTIATE(3) INSTANTIATE(4) INSTANTIATE(5) INSTANTIATE(6) INSTANTIATE(7)
INSTANTIATE(8)
extern "C" int bench_launch(float *y, const float *x, int n) {
    axpy<1><<<(n + 255) / 256, 256>>>(y, x, 2.0f, n);
    return (int)cudaGetLastError();
}
"""


def _gencode(sass: tuple[str, ...], ptx: tuple[str, ...]) -> list[str]:
    """nvcc -gencode flags: SASS for each of ``sass`` (``90a``, ``100f``), PTX for each of ``ptx``."""
    flags: list[str] = []
    for sm in sass:
        flags += ["-gencode", f"arch=compute_{sm},code=sm_{sm}"]
    for sm in ptx:
        flags += ["-gencode", f"arch=compute_{sm},code=compute_{sm}"]
    return flags


@dataclass(frozen=True)
class Recipe:
    name: str
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    cudart: str = "shared"  #: shared | static | none (gcc, no CUDA at all)


#: The libraries of the pool: the arch sets of successive eras (``ERAS`` says which a wheel of a date uses).
RECIPES: tuple[Recipe, ...] = (
    Recipe("turing", ("75", "80", "86"), ("86",)),
    Recipe("ampere", ("80", "86", "89", "90"), ("90",)),
    Recipe("hopper", ("80", "90a"), ("90",)),
    Recipe("blackwell", ("80", "90", "100", "120"), ("120",)),
    Recipe("family", ("90", "100f", "120f"), ("120",)),
    Recipe("arch_specific", ("90a", "100a", "120a"), ()),
    Recipe("ptx_only", (), ("75",)),
    Recipe("static", ("80", "90", "100", "120"), ("120",), cudart="static"),
    Recipe("cpu", (), (), cudart="none"),
)


def _nvcc() -> str:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        sys.exit("survey_index: nvcc not found (CUDA 13.0's nvcc builds the pool); put it on PATH")
    return nvcc


def _build_one(recipe: Recipe, pool: Path) -> Path:
    out = pool / f"lib{recipe.name}.so"
    if out.exists():
        return out
    src = pool / "kernels.cu"
    tmp = pool / f".{out.name}.tmp"
    if recipe.cudart == "none":
        c = pool / "cpu.c"
        c.write_text(
            "int bench_cpu(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * i; return s; }\n"
        )
        cmd = ["gcc", "-shared", "-fPIC", "-O2", str(c), "-o", str(tmp)]
    else:
        cmd = [_nvcc(), "-shared", "-Xcompiler", "-fPIC", "-O2", "-cudart", recipe.cudart]
        cmd += [*_gencode(recipe.sass, recipe.ptx), str(src), "-o", str(tmp)]
    subprocess.run(cmd, check=True, capture_output=True)
    tmp.rename(out)
    return out


def _runtime_library() -> Path | None:
    """The toolkit's libcudart.so.13 (a real NVIDIA runtime, vendored by some wheels)."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    roots.append(str(Path(_nvcc()).resolve().parent.parent))
    for root in filter(None, roots):
        for d in ("lib64", "targets/x86_64-linux/lib", "lib"):
            p = Path(root) / d / "libcudart.so.13"
            if p.exists():
                return p.resolve()
    return None


def build_pool(pool: Path) -> dict[str, bytes]:
    """The pool's libraries by recipe name (plus ``cudart`` when the toolkit has one), built once."""
    pool.mkdir(parents=True, exist_ok=True)
    (pool / "kernels.cu").write_text(KERNELS)
    with ThreadPoolExecutor(max(1, min(len(RECIPES), os.cpu_count() or 1))) as ex:
        paths = list(ex.map(lambda r: _build_one(r, pool), RECIPES))
    libs = {r.name: p.read_bytes() for r, p in zip(RECIPES, paths, strict=True)}
    runtime = _runtime_library()
    if runtime is not None:
        libs["cudart"] = runtime.read_bytes()
    return libs


# --- ELF and PE -------------------------------------------------------------------------------------------


def elf_section(data: bytes, wanted: str) -> bytes | None:
    """The bytes of ELF64 section ``wanted`` (little-endian), or None."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab_off, strtab_size = headers[shstrndx][4], headers[shstrndx][5]
    strtab = data[strtab_off : strtab_off + strtab_size]
    for name, _type, _flags, _addr, offset, size in headers:
        if strtab[name : strtab.index(b"\0", name)].decode() == wanted:
            return data[offset : offset + size]
    return None


def elf_for(data: bytes, *, major: int, machine: str) -> bytes:
    """``data`` linked against CUDA ``major``'s runtime (its ``libcudart.so.13`` strings renamed, same length)
    and, for aarch64, with ``e_machine`` AArch64 (183)."""
    if major != 13:
        data = data.replace(b"libcudart.so.13", f"libcudart.so.{major}".encode())
    if machine == "aarch64":
        data = data[:0x12] + struct.pack("<H", 183) + data[0x14:]
    return data


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def make_pe(*, imports: dict[str, list[str]], fatbin: bytes | None, exports_name: str | None = None) -> bytes:
    """A minimal PE32+ (x64) DLL: ``.text`` (one ``ret``), ``.rdata`` with the import table of ``imports``
    (dll -> function names) and an export directory naming the DLL, and ``.nv_fatb`` holding ``fatbin``."""
    file_align, sect_align = 0x200, 0x1000
    sections: list[tuple[bytes, bytes, int]] = []  # name, raw data, characteristics
    text = b"\xc3" + b"\xcc" * 15
    sections.append((b".text", text, 0x60000020))
    # .rdata at RVA 0x2000: import descriptors, ILT, IAT, hint/names, dll names, export directory
    rva = 0x2000
    dlls = list(imports)
    desc_size = 20 * (len(dlls) + 1)
    thunks = {d: 8 * (len(imports[d]) + 1) for d in dlls}
    ilt_off = desc_size
    iat_off = ilt_off + sum(thunks.values())
    names_off = iat_off + sum(thunks.values())
    blob = bytearray()
    hint_names: dict[tuple[str, str], int] = {}
    pos = names_off
    for d in dlls:
        for fn in imports[d]:
            entry = struct.pack("<H", 0) + fn.encode() + b"\0"
            entry += b"\0" * (len(entry) % 2)
            hint_names[(d, fn)] = pos
            blob += entry
            pos += len(entry)
    dll_names: dict[str, int] = {}
    for d in dlls:
        dll_names[d] = pos
        blob += d.encode() + b"\0"
        pos += len(d) + 1
    export_off = _align(pos, 4)
    blob += b"\0" * (export_off - pos)
    export = b""
    if exports_name:
        name_rva = rva + export_off + 40
        export = (
            struct.pack("<IIHHIIIIIII", 0, 0, 0, 0, name_rva, 1, 0, 0, 0, 0, 0)
            + exports_name.encode()
            + b"\0"
        )
    rdata = bytearray(desc_size)
    ilt = bytearray()
    cur_ilt, cur_iat = ilt_off, iat_off
    for i, d in enumerate(dlls):
        struct.pack_into("<IIIII", rdata, 20 * i, rva + cur_ilt, 0, 0, rva + dll_names[d], rva + cur_iat)
        for fn in imports[d]:
            ilt += struct.pack("<Q", rva + hint_names[(d, fn)])
        ilt += b"\0" * 8
        cur_ilt += thunks[d]
        cur_iat += thunks[d]
    iat = bytes(ilt)
    rdata += ilt + iat + blob + export
    sections.append((b".rdata", bytes(rdata), 0x40000040))
    if fatbin:
        sections.append((b".nv_fatb", fatbin, 0x40000040))
    nsec = len(sections)
    headers_size = _align(0x80 + 4 + 20 + 240 + 40 * nsec, file_align)
    layout = []
    raw_ptr, vaddr = headers_size, 0x1000
    for name, data, chars in sections:
        raw_size = _align(len(data), file_align)
        layout.append((name, data, chars, vaddr, raw_ptr, raw_size))
        raw_ptr += raw_size
        vaddr += _align(len(data), sect_align)
    assert layout[1][3] == rva
    size_of_image = vaddr
    dirs = [(0, 0)] * 16
    if export:
        dirs[0] = (rva + export_off, len(export))
    dirs[1] = (rva, desc_size)
    dirs[12] = (rva + iat_off, len(iat))
    dos = bytearray(0x80)
    dos[0:2] = b"MZ"
    struct.pack_into("<I", dos, 0x3C, 0x80)
    coff = struct.pack("<HHIIIHH", 0x8664, nsec, 0, 0, 0, 240, 0x2022)
    opt = struct.pack(
        "<HBBIIIIIQIIHHHHHHIIIIHHQQQQII",
        0x20B, 14, 0, _align(len(text), file_align), 0, 0, 0, 0x1000, 0x180000000, sect_align, file_align,
        6, 0, 0, 0, 6, 0, 0, size_of_image, headers_size, 0, 3, 0x160, 0x100000, 0x1000, 0x100000, 0x1000,
        0, 16,
    )  # fmt: skip
    opt += b"".join(struct.pack("<II", a, s) for a, s in dirs)
    table = b"".join(
        struct.pack("<8sIIIIIIHHI", name, len(data), va, rs, rp, 0, 0, 0, 0, chars)
        for name, data, chars, va, rp, rs in layout
    )
    out = bytearray(bytes(dos) + b"PE\0\0" + coff + opt + table)
    out += b"\0" * (headers_size - len(out))
    for _name, data, _chars, _va, rp, rs in layout:
        assert len(out) == rp
        out += data + b"\0" * (rs - len(data))
    return bytes(out)


# --- deflate pieces -------------------------------------------------------------------------------------


@dataclass
class Piece:
    """Bytes deflated once, with a full flush at the end (so another stream may follow it)."""

    raw_len: int
    deflated: bytes


def deflate_piece(data: bytes, *, final: bool = False) -> Piece:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    out = c.compress(data) + c.flush(zlib.Z_FINISH if final else zlib.Z_FULL_FLUSH)
    return Piece(len(data), out)


@dataclass
class Blob:
    """A library followed by a padding: its deflate pieces, and CRC-32 and sha256 over both so far."""

    pieces: tuple[Piece, ...]
    crc: int
    sha: Any  #: hashlib sha256 object (copied before each salt)
    raw_len: int


#: Padding sizes (bytes); a library gets the one nearest its drawn size.
PAD_SIZES = (0, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20)


def padding_bytes(n: int, seed: int) -> bytes:
    """``n`` compressible bytes (about 50% deflated) holding no magic a device-code scan looks for: every
    byte is below 0x40 (no 0x7f of ``\\x7fELF``, no byte of the fatbin magic 0xBA55ED50, no letter of
    ``.version``), half of them zero."""
    raw = random.Random(seed).randbytes(n)
    table = bytes((0 if b < 128 else (b & 0x3F) or 1) for b in range(256))
    return raw.translate(table)


class Parts:
    """Libraries and paddings, deflated once, combined on demand."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._libs: dict[str, tuple[bytes, Piece]] = {}
        self._pads: dict[int, tuple[bytes, Piece]] = {}
        self._blobs: dict[tuple[str, int], Blob] = {}
        self._lock = threading.Lock()
        self._big = b""

    def add_library(self, key: str, data: bytes) -> None:
        self._libs[key] = (data, deflate_piece(data))

    def has(self, key: str) -> bool:
        return key in self._libs

    def pad(self, size: int) -> tuple[bytes, Piece]:
        if size not in self._pads:
            if len(self._big) < size:
                self._big = padding_bytes(max(PAD_SIZES), self.seed)
            data = self._big[:size]
            self._pads[size] = (data, deflate_piece(data))
        return self._pads[size]

    def prepare_pads(self, sizes: list[int]) -> None:
        """Deflate these paddings now, in parallel (zlib releases the GIL). Every padding is a prefix of the
        same bytes (those of the largest), whichever are used."""
        self._big = padding_bytes(max(PAD_SIZES), self.seed)
        with ThreadPoolExecutor(os.cpu_count() or 1) as ex:
            list(ex.map(self.pad, sizes))

    def blob(self, key: str, pad_size: int) -> Blob:
        with self._lock:
            if (key, pad_size) not in self._blobs:
                data, piece = self._libs[key]
                pad, pad_piece = self.pad(pad_size)
                sha = hashlib.sha256(data)
                sha.update(pad)
                crc = zlib.crc32(pad, zlib.crc32(data))
                pieces = (piece, pad_piece) if pad_size else (piece,)
                self._blobs[(key, pad_size)] = Blob(pieces, crc, sha, len(data) + pad_size)
            return self._blobs[(key, pad_size)]


# --- the zip writer -------------------------------------------------------------------------------------


@dataclass
class Member:
    name: str
    chunks: list[bytes]  #: deflated bytes, in order
    crc: int
    raw_len: int
    sha256: bytes
    stored: bool = False

    @property
    def deflated_len(self) -> int:
        return sum(len(c) for c in self.chunks)


def small_member(name: str, data: bytes) -> Member:
    return Member(
        name,
        [deflate_piece(data, final=True).deflated],
        zlib.crc32(data),
        len(data),
        hashlib.sha256(data).digest(),
    )


def blob_member(name: str, blob: Blob, salt: bytes | None) -> Member:
    """A library member: ``blob`` then ``salt`` (None: the blob alone, byte-identical wherever it goes)."""
    tail = salt if salt is not None else b""
    sha = blob.sha.copy()
    sha.update(tail)
    return Member(
        name,
        [p.deflated for p in blob.pieces] + [deflate_piece(tail, final=True).deflated],
        zlib.crc32(tail, blob.crc),
        blob.raw_len + len(tail),
        sha.digest(),
    )


def record_hash(digest: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def write_zip(path: Path, members: list[Member]) -> tuple[int, str]:
    """Write the wheel (deflate members, deterministic); (size, sha256 hex) of the file."""
    h = hashlib.sha256()
    central = bytearray()
    offset = 0
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:

        def put(b: bytes) -> None:
            nonlocal offset
            f.write(b)
            h.update(b)
            offset += len(b)

        for m in members:
            name = m.name.encode()
            local = struct.pack(
                "<IHHHHHIIIHH",
                0x04034B50,
                20,
                0,
                8,
                *ZIP_TIME,
                m.crc,
                m.deflated_len,
                m.raw_len,
                len(name),
                0,
            )
            central += struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50, (3 << 8) | 20, 20, 0, 8, *ZIP_TIME, m.crc, m.deflated_len, m.raw_len, len(name),
                0, 0, 0, 0, 0o100644 << 16, offset,
            ) + name  # fmt: skip
            put(local + name)
            for c in m.chunks:
                put(c)
        cd_offset = offset
        put(bytes(central))
        put(
            struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), cd_offset, 0)
        )
    tmp.rename(path)
    return offset, h.hexdigest()


# --- the index's shape ----------------------------------------------------------------------------------

#: (era start, recipe names a library of that era is built from, CUDA majors with their weights)
ERAS: tuple[tuple[str, tuple[str, ...], tuple[tuple[int, float], ...]], ...] = (
    ("2021-01", ("turing", "ptx_only", "cpu"), ((11, 1.0),)),
    ("2022-10", ("turing", "ampere", "hopper", "ptx_only", "cpu"), ((11, 0.6), (12, 0.4))),
    ("2023-06", ("ampere", "hopper", "static", "cpu"), ((11, 0.2), (12, 0.8))),
    ("2025-02", ("hopper", "blackwell", "static", "arch_specific", "cpu"), ((12, 1.0),)),
    ("2025-08", ("blackwell", "family", "arch_specific", "static", "cpu"), ((12, 0.5), (13, 0.5))),
)
OLD_RECIPES = ("turing", "ampere", "hopper", "ptx_only", "cpu")  #: what CUDA 11 can build
START, END = (2021, 1), (2026, 11)  #: upload months
WORDS = (
    "attn", "bench", "blas", "conv", "cu", "deep", "fast", "flash", "fused", "gemm", "graph", "kern", "lite",
    "mamba", "moe", "nn", "ops", "quant", "rt", "sparse", "speech", "tensor", "torch", "vision", "vllm",
    "xla",
)  # fmt: skip
PY_TAGS = ("cp310", "cp311", "cp312", "cp313")
PLATFORMS = {
    ("linux", "x86_64"): "manylinux_2_28_x86_64",
    ("linux", "aarch64"): "manylinux_2_28_aarch64",
    ("windows", "x86_64"): "win_amd64",
}


@dataclass
class WheelPlan:
    project: str
    version: str
    filename: str
    upload_time: str
    os: str
    machine: str
    members: list[tuple[str, str, int, bool]]  #: (path, library key, pad size, salted)
    python: list[tuple[str, bytes]] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)


def _month(i: int, n: int) -> tuple[int, int]:
    first = START[0] * 12 + START[1] - 1
    last = END[0] * 12 + END[1] - 1
    m = first + round((last - first) * i / max(n - 1, 1))
    return m // 12, m % 12 + 1


def _era(year: int, month: int) -> tuple[tuple[str, ...], tuple[tuple[int, float], ...]]:
    key = f"{year:04d}-{month:02d}"
    chosen = ERAS[0]
    for era in ERAS:
        if key >= era[0]:
            chosen = era
    return chosen[1], chosen[2]


def _pick(rng: random.Random, weighted: tuple[tuple[int, float], ...]) -> int:
    x = rng.random() * sum(w for _, w in weighted)
    for value, w in weighted:
        x -= w
        if x <= 0:
            return value
    return weighted[-1][0]


def _nearest_pad(size: float) -> int:
    return min(PAD_SIZES, key=lambda p: abs(math.log((p or 4096) / max(size, 4096))))


def plan_index(
    wheels: int, seed: int, total_mb: float, lib_size: dict[str, int], pad_ratio: float = 0.5
) -> list[WheelPlan]:
    """The wheels, deterministic for ``seed``: projects until ``wheels`` wheels; library paddings scaled so
    the index totals about ``total_mb`` (a padding deflates to ``pad_ratio`` of its size)."""
    rng = random.Random(seed)
    plans: list[WheelPlan] = []
    sizes: list[float] = []  # drawn raw size per library member (before snapping to a padding)
    names: set[str] = set()
    n = 0
    while len(plans) < wheels:
        n += 1
        while True:
            base = "-".join(rng.sample(WORDS, 2))
            kind = rng.choices(["cu", "plain"], [0.3, 0.7])[0]
            name = f"{base}-cu{rng.choice(['118', '121', '12x', '13x'])}" if kind == "cu" else base
            if name not in names:
                names.add(name)
                break
        style = rng.choices(["ext", "kernels", "vendor", "cpu", "pure"], [0.4, 0.25, 0.15, 0.12, 0.08])[0]
        n_versions = min(1 + int(rng.expovariate(1 / 3.0)), 15)
        major_pin = {"118": 11, "121": 12, "12x": 12, "13x": 13}.get(name[-3:]) if kind == "cu" else None
        first = rng.randint(55 if major_pin == 13 else 0, 66)  # months since 2021-01 (13.0: 2025-08)
        span = rng.randint(0, 70 - first)
        platforms = [("linux", "x86_64")]
        if style != "pure":
            if rng.random() < 0.4:
                platforms.append(("linux", "aarch64"))
            if rng.random() < 0.5:
                platforms.append(("windows", "x86_64"))
        abi3 = style == "pure" or rng.random() < 0.6
        first_py = rng.randint(0, len(PY_TAGS) - 1)  # the oldest Python the project still builds for
        n_libs = {"ext": 1, "kernels": rng.randint(2, 4), "vendor": rng.randint(1, 2), "cpu": 1, "pure": 0}[
            style
        ]
        size_scale = math.exp(rng.gauss(math.log(300_000), 1.6))
        n_py = rng.randint(2, 40)
        for v in range(n_versions):
            month_index = first + round(span * v / max(n_versions - 1, 1))
            year, month = _month(min(month_index, 70), 71)
            recipes, majors = _era(year, month)
            major = major_pin or _pick(rng, majors)
            if major == 11:  # CUDA 11.8 builds nothing newer than sm_90
                recipes = tuple(r for r in recipes if r in OLD_RECIPES and r != "cpu") or OLD_RECIPES
            version = f"{1 + v // 4}.{v % 4}.{rng.randint(0, 3)}"
            day = rng.randint(1, 28)
            upload = f"{year:04d}-{month:02d}-{day:02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z"
            lib_recipes = (
                ["cpu"]
                if style == "cpu"
                else [rng.choice([r for r in recipes if r != "cpu"]) for _ in range(n_libs)]
            )
            pkg = name.replace("-", "_")
            for os_name, machine in platforms:
                tags = ["py3-none"] if style == "pure" else ["cp39-abi3"] if abi3 else PY_TAGS[first_py:]
                tags = [t if "-" in t else f"{t}-{t}" for t in tags]
                for tag in tags:
                    plat = "any" if style == "pure" else PLATFORMS[(os_name, machine)]
                    filename = f"{pkg}-{version}-{tag}-{plat}.whl"
                    members: list[tuple[str, str, int, bool]] = []
                    py = tag.split("-")[0]
                    for i, recipe in enumerate(lib_recipes):
                        key = f"{recipe}:{major}:{os_name}:{machine}"
                        if os_name == "windows":
                            path = (
                                f"{pkg}/_C.{py}-win_amd64.pyd"
                                if i == 0
                                else f"{pkg}/lib/{pkg}_{recipe}{i}.dll"
                            )
                        else:
                            suffix = f"cpython-{py[2:]}-{machine}-linux-gnu" if not abi3 else "abi3"
                            path = f"{pkg}/_C.{suffix}.so" if i == 0 else f"{pkg}/lib/lib{pkg}_{recipe}{i}.so"
                        raw = size_scale * math.exp(rng.gauss(0, 0.5)) / max(len(lib_recipes), 1)
                        sizes.append(raw)
                        members.append((path, key, len(sizes) - 1, True))
                    requires: list[str] = []
                    if style == "vendor" and "cudart" in lib_size:
                        if os_name == "windows":
                            dll = {11: "cudart64_110.dll", 12: "cudart64_12.dll", 13: "cudart64_13.dll"}[
                                major
                            ]
                            members.append((f"{pkg}/{dll}", f"cudart:{major}:windows:x86_64", -1, False))
                        else:
                            h = hashlib.sha256(f"{major}{machine}".encode()).hexdigest()[:8]
                            members.append(
                                (
                                    f"{pkg}.libs/libcudart-{h}.so.{major}",
                                    f"cudart:{major}:linux:{machine}",
                                    -1,
                                    False,
                                )
                            )
                    elif style in ("ext", "kernels"):
                        suffix = "-cu11" if major == 11 else "-cu12" if major == 12 else ""
                        requires.append(f"nvidia-cuda-runtime{suffix}>={major}")
                    python = [(f"{pkg}/__init__.py", f'__version__ = "{version}"\n'.encode())]
                    python += [
                        (
                            f"{pkg}/mod{i}.py",
                            (f"# {name} module {i}\n" + "def f(x):\n    return x\n" * 20).encode(),
                        )
                        for i in range(n_py)
                    ]
                    plans.append(
                        WheelPlan(
                            name, version, filename, upload, os_name, machine, members, python, requires
                        )
                    )
    # scale the drawn sizes so the index totals about total_mb (libraries deflate to about a third)
    fixed = sum(lib_size.get(k.split(":")[0], 0) // 3 for p in plans for _, k, _, _ in p.members)
    want = max(total_mb * 1e6 - fixed, 0.0)
    scale = want / max(sum(sizes) * pad_ratio, 1.0)
    for p in plans:
        p.members = [
            (path, key, _nearest_pad(sizes[i] * scale) if i >= 0 else 0, salted)
            for path, key, i, salted in p.members
        ]
    return plans


def _library_for(key: str, base: dict[str, bytes]) -> bytes:
    recipe, major_s, os_name, machine = key.split(":")
    major = int(major_s)
    data = base[recipe]
    if recipe == "cudart":
        if os_name == "windows":
            dll = {11: "cudart64_110.dll", 12: "cudart64_12.dll", 13: "cudart64_13.dll"}[major]
            return make_pe(
                imports={"KERNEL32.dll": ["GetProcAddress", "LoadLibraryExW"]}, fatbin=None, exports_name=dll
            )
        return elf_for(data, major=major, machine=machine)
    if os_name == "windows":
        fatbin = elf_section(data, ".nv_fatbin")
        imports: dict[str, list[str]] = {"KERNEL32.dll": ["GetProcAddress"]}
        if recipe != "cpu":
            dll = {11: "cudart64_110.dll", 12: "cudart64_12.dll", 13: "cudart64_13.dll"}[major]
            if recipe == "static":
                imports["nvcuda.dll"] = ["cuGetProcAddress_v2"]
            else:
                imports[dll] = ["cudaLaunchKernel", "__cudaRegisterFatBinary", "cudaGetLastError"]
        return make_pe(imports=imports, fatbin=fatbin)
    return elf_for(data, major=major, machine=machine)


def generate(
    directory: Path,
    *,
    wheels: int = 5200,
    seed: int = 34,
    total_mb: float = 2500.0,
    keep_free_gb: float = 15.0,
) -> dict[str, Any]:
    """Generate the index under ``directory`` (or find it there); its ``index.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    index_path = directory / "index.json"
    args = {"format": FORMAT, "wheels": wheels, "seed": seed, "total_mb": total_mb}
    if index_path.exists():
        index: dict[str, Any] = json.loads(index_path.read_text())
        if index.get("args") == args:
            return index
        sys.exit(
            f"survey_index: {directory} holds an index generated with {index.get('args')}, not {args}: "
            "pass those arguments, or remove the directory"
        )
    free = shutil.disk_usage(directory).free
    if free - 2 * total_mb * 1e6 < keep_free_gb * 1e9:
        sys.exit(
            f"survey_index: {free / 1e9:.1f} GB free at {directory}; an index of about {total_mb:.0f} MB "
            f"would leave less than {keep_free_gb} GB (--total-mb smaller, or --keep-free-gb)"
        )
    t0 = time.monotonic()
    base = build_pool(directory / "pool")
    t_pool = time.monotonic() - t0
    parts = Parts(seed)
    sample = deflate_piece(padding_bytes(1 << 20, seed))
    ratio = len(sample.deflated) / sample.raw_len
    plans = plan_index(wheels, seed, total_mb, {k: len(v) for k, v in base.items()}, ratio)
    parts.prepare_pads(sorted({pad for p in plans for _, _, pad, _ in p.members}))
    for key in sorted({k for p in plans for _, k, _, _ in p.members}):
        parts.add_library(key, _library_for(key, base))
    files = directory / "files"
    files.mkdir(exist_ok=True)

    def one(plan: WheelPlan) -> dict[str, Any]:
        dist = plan.filename.split("-")[0]
        info = f"{dist}-{plan.version}.dist-info"
        tag = "-".join(plan.filename[:-4].split("-")[2:])
        meta = [
            "Metadata-Version: 2.1",
            f"Name: {plan.project}",
            f"Version: {plan.version}",
        ]
        meta += [f"Requires-Dist: {r}" for r in plan.requires]
        members = [small_member(p, d) for p, d in plan.python]
        for path, key, pad, salted in plan.members:
            salt = f"\ncudaship-survey-bench {plan.filename} {path}\n".encode() if salted else None
            members.append(blob_member(path, parts.blob(key, pad), salt))
        members.append(small_member(f"{info}/METADATA", ("\n".join(meta) + "\n").encode()))
        root = "false" if plan.members else "true"
        members.append(
            small_member(
                f"{info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: {root}\nTag: {tag}\n".encode()
            )
        )
        record = [f"{m.name},{record_hash(m.sha256)},{m.raw_len}" for m in members] + [f"{info}/RECORD,,"]
        members.append(small_member(f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
        size, sha = write_zip(files / plan.filename, members)
        return {
            "filename": plan.filename,
            "size": size,
            "sha256": sha,
            "upload-time": plan.upload_time,
            "native": len(plan.members),
            "native_bytes": sum(m.raw_len for m in members if m.name in {p for p, _, _, _ in plan.members}),
        }

    with ThreadPoolExecutor(os.cpu_count() or 1) as ex:
        entries = list(ex.map(one, plans))
    projects: dict[str, list[dict[str, Any]]] = {}
    for plan, entry in zip(plans, entries, strict=True):
        projects.setdefault(plan.project, []).append(entry)
    index = {
        "args": args,
        "projects": projects,
        "wheels": len(entries),
        "bytes": sum(e["size"] for e in entries),
        "pool_s": round(t_pool, 1),
        "generate_s": round(time.monotonic() - t0, 1),
    }
    tmp = directory / ".index.json.tmp"
    tmp.write_text(json.dumps(index, indent=1, sort_keys=True))
    tmp.rename(index_path)
    return index


# --- the server -----------------------------------------------------------------------------------------

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes = 0

    def add(self, n: int) -> None:
        with self.lock:
            self.requests += 1
            self.bytes += n


def make_handler(directory: Path, index: dict[str, Any], stats: Stats) -> type[BaseHTTPRequestHandler]:
    files = directory / "files"
    pages: dict[str, list[dict[str, Any]]] = {normalize(k): v for k, v in index["projects"].items()}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
            stats.add(len(body))

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/stats":
                with stats.lock:
                    body = json.dumps({"requests": stats.requests, "bytes": stats.bytes}).encode()
                self._send(200, body, "application/json")
                return
            wants_json = JSON_TYPE in (self.headers.get("Accept") or "")
            if path in ("/simple/", "/simple"):
                if wants_json:
                    body = json.dumps(
                        {"meta": {"api-version": "1.1"}, "projects": [{"name": n} for n in sorted(pages)]}
                    ).encode()
                    self._send(200, body, JSON_TYPE)
                else:
                    links = "".join(f'<a href="/simple/{n}/">{html.escape(n)}</a>\n' for n in sorted(pages))
                    self._send(
                        200, f"<!DOCTYPE html><html><body>\n{links}</body></html>".encode(), "text/html"
                    )
                return
            m = re.fullmatch(r"/simple/([^/]+)/?", path)
            if m:
                entries = pages.get(normalize(m.group(1)))
                if entries is None:
                    self._send(404, b"not found", "text/plain")
                    return
                if wants_json:
                    files_json = [
                        {
                            "filename": e["filename"],
                            "url": f"/files/{e['filename']}",
                            "hashes": {"sha256": e["sha256"]},
                            "size": e["size"],
                            "upload-time": e["upload-time"],
                            "yanked": False,
                        }
                        for e in entries
                    ]
                    page = {
                        "meta": {"api-version": "1.1"},
                        "name": normalize(m.group(1)),
                        "files": files_json,
                    }
                    self._send(200, json.dumps(page).encode(), JSON_TYPE)
                else:
                    links = "".join(
                        f'<a href="/files/{html.escape(e["filename"])}#sha256={e["sha256"]}">'
                        f"{html.escape(e['filename'])}</a>\n"
                        for e in entries
                    )
                    self._send(
                        200, f"<!DOCTYPE html><html><body>\n{links}</body></html>".encode(), "text/html"
                    )
                return
            m = re.fullmatch(r"/files/([A-Za-z0-9_.+-]+\.whl)", path)
            target = files / m.group(1) if m else None
            if target is None or not target.is_file():
                self._send(404, b"not found", "text/plain")
                return
            size = target.stat().st_size
            start, end, status = 0, size - 1, 200
            rng = self.headers.get("Range")
            extra: dict[str, str] = {"Accept-Ranges": "bytes"}
            if rng:
                mr = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
                if not mr or (mr.group(1) == "" and mr.group(2) == ""):
                    self._send(416, b"bad range", "text/plain")
                    return
                a, b = mr.group(1), mr.group(2)
                if a == "":
                    start, end = max(size - int(b), 0), size - 1
                else:
                    start, end = int(a), min(int(b), size - 1) if b else size - 1
                if start > end or start >= size:
                    self._send(416, b"bad range", "text/plain", {"Content-Range": f"bytes */{size}"})
                    return
                status = 206
                extra["Content-Range"] = f"bytes {start}-{end}/{size}"
            length = end - start + 1
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            for k, v in extra.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.flush()
            with open(target, "rb") as f:
                sent = 0
                while sent < length:
                    n = os.sendfile(self.connection.fileno(), f.fileno(), start + sent, length - sent)
                    if n == 0:
                        break
                    sent += n
            stats.add(length)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def server_bind(self) -> None:
        # several server processes may share the port (SO_REUSEPORT: the kernel spreads the connections)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()


def serve_forever(directory: Path, port: int = 0) -> None:
    """Serve ``directory`` on 127.0.0.1:``port`` (0: any free port); print the index URL, then serve."""
    index = json.loads((directory / "index.json").read_text())
    stats = Stats()
    server = _Server(("127.0.0.1", port), make_handler(directory, index, stats))
    print(f"http://127.0.0.1:{server.server_address[1]}/simple", flush=True)
    server.serve_forever()


@contextmanager
def serving(directory: Path, processes: int = 1) -> Iterator[str]:
    """Serve ``directory`` from child processes; yields the index URL (``http://127.0.0.1:PORT/simple``)."""
    with serving_process(directory, processes) as (url, _pids):
        yield url


@contextmanager
def serving_process(directory: Path, processes: int = 1) -> Iterator[tuple[str, list[int]]]:
    """:func:`serving`, yielding the URL and the server processes' ids (for their CPU time). ``processes``
    servers share the port (each its own interpreter: one Python server's GIL bounds what it serves)."""
    procs: list[subprocess.Popen[str]] = []
    try:
        port = 0
        url = ""
        for _ in range(max(1, processes)):
            proc = subprocess.Popen(
                [sys.executable, __file__, "serve", str(directory), "--port", str(port)],
                stdout=subprocess.PIPE,
                text=True,
            )
            procs.append(proc)
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            if not url.startswith("http://"):
                raise RuntimeError(f"survey_index: the server did not start ({url!r})")
            port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        yield url, [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()


def server_stats(url: str) -> dict[str, int]:
    import urllib.request

    with urllib.request.urlopen(url.rsplit("/simple", 1)[0] + "/stats", timeout=10) as r:
        stats: dict[str, int] = json.loads(r.read())
        return stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="generate the index under DIR (reused when already there)")
    g.add_argument("dir", type=Path)
    g.add_argument("--wheels", type=int, default=5200)
    g.add_argument("--seed", type=int, default=34)
    g.add_argument("--total-mb", type=float, default=2500.0)
    g.add_argument("--keep-free-gb", type=float, default=15.0, help="refuse when less would be left free")
    s = sub.add_parser("serve", help="serve DIR on 127.0.0.1 (prints the index URL)")
    s.add_argument("dir", type=Path)
    s.add_argument("--port", type=int, default=8765)
    a = p.parse_args(argv)
    if a.cmd == "generate":
        index = generate(
            a.dir, wheels=a.wheels, seed=a.seed, total_mb=a.total_mb, keep_free_gb=a.keep_free_gb
        )
        print(
            f"{index['wheels']} wheels of {len(index['projects'])} projects, {index['bytes'] / 1e6:.0f} MB "
            f"in {a.dir / 'files'} (pool {index['pool_s']} s, generation {index['generate_s']} s)"
        )
        return 0
    serve_forever(a.dir, a.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
