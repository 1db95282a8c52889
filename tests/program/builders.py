"""Builders of program files for tests: real libraries (g++) and cubins (nvcc) in the formats' layouts.

- :func:`gxx_library`: a shared library compiled here with g++ that uses ``std::regex`` (as AOTInductor's
  wrapper does in ``parse_device_str``), optionally with ``-static-libstdc++`` (the H200 crash, see
  docs/program.md) or a constructor that kills the loading process with SIGSEGV.
- :func:`make_pt2`: an AOTInductor package zip with the member names torch writes
  (``<root>/data/aotinductor/<model>/<hash>.wrapper.so``, ``.cubin``, ``*_metadata.json``,
  ``archive_format``).
- :func:`make_pte`: an ExecuTorch program: flatbuffer ``Program`` (identifier ``ET12``, extended header
  ``eh00``) with an execution plan, a ``CudaBackend`` delegate, segments and named data, written by the small
  flatbuffer writer below following ExecuTorch's ``program.fbs`` (the copy shipped in executorch 1.5.1).
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

_REGEX_SOURCE = r"""
#include <regex>
#include <string>
extern "C" int parse_device(const char* text) {
    static const std::regex pattern("^(cpu|cuda)(:([0-9]+))?$");
    std::cmatch match;
    if (!std::regex_match(text, match, pattern)) return -1;
    return match[3].matched ? std::stoi(match[3].str()) : 0;
}
"""
_CRASH_SOURCE = r"""
#include <signal.h>
__attribute__((constructor)) static void crash_on_load(void) { raise(SIGSEGV); }
int placeholder(void) { return 0; }
"""


def gxx_library(
    directory: Path, name: str, *, static_libstdcxx: bool = False, crash_on_load: bool = False
) -> Path:
    """Compile a small shared library with g++ (skips the test when g++ is missing)."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is needed to build test libraries")
    directory.mkdir(parents=True, exist_ok=True)
    src = directory / f"{name}.cpp"
    src.write_text(_CRASH_SOURCE if crash_on_load else _REGEX_SOURCE)
    out = directory / f"{name}.so"
    command = [gxx, "-shared", "-fPIC", "-O1", "-o", str(out), str(src)]
    if static_libstdcxx:
        command.insert(1, "-static-libstdc++")
    subprocess.run(command, check=True, capture_output=True)
    return out


def aoti_metadata(device: str = "cuda", capability: str | None = "90") -> dict[str, str]:
    data = {
        "AOTI_DEVICE_KEY": device,
        "AOTI_PLATFORM": "linux",
        "AOTI_MACHINE": "x86_64",
        "AOTI_CPU_ISA": "AVX2",
    }
    if capability is not None:
        data["AOTI_COMPUTE_CAPABILITY"] = capability
    return data


def make_pt2(
    path: Path,
    wrapper: Path,
    cubins: Sequence[Path] = (),
    metadata: dict[str, str] | None = None,
    *,
    root: str = "model",
    model: str = "model",
) -> Path:
    """Write an AOTInductor-layout package holding ``wrapper`` and ``cubins``."""
    base = f"{root}/data/aotinductor/{model}"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(f"{root}/archive_format", "pt2")
        z.writestr(f"{root}/archive_version", "0")
        z.writestr(f"{root}/byteorder", "little")
        z.write(wrapper, f"{base}/cwrapperhash.wrapper{wrapper.suffix}")
        z.writestr(f"{base}/cwrapperhash.wrapper.cpp", "// generated\n")
        z.writestr(f"{base}/cwrapperhash.wrapper_metadata.json", json.dumps(metadata or aoti_metadata()))
        for i, cubin in enumerate(cubins):
            z.write(cubin, f"{base}/ckernel{i}.cubin")
    return path


# -- a minimal flatbuffer writer (front to back: every uoffset points forward) ------------------------------

Field = tuple[str, Any]  #: ("u32"|"u64"|"i8"|"str"|"table"|"tables", value)


