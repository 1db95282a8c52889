"""Hostile variants of a real wheel for the repair tests, written with :mod:`zipfile` and :mod:`csv` (never
with cudaship's writer): members replaced, added or removed, RECORD written to match them, and member names
that :mod:`zipfile` will not write (a NUL) patched into the bytes afterwards."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from collections.abc import Mapping
from pathlib import Path


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def record_of(files: Mapping[str, bytes], record_path: str, unlisted: tuple[str, ...] = ()) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)  # lines end in \r\n, so a field holding \r is quoted too
    for name, data in files.items():
        if name != record_path and name not in unlisted:
            writer.writerow([name, digest(data), len(data)])
    writer.writerow([record_path, "", ""])
    return out.getvalue().encode()


def rebuild(
    base: Path,
    out: Path,
    *,
    replace: Mapping[str, bytes] | None = None,
    add: Mapping[str, bytes] | None = None,
    patch_names: Mapping[str, bytes] | None = None,
) -> Path:
    """``base`` rewritten to ``out`` (same file name under ``out``'s directory when ``out`` is one) with
    ``replace`` members' bytes changed and ``add`` members added, RECORD matching them; each name in
    ``patch_names`` (a placeholder of the same length) is then replaced in the archive's bytes by the raw
    name given (for names :mod:`zipfile` cannot write, such as one holding a NUL; those stay unlisted)."""
    target = out / base.name if out.is_dir() else out
    replace = dict(replace or {})
    with zipfile.ZipFile(base) as src:
        files = {i.filename: src.read(i) for i in src.infolist() if not i.is_dir()}
    record_path = next(n for n in files if n.endswith(".dist-info/RECORD"))
    files.update(replace)
    files.update(add or {})
    files.pop(record_path)
    files[record_path] = record_of(files, record_path, tuple(patch_names or ()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o100644 << 16
            zf.writestr(info, data, zipfile.ZIP_DEFLATED)
    raw = buffer.getvalue()
    for placeholder, name in (patch_names or {}).items():
        old = placeholder.encode()
        assert len(old) == len(name) and raw.count(old) == 2, placeholder  # local and central header
        raw = raw.replace(old, name)
    target.write_bytes(raw)
    return target
