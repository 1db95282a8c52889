"""Seed inputs from real files: the nvcc and mingw-w64 test builds, clang-built Mach-O, the cached PyPI
wheels, the example policies, and toolkit archives/manifests made by the toolkit tests' builders.

:class:`Sources` holds the built files; the test suite fills it from its session fixtures, the command line
(``python -m fuzz``) builds them with the same build functions (tests/fixtures/nvcc.py, mingw.py) and keeps
the resulting seed files in ``<test cache>/fuzz-seeds/<kind>/`` so the next run starts at once.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: nvcc builds (tests/fixtures/nvcc.py BUILDS) used as seeds, by kind of seed.
NVCC_HOST = ("cudart_shared", "compress_size", "compress_speed", "ptx_only", "relocatable", "no_kernels")
NVCC_STATIC = ("static_lib", "static_lib_rdc")
NVCC_CUBIN = ("cubin_sm90a", "cubin_sm100f", "cubin_rdc", "cubin_device_function")
NVCC_FATBIN = ("fatbin_mixed", "fatbin_lto", "fatbin_debug", "fatbin_ptxas_options")
NVCC_PTX = ("ptx_sm90", "ptx_sm120f")
NVCC_ALL = NVCC_HOST + NVCC_STATIC + NVCC_CUBIN + NVCC_FATBIN + NVCC_PTX

#: Cached real wheels small enough to mutate whole (file name prefixes in the wheel cache).
SMALL_WHEELS = ("bitsandbytes-0.50.2-py3-none-macosx", "nvidia_cuda_runtime-13.5.37")

SEED_KINDS = (
    "elf",
    "pe",
    "macho",
    "fatbin",
    "cubin",
    "ptx",
    "coff",
    "extract",
    "manifest",
    "policy",
    "wheel",
    "metadata",
    "program",
    "index",
)


@dataclass
class Sources:
    """Built files the seeds come from (any may be missing: that kind then has fewer seeds)."""

    work: Path
    nvcc: Mapping[str, Path] = field(default_factory=dict)
    mingw: Mapping[str, Path] = field(default_factory=dict)
    wheels: tuple[Path, ...] = ()

    @classmethod
    def build(cls, work: Path) -> Sources:
        """Build everything with the test suite's own build functions (nvcc, mingw-w64 where present)."""
        from tests.fixtures import cache_dir
        from tests.fixtures.mingw import _Builder
        from tests.fixtures.nvcc import _BuildCache, nvcc_path

        nvcc: dict[str, Path] = {}
        compiler = nvcc_path()
        if compiler is not None:
            (work / "nvcc").mkdir(parents=True, exist_ok=True)
            cache = _BuildCache(compiler)  # its builds live in the test cache, shared with the suite
            cache.ensure(list(NVCC_ALL))
            nvcc = dict(cache.done)
        (work / "mingw").mkdir(parents=True, exist_ok=True)
        mingw = _Builder(work / "mingw").build_all()
        wheel_dir = cache_dir() / "wheels"
        wheels = tuple(sorted(p for p in wheel_dir.glob("*.whl") if p.name.startswith(SMALL_WHEELS)))
        return cls(work, nvcc, mingw, wheels)


def _files(paths: Mapping[str, Path], names: tuple[str, ...]) -> Iterator[bytes]:
    for name in names:
        if name in paths:
            yield paths[name].read_bytes()


def _elf(src: Sources) -> Iterator[bytes]:
    yield from _files(src.nvcc, NVCC_HOST)
    yield from _files(src.nvcc, NVCC_CUBIN[:2])
    example = REPO / "examples" / "libvecadd.so"
    if example.is_file():
        yield example.read_bytes()


def _pe(src: Sources) -> Iterator[bytes]:
    for name, path in sorted(src.mingw.items()):
        if name.endswith((".dll", ".pyd")):
            yield path.read_bytes()


def _wheel_members(src: Sources, want: Callable[[str, bytes], bool], limit: int = 4 << 20) -> Iterator[bytes]:
    for wheel in src.wheels:
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                if info.file_size <= limit:
                    data = zf.read(info)
                    if want(info.filename, data):
                        yield data


_MACHO_MAGICS = (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"\xfe\xed\xfa\xcf")
_MACHO_C = 'int dep(int); const char *cudaship_lib = "libcudart.13.dylib";\nint f(int x) { return dep(x); }\n'