class _Writer:
    def __init__(self, start: int) -> None:
        self.buf = bytearray(start)

    def _align(self, n: int) -> None:
        while len(self.buf) % n:
            self.buf.append(0)

    def _patch(self, at: int, target: int) -> None:
        struct.pack_into("<I", self.buf, at, target - at)

    def string(self, text: str) -> int:
        self._align(4)
        pos = len(self.buf)
        data = text.encode()
        self.buf += struct.pack("<I", len(data)) + data + b"\0"
        return pos

    def table(self, fields: Sequence[Field | None]) -> int:
        """Write a table; ``None`` leaves a field absent. Scalars sit in 8-byte slots after the soffset."""
        self._align(8)
        vtable = len(self.buf)
        slots = len(fields)
        vsize = 4 + 2 * slots
        table_size = 8 + 8 * slots
        self.buf += struct.pack("<HH", vsize, table_size)
        for i, f in enumerate(fields):
            self.buf += struct.pack("<H", 0 if f is None else 8 + 8 * i)
        self._align(8)
        table = len(self.buf)
        self.buf += struct.pack("<i", table - vtable) + b"\0" * 4 + b"\0" * (8 * slots)
        pending: list[tuple[int, str, Any]] = []
        for i, f in enumerate(fields):
            if f is None:
                continue
            kind, value = f
            at = table + 8 + 8 * i
            if kind == "u32":
                struct.pack_into("<I", self.buf, at, value)
            elif kind == "u64":
                struct.pack_into("<Q", self.buf, at, value)
            elif kind == "i8":
                struct.pack_into("<b", self.buf, at, value)
            else:
                pending.append((at, kind, value))
        for at, kind, value in pending:
            if kind == "str":
                self._patch(at, self.string(value))
            elif kind == "table":
                self._patch(at, self.table(value))
            elif kind == "tables":
                self._patch(at, self.tables(value))
            elif kind == "bytes":
                while (len(self.buf) + 4) % 16:  # the data itself 16-aligned, as force_align asks
                    self.buf.append(0)
                self._patch(at, len(self.buf))
                self.buf += struct.pack("<I", len(value)) + value
        return table

    def tables(self, items: Sequence[Sequence[Field | None]]) -> int:
        self._align(4)
        pos = len(self.buf)
        self.buf += struct.pack("<I", len(items)) + b"\0" * (4 * len(items))
        for i, item in enumerate(items):
            self._patch(pos + 4 + 4 * i, self.table(item))
        return pos


def make_pte(
    path: Path,
    named: Sequence[tuple[str, bytes]],
    *,
    method: str = "forward",
    backend: str = "CudaBackend",
    extended_header: bool = True,
) -> Path:
    """Write an ExecuTorch program whose named data holds ``named`` blobs (one segment each)."""
    header = 32 if extended_header else 8
    segment_table: list[Sequence[Field | None]] = []
    offset = 0
    for _, data in named:
        segment_table.append([("u64", offset), ("u64", len(data))])
        offset += (len(data) + 15) // 16 * 16
    # As AotiBackend.preprocess writes it: the processed bytes name the blobs, one key a line, stored inline.
    processed = "\n".join(key for key, _ in named).encode()
    delegate: list[Field | None] = [("str", backend), ("table", [("i8", 0), ("u32", 0)]), None]
    plan: list[Field | None] = [("str", method), None, None, None, None, None, None, ("tables", [delegate])]
    program: list[Field | None] = [
        ("u32", 0),
        ("tables", [plan]),
        None,
        ("tables", [[("bytes", processed)]]),
        ("tables", segment_table),
        None,
        None,
        ("tables", [[("str", key), ("u32", i)] for i, (key, _) in enumerate(named)]),
    ]
    writer = _Writer(header)
    root = writer.table(program)
    writer._align(16)
    program_size = len(writer.buf)
    segment_base = (program_size + 4095) // 4096 * 4096 if named else 0
    struct.pack_into("<I", writer.buf, 0, root)
    writer.buf[4:8] = b"ET12"
    if extended_header:
        struct.pack_into("<4sIQQ", writer.buf, 8, b"eh00", 24, program_size, segment_base)
    out = bytearray(writer.buf)
    if named:
        out += b"\0" * (segment_base - len(out))
        for _, data in named:
            out += data + b"\0" * ((len(data) + 15) // 16 * 16 - len(data))
    path.write_bytes(bytes(out))
    return path


def make_export_dir(
    directory: Path,
    package: Path,
    *,
    cuda_train: str | None = "13.0",
    device: str = "cuda",
    platform: str = "linux-x86_64",
    reference: bool = True,
    import_libraries: tuple[Any, ...] = (),
) -> Path:
    """An export directory as ``program export`` writes it, around ``package`` (for checks without torch).

    The reference file is opaque bytes here: check only asks whether it is there.
    """
    from cudaship.hashing import sha256_file
    from cudaship.inspection.program_records import Provenance
    from cudaship.program.provenance import write_provenance

    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "model.pt2"
    shutil.copyfile(package, target)
    if reference:
        (directory / "reference.pt").write_bytes(b"reference placeholder")
    prov = Provenance(
        package="model.pt2",
        package_sha256=sha256_file(target),
        torch_version=f"2.11.0+cu{cuda_train.replace('.', '')}" if cuda_train else "2.11.0+cpu",
        cuda_train=cuda_train,
        device=device,
        target_platform=platform,
        reference="reference.pt",
        import_libraries=import_libraries,
    )
    write_provenance(directory, prov)
    return directory


def make_wheel(directory: Path, version: str, platform_tag: str, name: str = "runtime") -> Path:
    """A minimal wheel (dist-info only) whose version and tag say the train and platform of a runtime."""
    path = directory / f"{name}-{version}-py3-none-{platform_tag}.whl"
    dist = f"{name}-{version.split('+')[0]}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(
            f"{dist}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-{platform_tag}\n",
        )
        z.writestr(f"{dist}/RECORD", "")
    return path
