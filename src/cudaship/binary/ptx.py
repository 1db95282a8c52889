"""PTX text: the ``.version``, ``.target`` and ``.address_size`` directives and the kernel (``.entry``) names.

PTX from nvcc starts with a comment banner; hand-written PTX may have comments anywhere. Comments (``//`` to
end of line and ``/* ... */``) and string literals are removed before the directives are read, so a
commented-out ``.target`` never counts.
"""

from __future__ import annotations

import re

from cudaship.errors import BinaryFormatError
from cudaship.records.binary import DeviceCode, DeviceCodeKind, PtxInfo
from cudaship.records.buffer import Buffer

#: PTX files larger than this are not PTX a tool should read whole (the largest real ones are ~100 MiB).
MAX_PTX_BYTES = 1 << 30

_COMMENTS = re.compile(rb'//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:[^"\\\n]|\\.)*"', re.DOTALL)
_VERSION = re.compile(rb"(?m)^[ \t]*\.version[ \t]+(\d+)\.(\d+)\b")
_TARGET = re.compile(rb"(?m)^[ \t]*\.target[ \t]+([A-Za-z0-9_, \t]+)")
_ADDRESS_SIZE = re.compile(rb"(?m)^[ \t]*\.address_size[ \t]+(\d+)\b")
_ENTRY = re.compile(rb"\.entry[ \t\r\n]+([A-Za-z_$%][A-Za-z0-9_$%]*)")
_SM_TARGET = re.compile(r"^sm_(\d+)([af]?)$")


def _strip_comments(text: bytes) -> bytes:
    def keep(match: re.Match[bytes]) -> bytes:
        token = match.group(0)
        if token.startswith(b'"'):
            return b'""'
        return b"\n" * token.count(b"\n") if token.startswith(b"/*") else b""

    return _COMMENTS.sub(keep, text)


def looks_like_ptx(buf: Buffer) -> bool:
    """Cheap test: does the start of ``buf`` read as PTX text (``.version`` in the first 64 KiB)?"""
    head = bytes(buf[: 1 << 16])
    if b"\0" in head.rstrip(b"\0"):
        return False
    return _VERSION.search(_strip_comments(head)) is not None


def read_ptx(buf: Buffer) -> PtxInfo:
    """Read the directives of a PTX module. Raises :class:`BinaryFormatError` when it is not PTX."""
    if len(buf) > MAX_PTX_BYTES:
        raise BinaryFormatError(f"PTX text of {len(buf)} bytes is larger than {MAX_PTX_BYTES}")
    raw = bytes(buf).rstrip(b"\0")
    if b"\0" in raw:
        raise BinaryFormatError("PTX text contains NUL bytes: not PTX")
    text = _strip_comments(raw)
    version = _VERSION.search(text)
    if version is None:
        raise BinaryFormatError("no .version directive: not PTX")
    target = _TARGET.search(text)
    if target is None:
        raise BinaryFormatError("no .target directive in PTX")
    targets = [t.strip() for t in target.group(1).decode("ascii").split(",") if t.strip()]
    if not targets:
        raise BinaryFormatError("empty .target directive in PTX")
    address = _ADDRESS_SIZE.search(text)
    entries = tuple(dict.fromkeys(m.group(1).decode("ascii") for m in _ENTRY.finditer(text)))
    return PtxInfo(
        isa_version=f"{int(version.group(1))}.{int(version.group(2))}",
        target=targets[0],
        address_size=int(address.group(1)) if address else None,
        entries=entries,
    )


def virtual_arch(target: str) -> tuple[int, str]:
    """``sm_90a`` (a PTX ``.target``) → ``(90, "a")``. Raises :class:`BinaryFormatError` for other targets."""
    match = _SM_TARGET.match(target)
    if match is None:
        raise BinaryFormatError(f"PTX .target {target!r} is not an sm_XY target")
    return int(match.group(1)), match.group(2)


def isa_version(entry: DeviceCode) -> str | None:
    """The PTX ISA version of a PTX fatbin entry, from its header (``"9.0"``); None for other kinds."""
    return entry.version if entry.kind is DeviceCodeKind.PTX else None


def ptx_kernel_count(buf: Buffer) -> int:
    """How many kernels (``.entry``) PTX text declares, read without :func:`read_ptx`'s comment stripping
    (most of its time on a large module): ``.entry <name>`` found anywhere, names counted once. A kernel is
    never missed; one named only in a comment would be counted, which counts the module as code, as an unread
    one is (for every nvcc build the count equals :func:`read_ptx`'s, tests/binary/test_ptx.py)."""
    if len(buf) > MAX_PTX_BYTES:
        raise BinaryFormatError(f"PTX text of {len(buf)} bytes is larger than {MAX_PTX_BYTES}")
    return len({m.group(1) for m in _ENTRY.finditer(bytes(buf))})
