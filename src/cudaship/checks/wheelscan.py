"""One pass over a wheel for the audit: every member decompressed once, hashed for RECORD, and the native
ones read into :class:`FileReport` records while their bytes are at hand.

Members are spread over worker threads (zlib inflation and hashing release the GIL, so two cores overlap the
decompression of two members). A native member's bytes go to memory when small and to an anonymous temporary
file, mapped, when large, so peak memory stays bounded whatever the wheel's size. Members are handed out largest
first so the cores finish together.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from cudaship.binary.records import Buffer
from cudaship.errors import WheelError
from cudaship.inspection.records import FileReport
from cudaship.wheel.metadata import (
    DistInfo,
    RecordProblem,
    RecordVerifier,
    b64_digest,
    find_dist_info,
    read_dist_info,
)

#: Largest member the audit unpacks (as declared by the archive).
MAX_MEMBER_SIZE = 8 << 30
#: A member declaring more than this many times its compressed size (and over RATIO_FLOOR) is a zip bomb.
MAX_RATIO = 200
RATIO_FLOOR = 32 << 20
#: Native members up to this size are held in memory; larger ones go to a temporary file.
IN_MEMORY_LIMIT = 32 << 20
_CHUNK = 1 << 20
#: Largest dist-info file (METADATA, WHEEL, RECORD) read.
_META_LIMIT = 64 << 20

_NATIVE_NAME = re.compile(
    r"(?:\.so(?:\.[0-9][0-9A-Za-z.]*)?|\.dll|\.pyd|\.exe|\.dylib|\.cubin|\.fatbin|\.ptx|\.lib)$",
    re.IGNORECASE,
)
_NEVER_NATIVE = re.compile(
    r"(?:\.py|\.pyi|\.pyc|\.txt|\.md|\.rst|\.json|\.toml|\.cfg|\.ini|\.yaml|\.yml|\.h|\.hpp|\.hh|\.cuh|\.inl"
    r"|\.c|\.cc|\.cpp|\.cu|\.cmake|\.html|\.css|\.js|\.typed|\.dist-info/[^/]+)$",
    re.IGNORECASE,
)
_MAGICS = (
    b"\x7fELF",
    b"MZ",
    b"\xfe\xed\xfa\xce",
    b"\xce\xfa\xed\xfe",
    b"\xfe\xed\xfa\xcf",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
    b"\x50\xed\x55\xba",
    b"!<arch>\n",
)


def is_native(name: str, head: bytes) -> bool:
    """Whether the audit reads this member as a binary: by name, or by its first bytes."""
    if _NEVER_NATIVE.search(name):
        return False
    return bool(_NATIVE_NAME.search(name)) or head.startswith(_MAGICS)


@dataclass(frozen=True)
class MemberFacts:
    name: str
    size: int  #: uncompressed size as streamed
    compressed_size: int


@dataclass(frozen=True)
class ScannedWheel:
    """Everything one pass over a wheel produced."""

    path: str
    filename: str
    dist: DistInfo
    members: tuple[MemberFacts, ...]
    reports: dict[str, FileReport]  #: native members by path inside the wheel
    record_problems: tuple[RecordProblem, ...]
    unreadable: tuple[
        tuple[str, str], ...
    ]  #: (member, one-line reason) for members that could not be streamed

    @property
    def uncompressed_size(self) -> int:
        return sum(m.size for m in self.members)


class ScanObserver:
    """Progress hooks (do nothing by default)."""

    def planned(self, total_bytes: int) -> None:
        """Called once with the sum of compressed member sizes."""

    def advanced(self, nbytes: int) -> None:
        """Another member of ``nbytes`` compressed bytes is done."""


@dataclass
class _Result:
    name: str
    size: int
    digest: str | None
    algorithm: str
    report: FileReport | None
    error: str | None


def _check_bomb(info: zipfile.ZipInfo) -> str | None:
    if info.file_size > MAX_MEMBER_SIZE:
        return f"declares {info.file_size} bytes, over the {MAX_MEMBER_SIZE} byte limit (zip bomb?)"
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        return f"compression ratio over {MAX_RATIO}:1 (zip bomb?)"
    return None


@contextmanager
def _spool(size: int) -> Iterator[tuple[Callable[[bytes], None], Callable[[], Buffer]]]:
    """A sink for a member's bytes: memory when small, else a temp file mapped at the end."""
    if size <= IN_MEMORY_LIMIT:
        parts = bytearray()

        def append(chunk: bytes) -> None:
            parts.extend(chunk)

        yield append, lambda: parts
        return
    tmp: IO[bytes] = tempfile.TemporaryFile(prefix="cudaship-audit-")
    mapped: list[mmap.mmap] = []

    def finish() -> Buffer:
        tmp.flush()
        if tmp.tell() == 0:
            return b""
        m = mmap.mmap(tmp.fileno(), 0, access=mmap.ACCESS_READ)
        mapped.append(m)
        return m

    try:
        def write(chunk: bytes) -> None:
            tmp.write(chunk)

        yield write, finish
    finally:
        for m in mapped:
            try:
                m.close()
            except BufferError:  # a view outlived the report; the map goes when it does
                pass
        tmp.close()


