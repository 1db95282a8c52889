"""The one output writer (``safe_write.py``). Each input is written and appended, as text, to every kind of
target: nothing, a regular file, a link to one, a dangling link, a directory, a FIFO nobody reads, a link to a
second /dev/null made with mknod in the scratch directory, a link to a directory. Besides the error contract,
each run checks that the kind of what was there is unchanged (a device stays a device, a link stays a link),
that a regular file holds exactly what was written, and that no temporary file is left behind."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from cudaship.errors import UsageError
from cudaship.safe_write import append_text, write_text
from fuzz._harness import Target
from fuzz.targets._scratch import scratch

KINDS = ("none", "file", "link-file", "dangling", "dir", "fifo", "link-device", "link-dir")


class BrokenPromise(Exception):
    """The writer replaced something it must not, or left a temporary file."""


def _setup(root: Path, kind: str) -> Path:
    target = root / "out.txt"
    if kind == "file":
        target.write_text("old\n")
    elif kind == "link-file":
        (root / "real.txt").write_text("old\n")
        target.symlink_to("real.txt")
    elif kind == "dangling":
        target.symlink_to("missing/real.txt")
    elif kind == "dir":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "link-device":
        device = root / "null"
        os.mknod(device, 0o666 | stat.S_IFCHR, os.stat("/dev/null").st_rdev)
        target.symlink_to("null")
    elif kind == "link-dir":
        (root / "d").mkdir()
        target.symlink_to("d")
    return target


def run(data: bytes) -> object:
    """Every kind of target, written and appended to, with the input as the text."""
    text = data.decode("utf-8", "replace")
    return [_one(kind, append, text) for kind in KINDS for append in (False, True)]


def _one(kind: str, append: bool, text: str) -> bool:
    root = scratch() / "writer"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    target = _setup(root, kind)
    before = os.lstat(target).st_mode if kind != "none" else None
    try:
        (append_text if append else write_text)(target, text)
        wrote = True
    except UsageError:
        wrote = False
    after = os.lstat(target).st_mode if os.path.lexists(target) else None
    if before is not None and after is not None and stat.S_IFMT(before) != stat.S_IFMT(after):
        raise BrokenPromise(f"{kind}: the target changed kind")
    if kind in ("link-device",) and not stat.S_ISCHR(os.stat(root / "null").st_mode):
        raise BrokenPromise("the device was replaced")
    leftovers = [p.name for p in root.iterdir() if p.name.endswith(".tmp")]
    if leftovers:
        raise BrokenPromise(f"temporary files left: {leftovers}")
    if wrote and kind in ("none", "file", "link-file"):
        expected = ("old\n" + text if append and kind != "none" else text).encode("utf-8")
        if Path(os.path.realpath(target)).read_bytes() != expected:
            raise BrokenPromise(f"{kind}: the file does not hold what was written")
    return wrote


TARGET = Target(
    name="writer",
    summary="safe_write write_text/append_text onto files, links, devices, FIFOs and directories",
    run=run,
    seed_kinds=("policy",),
    modules=("safe_write.py",),
)