def _macho(src: Sources) -> Iterator[bytes]:
    yield from _wheel_members(src, lambda name, data: data[:4] in _MACHO_MAGICS)
    clang, ld64, lipo = (
        next(filter(None, (shutil.which(t), shutil.which(f"{t}-14"), shutil.which(f"{t}-15"))), None)
        for t in ("clang", "ld64.lld", "llvm-lipo")
    )
    if not (clang and ld64 and lipo):
        return
    root = src.work / "macho"
    root.mkdir(parents=True, exist_ok=True)
    (root / "f.c").write_text(_MACHO_C)
    built = []
    for arch in ("arm64", "x86_64"):
        obj, dylib = root / f"f_{arch}.o", root / f"libf_{arch}.dylib"
        steps = [
            [clang, f"--target={arch}-apple-macos11", "-O1", "-c", "f.c", "-o", obj.name],
            [
                ld64,
                "-arch",
                arch,
                "-platform_version",
                "macos",
                "11.0",
                "11.0",
                "-dylib",
                "-undefined",
                "dynamic_lookup",
                "-install_name",
                "@rpath/libf.dylib",
                "-rpath",
                "@loader_path/../lib",
                obj.name,
                "-o",
                dylib.name,
            ],
        ]
        if all(subprocess.run(s, cwd=root, capture_output=True, check=False).returncode == 0 for s in steps):
            built.append(dylib)
            yield dylib.read_bytes()
    if len(built) == 2:
        fat = root / "libf_fat.dylib"
        cmd = [lipo, "-create", *map(str, built), "-output", str(fat)]
        if subprocess.run(cmd, capture_output=True, check=False).returncode == 0:
            yield fat.read_bytes()


def _fatbin(src: Sources) -> Iterator[bytes]:
    yield from _files(src.nvcc, NVCC_FATBIN)
    yield from _files(src.nvcc, ("compress_size", "compress_speed", "relocatable", "static_lib_rdc"))
    yield from _files(src.mingw, ("fatbin_carrier.dll",))


def _cubin(src: Sources) -> Iterator[bytes]:
    yield from _files(src.nvcc, NVCC_CUBIN)


def _ptx(src: Sources) -> Iterator[bytes]:
    yield from _files(src.nvcc, NVCC_PTX)


def _coff(src: Sources) -> Iterator[bytes]:
    for name, path in sorted(src.mingw.items()):
        if name.endswith(".lib"):
            yield path.read_bytes()
    yield from _files(src.nvcc, NVCC_STATIC)


def _redist(src: Sources) -> Path:
    from tests.toolkit.builders import build_redist

    root = src.work / "redist"
    if not root.is_dir():
        root.mkdir(parents=True)
        build_redist(root)
    return root


def _tar(files: Mapping[str, bytes], mode: str, links: Mapping[str, tuple[bytes, str]] = {}) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tf:  # type: ignore[call-overload]
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tf.addfile(info, io.BytesIO(data))
        for name, (kind, target) in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            tf.addfile(info)
    return buffer.getvalue()


def _extract(src: Sources) -> Iterator[bytes]:
    root = _redist(src)
    for path in sorted(root.rglob("*")):
        if path.suffix in (".xz", ".zip"):
            yield path.read_bytes()
    files = {"top/lib/libcudart.so.13.0.96": b"\x7fELF" + b"\0" * 60, "top/include/cuda.h": b"// cuda\n"}
    links = {
        "top/lib/libcudart.so.13": (tarfile.SYMTYPE, "libcudart.so.13.0.96"),
        "top/lib/libcudart.so": (tarfile.LNKTYPE, "top/lib/libcudart.so.13.0.96"),
    }
    for mode in ("w:gz", "w:", "w:bz2"):
        yield _tar(files, mode, links)


def _manifest(src: Sources) -> Iterator[bytes]:
    root = _redist(src)
    for path in sorted(root.glob("redistrib_*.json")):
        yield path.read_bytes()
        compact = json.dumps(json.loads(path.read_bytes()), separators=(",", ":")).encode()
        yield compact


def _policy(src: Sources) -> Iterator[bytes]:
    for path in sorted((REPO / "examples" / "policies").glob("*.toml")):
        yield path.read_bytes()


