"""Directory trees walked and removed without recursion.

``os.walk`` (before Python 3.12) and ``shutil.rmtree`` recurse once per directory level: a tree a little over
1,000 levels deep (an archive can hold one; ``mkdir -p`` makes one) raises ``RecursionError`` on Python 3.11.
These do the same with an explicit stack, never following links to directories.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path


def walk(root: Path) -> Iterator[tuple[Path, list[os.DirEntry[str]]]]:
    """Each directory under ``root`` (``root`` first) with its entries sorted by name, depth first; links to
    directories are entries, not walked. Unreadable directories are skipped."""
    stack: list[Path] = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        yield directory, entries
        subdirs = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(Path(entry.path))
            except OSError:
                continue
        stack.extend(reversed(subdirs))


def remove(root: Path) -> None:
    """Delete ``root`` and everything under it, links removed, never followed; errors ignored (best effort,
    like ``shutil.rmtree(ignore_errors=True)``)."""
    try:
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            os.unlink(root)
            return
    except OSError:
        return
    order: list[Path] = []
    for directory, entries in walk(root):
        order.append(directory)
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.path)
            except OSError:
                continue
    for directory in reversed(order):
        try:
            os.rmdir(directory)
        except OSError:
            continue
