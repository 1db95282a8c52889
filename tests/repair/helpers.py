"""What the repair tests read back from a wheel, with readers independent of cudaship's (zipfile,
pyelftools)."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile


def members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        assert zf.testzip() is None
        return {i.filename: zf.read(i) for i in zf.infolist() if not i.is_dir()}


def dynamic(data: bytes) -> dict[str, list[str]]:
    """DT_NEEDED, DT_SONAME, DT_RUNPATH and DT_RPATH entries of an ELF file."""
    out: dict[str, list[str]] = {"needed": [], "soname": [], "runpath": [], "rpath": []}
    elf = ELFFile(io.BytesIO(data))
    for section in elf.iter_sections():
        if not isinstance(section, DynamicSection):
            continue
        for tag in section.iter_tags():
            if tag.entry.d_tag == "DT_NEEDED":
                out["needed"].append(tag.needed)
            elif tag.entry.d_tag == "DT_SONAME":
                out["soname"].append(tag.soname)
            elif tag.entry.d_tag == "DT_RUNPATH":
                out["runpath"].extend(tag.runpath.split(":"))
            elif tag.entry.d_tag == "DT_RPATH":
                out["rpath"].extend(tag.rpath.split(":"))
    return out


def record_matches(files: dict[str, bytes]) -> list[str]:
    """Problems between RECORD and the members (empty when they agree)."""
    record_name = next(n for n in files if n.endswith(".dist-info/RECORD"))
    rows = list(csv.reader(io.StringIO(files[record_name].decode())))
    listed = {r[0] for r in rows}
    problems = [f"unlisted {n}" for n in files if n not in listed]
    for path, digest, size in rows:
        if path == record_name:
            continue
        if path not in files:
            problems.append(f"missing {path}")
            continue
        want = (
            "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(files[path]).digest()).rstrip(b"=").decode()
        )
        if digest != want or int(size) != len(files[path]):
            problems.append(f"mismatch {path}")
    return problems


def requires_dist(files: dict[str, bytes]) -> list[str]:
    metadata = next(v for n, v in files.items() if n.endswith(".dist-info/METADATA"))
    head = metadata.decode().split("\n\n", 1)[0]
    return [line.split(":", 1)[1].strip() for line in head.splitlines() if line.startswith("Requires-Dist:")]