def _scan_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, algorithm: str, container: str, details: bool
) -> _Result:
    from cudaship.inspection.dispatch import inspect_buffer

    name = info.filename
    bomb = _check_bomb(info)
    if bomb is not None:
        return _Result(name, info.file_size, None, algorithm, None, bomb)
    hasher = hashlib.new(algorithm)
    size = 0
    report: FileReport | None = None
    try:
        with zf.open(info) as src:
            first = src.read(_CHUNK)
            native = is_native(name, first[:16])
            if not native:
                chunk = first
                while chunk:
                    hasher.update(chunk)
                    size += len(chunk)
                    chunk = src.read(_CHUNK)
            else:
                with _spool(info.file_size) as (write, finish):
                    chunk = first
                    while chunk:
                        hasher.update(chunk)
                        write(chunk)
                        size += len(chunk)
                        if size > info.file_size:
                            raise WheelError(f"more data than the declared {info.file_size} bytes")
                        chunk = src.read(_CHUNK)
                    buf = finish()
                    report = inspect_buffer(buf, name, container=container, details=details)
                    if isinstance(buf, bytearray):
                        buf.clear()
    except WheelError as e:
        return _Result(name, size, None, algorithm, None, e.message)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError, RuntimeError) as e:
        first_line = (str(e).strip().splitlines() or [""])[0]
        return _Result(name, size, None, algorithm, None, f"{type(e).__name__}: {first_line}".rstrip(": "))
    return _Result(name, size, b64_digest(hasher.digest()), algorithm, report, None)


def scan_wheel(
    path: str | os.PathLike[str],
    *,
    workers: int | None = None,
    details: bool = True,
    observer: ScanObserver | None = None,
) -> ScannedWheel:
    """Read the wheel at ``path`` once: dist-info, every member hashed, native members inspected."""
    label = str(path)
    hooks = observer or ScanObserver()
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise WheelError("no such file", path=label) from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as e:
        raise WheelError(f"not a readable zip archive: {e}", path=label) from None
    with zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        names = [i.filename for i in infos]
        seen: set[str] = set()
        for n in names:
            if n in seen:
                raise WheelError(f"member {n} appears twice in the archive", path=label)
            seen.add(n)
        try:
            dist_dir = find_dist_info(names, Path(label).name)
            meta: dict[str, bytes] = {}
            for leaf in ("METADATA", "WHEEL", "RECORD"):
                member = f"{dist_dir}/{leaf}"
                if member in seen:
                    info = zf.getinfo(member)
                    if info.file_size > _META_LIMIT:
                        raise WheelError(f"{member} is {info.file_size} bytes, too large")
                    meta[member] = zf.read(member)
            dist = read_dist_info(dist_dir, meta)
        except WheelError as e:
            raise e.with_path(label) from None
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError, RuntimeError) as e:
            raise WheelError(f"cannot read .dist-info: {type(e).__name__}: {e}", path=label) from None

    verifier = RecordVerifier(dist.record)
    hooks.planned(sum(i.compress_size for i in infos))
    order = sorted(infos, key=lambda i: i.compress_size, reverse=True)
    total = sum(i.file_size for i in infos)
    n_workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    if total < (8 << 20) or len(order) < 2:
        n_workers = 1
    results = _run(label, order, verifier, n_workers, details, hooks)

    reports: dict[str, FileReport] = {}
    unreadable: list[tuple[str, str]] = []
    sizes: dict[str, int] = {}
    for res in results:
        sizes[res.name] = res.size
        if res.error is not None:
            unreadable.append((res.name, res.error))
            verifier.unverified(res.name)
            continue
        assert res.digest is not None
        verifier.observe(res.name, res.algorithm, res.digest, res.size)
        if res.report is not None:
            reports[res.name] = res.report
    members = tuple(
        MemberFacts(i.filename, sizes.get(i.filename, i.file_size), i.compress_size) for i in infos
    )
    return ScannedWheel(
        path=label,
        filename=Path(label).name,
        dist=dist,
        members=members,
        reports=dict(sorted(reports.items())),
        record_problems=verifier.problems(),
        unreadable=tuple(sorted(unreadable)),
    )


def _run(
    label: str,
    order: list[zipfile.ZipInfo],
    verifier: RecordVerifier,
    n_workers: int,
    details: bool,
    hooks: ScanObserver,
) -> list[_Result]:
    if n_workers <= 1:
        with zipfile.ZipFile(label) as zf:
            out = []
            for info in order:
                out.append(_scan_member(zf, info, verifier.algorithm_for(info.filename), label, details))
                hooks.advanced(info.compress_size)
            return out

    local = threading.local()
    opened: list[zipfile.ZipFile] = []
    lock = threading.Lock()

    def work(info: zipfile.ZipInfo) -> _Result:
        zf = getattr(local, "zf", None)
        if zf is None:
            zf = zipfile.ZipFile(label)
            local.zf = zf
            with lock:
                opened.append(zf)
        result = _scan_member(zf, info, verifier.algorithm_for(info.filename), label, details)
        hooks.advanced(info.compress_size)
        return result

    try:
        with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="cudaship-audit") as pool:
            return list(pool.map(work, order))
    finally:
        for zf in opened:
            zf.close()