def _small_wheel(src: Sources, compression: int) -> bytes:
    """A wheel around an nvcc-built library with a correct dist-info (RECORD hashes included)."""
    members: dict[str, bytes] = {}
    for name in ("cudart_shared", "ptx_only"):
        if name in src.nvcc:
            members[f"pkg/lib{name}.so"] = src.nvcc[name].read_bytes()
    members["pkg/__init__.py"] = b""
    di = "pkg-1.0.dist-info"
    members[f"{di}/METADATA"] = (
        b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n"
        b"Requires-Dist: nvidia-cuda-runtime==13.*; sys_platform == 'linux'\n"
    )
    members[f"{di}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: fuzz\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"
    )
    record = []
    for name, data in members.items():
        digest = hashlib.sha256(data).digest()
        record.append(f"{name},sha256={base64.urlsafe_b64encode(digest).rstrip(b'=').decode()},{len(data)}")
    record.append(f"{di}/RECORD,,")
    members[f"{di}/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _wheel(src: Sources) -> Iterator[bytes]:
    yield _small_wheel(src, zipfile.ZIP_STORED)
    yield _small_wheel(src, zipfile.ZIP_DEFLATED)
    for wheel in src.wheels:
        yield wheel.read_bytes()


def _metadata(src: Sources) -> Iterator[bytes]:
    yield from _wheel_members(src, lambda name, data: name.endswith(("/METADATA", "/WHEEL", "/RECORD")))


def _program(src: Sources) -> Iterator[bytes]:
    from tests.program.builders import make_pt2

    data_dir = REPO / "tests" / "program" / "data"
    for path in sorted(data_dir.glob("*.pte")):
        yield path.read_bytes()
    wrapper = src.nvcc.get("cudart_shared")
    cubins = [src.nvcc[n] for n in ("cubin_sm90a", "cubin_rdc") if n in src.nvcc]
    if wrapper is not None:
        out = src.work / "model.pt2"
        make_pt2(out, wrapper, cubins)
        yield out.read_bytes()


def _index(src: Sources) -> Iterator[bytes]:
    """PEP 691 project pages: files by relative and absolute URL, on the index's host, on PyPI's file host,
    on another host, by file: URL; with and without sizes, hashes and PEP 658 metadata."""
    import json

    entries = [
        {"filename": "fuzzed-1.0-py3-none-any.whl", "url": "/files/fuzzed.whl", "size": 400},
        {"filename": "fuzzed-1.1-py3-none-any.whl", "url": "https://files.pythonhosted.org/p/fuzzed.whl",
         "size": 400, "hashes": {"sha256": "0" * 64}, "core-metadata": {"sha256": "1" * 64}},
        {"filename": "fuzzed-1.2-py3-none-any.whl", "url": "file:///etc/passwd", "size": 400},
        {"filename": "fuzzed-1.3-py3-none-any.whl", "url": "http://elsewhere.example/f.whl", "size": 400},
        {"filename": "fuzzed-1.4-py3-none-any.whl", "url": "/f.whl", "data-dist-info-metadata": True},
        {"filename": "fuzzed-2.0-py3-none-any.whl", "url": "/f.whl", "size": 400, "yanked": "broken"},
    ]  # fmt: skip
    for i in range(len(entries)):
        page = {"meta": {"api-version": "1.1"}, "name": "fuzzed", "files": entries[i:]}
        yield json.dumps(page).encode()


GATHER: dict[str, Callable[[Sources], Iterator[bytes]]] = {
    "elf": _elf,
    "pe": _pe,
    "macho": _macho,
    "fatbin": _fatbin,
    "cubin": _cubin,
    "ptx": _ptx,
    "coff": _coff,
    "extract": _extract,
    "manifest": _manifest,
    "policy": _policy,
    "wheel": _wheel,
    "metadata": _metadata,
    "program": _program,
    "index": _index,
}


def gather(kind: str, src: Sources) -> list[bytes]:
    """Seeds of one kind, deduplicated, in a stable order."""
    seen: dict[bytes, None] = {}
    for data in GATHER[kind](src):
        seen.setdefault(data, None)
    return list(seen)


def seed_root() -> Path:
    from tests.fixtures import cache_dir

    return cache_dir() / "fuzz-seeds"


def cached_seeds(kind: str) -> list[bytes]:
    """The seed files of ``kind`` from the cache (empty when not built yet)."""
    directory = seed_root() / kind
    return [p.read_bytes() for p in sorted(directory.glob("*"))] if directory.is_dir() else []


def build_cache(kinds: tuple[str, ...] = SEED_KINDS) -> dict[str, int]:
    """Build the sources once and write every missing seed kind to the cache; returns seeds per kind."""
    root = seed_root()
    missing = [k for k in kinds if not (root / k).is_dir()]
    if missing:
        with tempfile.TemporaryDirectory(prefix="cudaship-fuzz-seeds-") as work:
            src = Sources.build(Path(work))
            for kind in missing:
                seeds = gather(kind, src)
                staging = root / f".{kind}.tmp"
                shutil.rmtree(staging, ignore_errors=True)
                staging.mkdir(parents=True)
                for data in seeds:
                    (staging / hashlib.sha256(data).hexdigest()[:16]).write_bytes(data)
                staging.rename(root / kind)
    return {k: len(list((root / k).glob("*"))) for k in kinds}


if __name__ == "__main__":
    import sys

    for kind, count in build_cache(tuple(sys.argv[1:]) or SEED_KINDS).items():
        print(f"{kind}: {count} seeds")
