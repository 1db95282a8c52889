"""The archive layer (``archive/``): :class:`ZipArchive` on the input as a buffer (every member listed,
its head read, streamed to the end and mapped as a buffer), or, when it is no zip, :class:`TarStream` over
it as ``.tar.xz``/``.tar.gz``/``.tar.bz2``/``.tar`` (every member's data read).

Besides the error contract, every run checks what the layer promises: no member produces more than it
declares, and the bytes produced in all stay under the archive's total cap."""

from __future__ import annotations

from cudaship.archive.limits import CHUNK, DEFAULT_LIMITS
from cudaship.archive.tar import TarStream
from cudaship.archive.zip import ZipArchive
from cudaship.errors import ArchiveError, CudashipError
from fuzz._harness import MemoryCeiling, Target
from fuzz.targets._scratch import scratch
from fuzz.targets.extract import suffix_for


class BrokenPromise(Exception):
    """The layer produced more than it may."""


def _zip(data: bytes) -> object:
    archive = ZipArchive(data)
    for member in archive.members():
        try:
            archive.head(member, 16)
            produced = sum(len(chunk) for chunk in archive.chunks(member))
            if produced > member.size:
                raise BrokenPromise(f"{member.name}: {produced} bytes from a member declaring {member.size}")
            with archive.buffer(member) as buf:
                if len(buf) != member.size:
                    raise BrokenPromise(
                        f"{member.name}: a buffer of {len(buf)} bytes, declared {member.size}"
                    )
        except ArchiveError:
            continue  # one member's problem; the others are still read
    if archive.produced > DEFAULT_LIMITS.total_cap(len(data)) + CHUNK:
        raise BrokenPromise(f"{archive.produced} bytes produced from {len(data)}")
    return archive.produced


def _tar(data: bytes) -> object:
    suffix = suffix_for(data)
    path = scratch() / f"input{suffix}"
    path.write_bytes(data)
    kind = {".tar.xz": "xz", ".tar.gz": "gz", ".tar.bz2": "bz2"}.get(suffix, "")
    with TarStream(path, kind=kind) as stream:
        for member in stream:
            if member.isreg():
                with stream.data(member) as f:
                    while f.read(CHUNK):
                        pass
        if stream.reader.produced > DEFAULT_LIMITS.total_cap(len(data)) + CHUNK:
            raise BrokenPromise(f"{stream.reader.produced} bytes produced from {len(data)}")
        return stream.reader.produced


def run(data: bytes) -> object:
    if data.startswith(b"PK"):
        return _zip(data)
    try:
        return _tar(data)
    except CudashipError:
        raise
    except (OSError, EOFError, ValueError) as e:  # tarfile's own errors come as ArchiveError; these would not
        raise BrokenPromise(f"{type(e).__name__} escaped the layer: {e}") from e


TARGET = Target(
    name="archive",
    summary="ZipArchive (list, head, stream, buffer each member) and TarStream on wheels and redist archives",
    run=run,
    seed_kinds=("wheel", "extract"),
    modules=(
        "archive/zip.py",
        "archive/inflate.py",
        "archive/tar.py",
        "archive/spill.py",
        "archive/limits.py",
    ),
    memory=MemoryCeiling(factor=256, constant=32 << 20),
)
