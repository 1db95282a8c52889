"""Where distributions come from, besides the index: an installed environment, a wheelhouse, the
knowledge table. Each source answers :meth:`find` (newest fitting distribution or None)."""

from __future__ import annotations

import csv
import io
import json
import posixpath
import subprocess
import zipfile
from pathlib import Path
from typing import Protocol

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaship.errors import CudashipError, UsageError
from cudaship.knowledge import providers as known
from cudaship.providers.distinfo import from_wheel_zip, parse_core_metadata
from cudaship.providers.records import Distribution, Target
from cudaship.providers.select import Candidate, best, wheel_version


class Source(Protocol):
    @property
    def label(self) -> str: ...

    def find(self, name: str, spec: SpecifierSet, target: Target) -> Distribution | None: ...


# --- an installed environment -------------------------------------------------------------------------------


def site_packages(env: str) -> list[Path]:
    """The site-packages directories of ``env``: a directory is taken as one; a file is a Python interpreter,
    asked for its purelib and platlib."""
    path = Path(env)
    if path.is_dir():
        return [path]
    if not path.exists():
        raise UsageError("no such file or directory", path=env)
    code = (
        "import json, sysconfig; "
        "print(json.dumps([sysconfig.get_path('purelib'), sysconfig.get_path('platlib')]))"
    )
    try:
        done = subprocess.run([env, "-c", code], capture_output=True, text=True, timeout=60, check=True)
        dirs = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        raise UsageError(f"not a Python interpreter that answers: {e}", path=env) from None
    return list(dict.fromkeys(Path(d) for d in dirs if d))


class EnvSource:
    """Installed distributions: METADATA and RECORD of each ``*.dist-info`` in the site-packages given."""

    def __init__(self, env: str) -> None:
        self.env = env
        self.dirs = site_packages(env)
        self._dists: dict[str, Distribution] = {}
        for d in self.dirs:
            for info in sorted(d.glob("*.dist-info")):
                dist = self._read(d, info)
                if dist is not None:
                    self._dists.setdefault(dist.name, dist)

    @property
    def label(self) -> str:
        return f"env {self.env}"

    def distributions(self) -> tuple[Distribution, ...]:
        """Every distribution found, in name order (the first site-packages directory holding a name wins)."""
        return tuple(self._dists[name] for name in sorted(self._dists))

    def _read(self, root: Path, info: Path) -> Distribution | None:
        try:
            name, version, requires, extras = parse_core_metadata((info / "METADATA").read_bytes())
            record = (info / "RECORD").read_text(encoding="utf-8")
        except (OSError, CudashipError):
            return None
        files = []
        for row in csv.reader(io.StringIO(record)):
            if not row or not row[0]:
                continue
            # RECORD paths are relative to site-packages, ``/``-separated; normalised lexically (a stat per
            # file costs seconds on torch's 12,000 files): ``../../bin/x`` lies outside (scripts, headers)
            rel = posixpath.normpath(row[0].replace("\\", "/"))
            if rel.startswith(("/", "../")) or rel == ".." or (len(rel) > 1 and rel[1] == ":"):
                continue
            files.append(rel)
        return Distribution(name, version, requires, tuple(sorted(files)), f"env {info}", extras)

    def find(self, name: str, spec: SpecifierSet, target: Target) -> Distribution | None:
        dist = self._dists.get(canonicalize_name(name))
        if dist is None:
            return None
        try:
            if not spec.contains(Version(dist.version), prereleases=True):
                return None
        except InvalidVersion:
            return None
        return dist


# --- a wheelhouse ---------------------------------------------------------------------------------------


class WheelhouseSource:
    """Wheels in a directory (``--find-links DIR``): the newest fitting one per project, read locally."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        path = Path(directory)
        if not path.is_dir():
            raise UsageError("not a directory", path=directory)
        self._by_name: dict[str, list[Candidate]] = {}
        for f in sorted(path.glob("*.whl")):
            version = wheel_version(f.name)
            if version is None:
                continue
            project = canonicalize_name(f.name.split("-", 1)[0])
            self._by_name.setdefault(project, []).append(Candidate(f.name, version, str(f)))

    @property
    def label(self) -> str:
        return f"wheelhouse {self.directory}"

    def find(self, name: str, spec: SpecifierSet, target: Target) -> Distribution | None:
        chosen = best(self._by_name.get(canonicalize_name(name), ()), spec, target)
        if chosen is None:
            return None
        try:
            with zipfile.ZipFile(chosen.location) as zf:
                return from_wheel_zip(zf, chosen.filename, f"wheelhouse {chosen.location}")
        except (OSError, zipfile.BadZipFile, CudashipError):
            return None


# --- the knowledge table (offline only) ---------------------------------------------------------------------


class KnowledgeSource:
    """What NVIDIA's and a few major packages ship, from ``knowledge/data/providers.toml`` and
    ``nvidia_libraries.toml``; consulted only offline or when the index cannot be reached."""

    label = "knowledge table (offline)"

    def find(self, name: str, spec: SpecifierSet, target: Target) -> Distribution | None:
        row = known.known_distribution(canonicalize_name(name), spec, target.os)
        if row is None:
            return None
        return Distribution(
            row.name, row.version, row.requires_dist, row.files, f"knowledge ({row.source})", row.extras
        )
