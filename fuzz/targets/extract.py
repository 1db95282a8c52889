"""Toolkit archive extraction: ``toolkit/extract.py`` extract_archive on .tar.xz/.tar.gz/.tar.bz2/.tar/.zip.

Besides the error contract, every run checks that nothing was written outside the destination: the
destination sits in a jail directory next to a sentinel file; after the run the jail must hold only the
destination and the untouched sentinel (same content, one link), and every symlink under the destination
must resolve inside it.
"""

from __future__ import annotations

import os
from pathlib import Path

from cudaship import tree
from cudaship.toolkit.extract import ExtractLimits, extract_archive
from fuzz._harness import Target
from fuzz.targets._scratch import scratch

_SENTINEL = b"outside the destination\n"
#: Small enough that a bomb is stopped quickly, large enough for every seed.
LIMITS = ExtractLimits(max_total_bytes=64 << 20, max_member_bytes=32 << 20, max_members=10_000)


class Escape(Exception):
    """Extraction wrote or linked outside its destination."""


def suffix_for(data: bytes) -> str:
    """The archive name a download would have, from the first bytes (so mutations keep their format)."""
    if data.startswith(b"\xfd7zXZ"):
        return ".tar.xz"
    if data.startswith(b"\x1f\x8b"):
        return ".tar.gz"
    if data.startswith(b"BZh"):
        return ".tar.bz2"
    if data.startswith(b"PK"):
        return ".zip"
    return ".tar"


def run(data: bytes) -> object:
    jail = scratch() / "extract"
    tree.remove(jail)  # no recursion: an archive may hold a tree deeper than the recursion limit
    dest = jail / "dest"
    dest.mkdir(parents=True)
    sentinel = jail / "sentinel"
    sentinel.write_bytes(_SENTINEL)
    name = f"component-linux-x86_64-1.0-archive{suffix_for(data)}"
    archive = scratch() / name
    archive.write_bytes(data)
    try:
        return extract_archive(archive, dest, filename=name, limits=LIMITS)
    finally:
        check_jail(jail, dest, sentinel)


def check_jail(jail: Path, dest: Path, sentinel: Path) -> None:
    """Raise :class:`Escape` if anything under ``jail`` besides ``dest`` changed or a link leaves ``dest``."""
    found = sorted(p.name for p in jail.iterdir())
    if found != ["dest", "sentinel"]:
        raise Escape(f"extraction created {found} next to its destination")
    st = sentinel.lstat()
    if sentinel.is_symlink() or st.st_nlink != 1 or sentinel.read_bytes() != _SENTINEL:
        raise Escape("the file next to the destination was replaced, linked or written")
    root = os.path.realpath(dest)
    for directory, entries in tree.walk(dest):
        for entry in entries:
            path = os.path.join(directory, entry.name)
            if os.path.islink(path):
                resolved = os.path.realpath(path)
                if resolved != root and not resolved.startswith(root + os.sep):
                    raise Escape(f"{os.path.relpath(path, dest)} links outside the destination")


TARGET = Target(
    name="extract",
    summary="extract_archive on redist .tar.xz/.zip (tests/toolkit builders) and tar.gz/bz2/tar with links",
    run=run,
    seed_kinds=("extract",),
    modules=("toolkit/extract.py",),
)
