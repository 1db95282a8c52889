"""Hostile archives, built member by member (nothing here goes through a library's safe writer)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

#: Member kinds: a regular file, a directory, a symbolic or hard link (``data`` is the link target).
FILE, DIR, SYMLINK, HARDLINK = "file", "dir", "symlink", "hardlink"


@dataclass(frozen=True)
class M:
    name: str
    data: bytes | str = b"x"
    kind: str = FILE
    pax_path: str | None = None  #: a PAX ``path`` record overriding the header's name (tar only)


def tar_bytes(members: list[M], mode: str = "w:xz", fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode, format=fmt) as tf:  # type: ignore[call-overload]
        for m in members:
            info = tarfile.TarInfo(m.name)
            if m.pax_path is not None:
                info.pax_headers = {"path": m.pax_path}
            if m.kind == DIR:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tf.addfile(info)
            elif m.kind in (SYMLINK, HARDLINK):
                info.type = tarfile.SYMTYPE if m.kind == SYMLINK else tarfile.LNKTYPE
                info.linkname = str(m.data)
                tf.addfile(info)
            else:
                data = m.data if isinstance(m.data, bytes) else m.data.encode()
                info.size, info.mode = len(data), 0o644
                tf.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def zip_bytes(members: list[M], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        for m in members:
            info = zipfile.ZipInfo(m.name)
            info.compress_type = compression
            data = m.data if isinstance(m.data, bytes) else m.data.encode()
            if m.kind == SYMLINK:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            elif m.kind == DIR:
                info.external_attr = (stat.S_IFDIR | 0o755) << 16
            else:
                info.external_attr = (stat.S_IFREG | 0o644) << 16
            zf.writestr(info, data)
    return buffer.getvalue()


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under ``root`` (links not followed) with its size, link count and link target."""
    out: dict[str, tuple[int, int, str]] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory, name)
            st = path.lstat()
            target = os.readlink(path) if path.is_symlink() else ""
            out[str(path.relative_to(root))] = (st.st_size if not path.is_dir() else 0, st.st_nlink, target)
    return out


class Jail:
    """A directory holding the destination, a sentinel file and a sentinel directory next to it.

    :meth:`assert_untouched` checks that nothing next to the destination changed and that every link under
    the destination resolves inside it.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dest = root / "dest"
        self.dest.mkdir(parents=True)
        (root / "sentinel.txt").write_text("outside\n")
        (root / "outside").mkdir()
        (root / "outside" / "keep.txt").write_text("keep\n")
        self.before = {k: v for k, v in snapshot(root).items() if not k.startswith("dest")}

    def assert_untouched(self) -> None:
        after = {k: v for k, v in snapshot(self.root).items() if not k.startswith("dest")}
        assert after == self.before, "something outside the destination changed"
        assert (self.root / "sentinel.txt").read_text() == "outside\n"
        real = os.path.realpath(self.dest)
        for path, (_size, _links, target) in snapshot(self.dest).items():
            if target:
                resolved = os.path.realpath(self.dest / path)
                assert resolved == real or resolved.startswith(real + os.sep), f"{path} -> {target} escapes"
